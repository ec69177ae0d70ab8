"""Ctrl-C (SIGINT) and SIGTERM during a sweep.

For the whole sweep, from bringing up the embedded testbed to taking it down, a signal never
cuts Python code mid-step (a KeyboardInterrupt could land inside a revert or the final heal):
it sets a flag that the sweep checks between its steps. The run in progress then has its faults
reverted and its job stopped, the remaining runs are skipped, and the final heal, the tables and
the report are still done. Setup's builds already in flight finish first. A second signal only
says that this is under way.
"""

from __future__ import annotations

import contextlib
import os
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
        # Rendered here, written by the handler with one os.write: a signal may land in the
        # middle of an import (rich loads its emoji table on a first print) or inside the
        # console's own write to a buffered stderr, where a second write through Python's file
        # object raises "reentrant call". The handler imports, parses and buffers nothing.
        self._fd = _fileno(console)
        self._first = _rendered(
            console,
            "interrupted: finishing the current step (faults reverted, job stopped), then the "
            "final heal and the report...",
        )
        self._again = _rendered(console, "already stopping, faults are being reverted; please wait")

    def handle(self, signum: int, frame: FrameType | None) -> None:
        """Set the flag, and say what happens now."""
        first = not self.flag.is_set()
        self.flag.set()
        message = self._first if first else self._again
        with contextlib.suppress(OSError, ValueError):
            if self._fd is not None:
                os.write(self._fd, message)
            else:  # an in-memory console (tests): no buffered stream to re-enter
                self.console.file.write(message.decode("utf-8"))

    @contextmanager
    def installed(self) -> Iterator[threading.Event]:
        """The handler for the body of the `with`; the previous handlers back after it."""
        previous = {sig: signal.signal(sig, self.handle) for sig in SIGNALS}
        try:
            yield self.flag
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def _fileno(console: Console) -> int | None:
    """The file descriptor the console writes to, or None (a console on a StringIO)."""
    try:
        return console.file.fileno()
    except (AttributeError, OSError, ValueError):
        return None


def _rendered(console: Console, message: str) -> bytes:
    """`message` in yellow as this console would print it (plain where it prints no colour)."""
    with console.capture() as captured:
        console.print(Text(message, style="yellow"), highlight=False, soft_wrap=True)
    return captured.get().encode("utf-8", "replace")
