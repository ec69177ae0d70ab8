"""A training job's watchdog: an update that makes no progress for S seconds makes the job give
up, as PyTorch's NCCL watchdog does, so a supervisor can restart it from a checkpoint.

PyTorch's own watchdog (the process group's timeout) tears the process down with SIGABRT and
prints nothing the run's analysis can read; this one runs beside it with a shorter limit, prints
the `#train-abort` record (rank 0) and a stderr line, and ends the process with exit 4. The other
ranks wait a moment longer so that rank 0's record gets out before mpirun kills the job.

Pure Python (a thread, a clock, an exit function), so it is tested without torch or a GPU.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable

from r2bench.workloads.train_format import TrainAbort
from r2bench.workloads.train_options import EXIT_TIMEOUT, PROGRAM

POLL_S = 0.05
OTHER_RANKS_GRACE_S = 2.0  # rank 0's record first: mpirun kills every rank once one exits


class Watchdog:
    """Arm it at the start of each update, disarm it at the end; it fires once when an armed
    update has run for longer than `seconds` (plus the grace on ranks other than 0)."""

    def __init__(
        self,
        seconds: float,
        rank: int,
        exit_process: Callable[[int], object] = os._exit,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.seconds = seconds
        self.rank = rank
        self.limit = seconds + (0.0 if rank == 0 else OTHER_RANKS_GRACE_S)
        self._exit = exit_process
        self._clock = clock
        self._lock = threading.Lock()
        self._update: int | None = None
        self._since = 0.0
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="r2bench-watchdog", daemon=True)

    def start(self) -> Watchdog:
        """Start watching (nothing fires until an update is armed)."""
        self._thread.start()
        return self

    def arm(self, update: int) -> None:
        """Update `update` begins now."""
        with self._lock:
            self._update, self._since = update, self._clock()

    def disarm(self) -> None:
        """The armed update completed."""
        with self._lock:
            self._update = None

    def stop(self) -> None:
        """Stop watching (the job ends)."""
        self._stopped.set()
        self._thread.join(timeout=1.0)

    def _watch(self) -> None:
        while not self._stopped.wait(POLL_S):
            with self._lock:
                update, since = self._update, self._since
            if update is not None and self._clock() - since > self.limit:
                self.fire(update)
                return

    def fire(self, update: int) -> None:
        """Give up on `update`: the record (rank 0), a stderr line, exit 4."""
        reason = f"update {update}'s collective did not complete in {self.seconds:g} s"
        if self.rank == 0:
            print(TrainAbort(update, time.time(), float(self.seconds), reason).text(), flush=True)
        print(f"{PROGRAM}: watchdog (rank {self.rank}): {reason}; the job exits",
              file=sys.stderr, flush=True)  # fmt: skip
        self._exit(EXIT_TIMEOUT)
