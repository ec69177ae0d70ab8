"""One sweep at a time per results folder: an flock on `<sweep>/.lock`.

The kernel drops an flock when its holder dies, however it dies, so a dead sweep never keeps
the folder locked; the file itself only says who holds it (pid, host, since when).
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from pathlib import Path
from types import TracebackType

from r2bench.errors import EnvironmentFailure

LOCK_NAME = ".lock"


class LockedError(EnvironmentFailure, RuntimeError):
    """Another sweep holds the results folder."""


class SweepLock:
    """An exclusive, non-blocking lock on a sweep folder (a context manager)."""

    def __init__(self, sweep_dir: Path) -> None:
        self.path = Path(sweep_dir) / LOCK_NAME
        self._fd: int | None = None

    def acquire(self) -> SweepLock:
        """Take the lock or raise LockedError naming the holder."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            raise LockedError(
                f"{self.path.parent} is in use by another sweep ({holder}); wait for it to end, "
                "or stop it (Ctrl-C) first"
            ) from None
        me = {"pid": os.getpid(), "host": socket.gethostname(), "since": time.time()}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(me).encode() + b"\n", 0)
        self._fd = fd
        return self

    def release(self) -> None:
        """Let go (idempotent)."""
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> SweepLock:
        return self.acquire()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.release()


def _read_holder(fd: int) -> str:
    try:
        data = json.loads(os.pread(fd, 4096, 0) or b"{}")
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(data["since"])))
        return f"pid {data['pid']} on {data['host']} since {since}"
    except (OSError, ValueError, KeyError, TypeError):
        return "holder unknown"
