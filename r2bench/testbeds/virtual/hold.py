"""Who holds a virtual testbed: one holder at a time, host-wide (an flock on `<state>.hold`).

The embedded testbed a sweep brings up (or finds up) is held by that sweep until it ends: a
second sweep waits or refuses, naming the holder, and never adopts it; `testbed down` refuses
to remove a held testbed; doctor names the holder of the processes and faults it finds.

The file sits beside the state directory (`/var/lib/r2bench/virtual/<name>.hold`), not inside
it, because it must exist before `up` creates that directory and outlive `down`, which removes
it. The kernel drops an flock when its holder dies, however it dies, so the lock itself is
never stale; the file's text (pid, the pid's start time, results folder, since, command) only
says who holds it. A holder whose pid is gone, or was reused by another process (its start time
differs), is stale: the next taker takes over and says so.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from r2bench.errors import EnvironmentFailure

POLL_S = 0.5
"""How often a waiting taker tries the lock again."""
SETTLE_S = 2.0
"""How long a taker retries a lock whose file names no live holder: a doctor probing it, or a
taker that has the lock but has not written its name yet."""


class HeldError(EnvironmentFailure, RuntimeError):
    """Another live process holds the testbed; the message names it and what to do."""


def hold_path(state_dir: Path) -> Path:
    """The hold file of the testbed whose state is in `state_dir` (beside it)."""
    return state_dir.parent / f"{state_dir.name}.hold"


def _start_ticks(pid: int) -> int | None:
    """When `pid` started (clock ticks since boot, /proc/<pid>/stat field 22); None: gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()  # the command name may hold spaces
    return int(fields[19]) if len(fields) > 19 and fields[19].isdigit() else None


@dataclass(frozen=True)
class Holder:
    """The process that holds a testbed, as its hold file says."""

    pid: int
    started: int | None
    """The pid's start time (/proc), so that a reused pid is not taken for the holder."""
    host: str
    results: str
    """The results folder of the holder's sweep ('' for a holder that is not a sweep)."""
    since: float
    command: str

    @classmethod
    def me(cls, results: str, command: str) -> Holder:
        """This process, holding for a sweep writing into `results`."""
        pid = os.getpid()
        return cls(pid, _start_ticks(pid), socket.gethostname(), results, time.time(), command)

    def alive(self) -> bool:
        """Whether the holder's process still runs (the same process, not a reused pid)."""
        ticks = _start_ticks(self.pid)
        return ticks is not None and (self.started is None or ticks == self.started)

    def is_me(self) -> bool:
        """Whether this process is the holder."""
        return self.pid == os.getpid() and self.alive()

    def describe(self) -> str:
        """`pid 123 (results folder results/quickstart, since 2026-11-27 15:12:21, `cmd`)`."""
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.since))
        parts = [f"results folder {self.results}"] if self.results else []
        parts.append(f"since {since}")
        if self.command:
            parts.append(f"`{self.command}`")
        return f"pid {self.pid} ({', '.join(parts)})"


def _parse(text: bytes) -> Holder | None:
    try:
        data = json.loads(text)
        return Holder(
            pid=int(data["pid"]),
            started=None if data.get("started") is None else int(data["started"]),
            host=str(data.get("host", "")),
            results=str(data.get("results", "")),
            since=float(data.get("since", 0.0)),
            command=str(data.get("command", "")),
        )
    except (ValueError, KeyError, TypeError):
        return None


def read_holder(state_dir: Path) -> Holder | None:
    """The holder the hold file names, alive or not (None: no hold file, or released)."""
    try:
        return _parse(hold_path(state_dir).read_bytes())
    except OSError:
        return None


def live_holder(state_dir: Path) -> Holder | None:
    """The live process that holds the testbed of `state_dir`, if any (takes no lock)."""
    holder = read_holder(state_dir)
    return holder if holder is not None and holder.alive() else None


def command_line() -> str:
    """This process's command line, as the hold file records it."""
    name = Path(sys.argv[0]).name if sys.argv else "python"
    return " ".join([name, *sys.argv[1:]])


class TestbedHold:
    """The exclusive hold on one testbed (a context manager); see the module docstring."""

    __test__ = False  # not a pytest test class despite the name

    def __init__(self, name: str, state_dir: Path, results: str = "", command: str = "") -> None:
        self.name = name
        self.path = hold_path(state_dir)
        self.me = Holder.me(results, command or command_line())
        self._fd: int | None = None

    def acquire(
        self,
        wait_s: float = 0.0,
        notify: Callable[[str], None] = print,
        stop: threading.Event | None = None,
    ) -> TestbedHold:
        """Take the hold; while another live process has it, wait up to `wait_s` seconds
        (saying so once through `notify`; `stop` set ends the wait), then raise HeldError
        naming it. A stale holder's hold is taken over, with a message."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            self._wait_for(fd, wait_s, notify, stop or threading.Event())
        except BaseException:
            os.close(fd)
            raise
        stale = _parse(os.pread(fd, 4096, 0))
        if stale is not None and not stale.alive():
            notify(
                f"testbed {self.name}: taking over from {stale.describe()}: it is no longer running"
            )
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(asdict(self.me)).encode() + b"\n", 0)
        self._fd = fd
        return self

    def _wait_for(
        self, fd: int, wait_s: float, notify: Callable[[str], None], stop: threading.Event
    ) -> None:
        start = time.monotonic()
        told = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                pass
            holder = _parse(os.pread(fd, 4096, 0))
            waited = time.monotonic() - start
            if holder is None or not holder.alive():
                if waited > max(wait_s, SETTLE_S):
                    raise HeldError(self._refusal(holder, wait_s)) from None
            elif waited >= wait_s:
                raise HeldError(self._refusal(holder, wait_s)) from None
            elif not told:
                notify(
                    f"testbed {self.name} is held by {holder.describe()}: waiting up to "
                    f"{wait_s:g} s for it to be free (--wait-testbed)"
                )
                told = True
            if stop.wait(POLL_S):
                raise HeldError(f"stopped waiting for testbed {self.name}: interrupted")

    def _refusal(self, holder: Holder | None, wait_s: float) -> str:
        who = holder.describe() if holder is not None else "another process"
        waited = f" after waiting {wait_s:g} s" if wait_s > 0 else ""
        return (
            f"testbed {self.name} is held by {who}{waited}; a second sweep never shares it: "
            "wait for that sweep to end (or `--wait-testbed SECONDS`), or give another "
            "testbed with -t TESTBED.yaml"
        )

    def release(self) -> None:
        """Let go (idempotent): the file is emptied, so it names no holder."""
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> TestbedHold:
        return self if self._fd is not None else self.acquire()

    def __exit__(self, *_: object) -> None:
        self.release()
