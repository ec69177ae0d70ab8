"""Ctrl-C (SIGINT) and SIGTERM during a sweep.

For the whole sweep, from bringing up the embedded testbed to taking it down, a signal never
cuts Python code mid-step (a KeyboardInterrupt could land inside a revert or the final heal):
it sets a flag that the sweep checks between its steps. The run in progress then has its faults
reverted and its job stopped, the remaining runs are skipped, and the final heal, the tables and
the report are still done. Setup's builds already in flight finish first. A second signal only
says that this is under way.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

from rich.console import Console
from rich.text import Text

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupts:
    """The sweep's handler for SIGINT and SIGTERM, and the flag it sets."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.flag = threading.Event()
        # Made here, printed as they are: a signal may land in the middle of an import (rich
        # loads its emoji table on a first print), so the handler parses and imports nothing.
        self._first = Text(
            "interrupted: finishing the current step (faults reverted, job stopped), then the "
            "final heal and the report...",
            style="yellow",
        )
        self._again = Text("already stopping, faults are being reverted; please wait", "yellow")

    def handle(self, signum: int, frame: FrameType | None) -> None:
        """Set the flag, and say what happens now."""
        first = not self.flag.is_set()
        self.flag.set()
        self.console.print(self._first if first else self._again, highlight=False)

    @contextmanager
    def installed(self) -> Iterator[threading.Event]:
        """The handler for the body of the `with`; the previous handlers back after it."""
        previous = {sig: signal.signal(sig, self.handle) for sig in SIGNALS}
        try:
            yield self.flag
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
