"""The controller's end of `injectors/agent.sh`: one open command channel per node.

A sweep opens one agent per node before its first run and keeps it for the whole sweep, so
that a fault trigger costs one line on an open channel: the injector was started and checked
(`inject --armed`) before the job launched, and `fire` only hands it a `go`.
"""

from __future__ import annotations

import contextlib
import itertools
import shlex
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field

from r2bench.doctor.run import ClockSample
from r2bench.nodes import Node, NodeError, StreamLine
from r2bench.nodes.base import Session

READY_TIMEOUT_S = 20.0
REPLY_TIMEOUT_S = 30.0
LOG_LINES_KEPT = 2000


@dataclass(frozen=True)
class FaultLine:
    """An injector's event line: `r2b-fault <node epoch> <action> tag=.. kind=.. result=.. k=v`."""

    node_time: float
    action: str
    tag: str
    kind: str
    result: str
    fields: dict[str, str]
    text: str

    @property
    def ok(self) -> bool:
        """The action did what it was asked (or found nothing to do)."""
        return self.result in ("ok", "noop")

    def time_field(self, name: str) -> float | None:
        """A node-clock field of the line (`applied=`, `verified=`...), or None."""
        try:
            return float(self.fields[name].replace(",", "."))
        except (KeyError, ValueError):
            return None


def parse_fault_line(text: str) -> FaultLine | None:
    """Parse one `r2b-fault` line; None for anything else."""
    words = text.split()
    if len(words) < 3 or words[0] != "r2b-fault":
        return None
    try:
        node_time = float(words[1].replace(",", "."))
    except ValueError:
        return None
    fields = dict(word.split("=", 1) for word in words[3:] if "=" in word)
    return FaultLine(
        node_time=node_time,
        action=words[2],
        tag=fields.get("tag", ""),
        kind=fields.get("kind", ""),
        result=fields.get("result", ""),
        fields=fields,
        text=text,
    )


@dataclass
class _Pending:
    futures: dict[str, Future[str]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def new(self, request_id: str) -> Future[str]:
        future: Future[str] = Future()
        with self.lock:
            self.futures[request_id] = future
        return future

    def resolve(self, request_id: str, value: str) -> None:
        with self.lock:
            future = self.futures.pop(request_id, None)
        if future is not None and not future.done():
            future.set_result(value)

    def fail_all(self, error: Exception) -> None:
        with self.lock:
            futures, self.futures = self.futures, {}
        for future in futures.values():
            if not future.done():
                future.set_exception(error)


class NodeAgent:
    """A running `agent.sh` on one node, and the requests sent to it."""

    def __init__(self, node: Node, injectors_dir: str) -> None:
        self.node = node
        self.injectors_dir = injectors_dir
        self.log: list[str] = []
        self._ids = itertools.count(1)
        self._pending = _Pending()
        self._faults: list[FaultLine] = []
        self._cond = threading.Condition()
        self._ready = threading.Event()
        self._session: Session | None = None

    @property
    def name(self) -> str:
        """The node's name."""
        return self.node.name

    def start(self) -> NodeAgent:
        """Start the agent (as root: injectors need it) and wait until it says it is ready."""
        command = ["bash", "--noprofile", "--norc", f"{self.injectors_dir}/agent.sh"]
        self._session = self.node.open_session(command, self._on_line, root=True)
        if not self._ready.wait(READY_TIMEOUT_S):
            tail = " | ".join(self.log[-3:]) or "no output"
            self.close()
            raise NodeError(self.name, shlex.join(command), f"agent did not start: {tail}")
        return self

    def _on_line(self, line: StreamLine) -> None:
        text = line.text
        if text.startswith("r2b-fault "):
            fault = parse_fault_line(text)
            if fault is not None:
                with self._cond:
                    self._faults.append(fault)
                    self._cond.notify_all()
            return
        head, _, rest = text.partition(" ")
        if head in ("r2b-done", "r2b-clock", "r2b-procs"):
            request_id, _, value = rest.partition(" ")
            self._pending.resolve(request_id, value)
        elif head == "r2b-agent":
            self._ready.set()
        else:
            self.log.append(text)
            del self.log[:-LOG_LINES_KEPT]

    # ---- requests ---------------------------------------------------------------------------
    def _send(self, verb: str, *args: str) -> tuple[str, Future[str]]:
        request_id = f"{verb[0]}{next(self._ids)}"
        future = self._pending.new(request_id)
        self._write(shlex.join([verb, request_id, *args]))
        return request_id, future

    def _write(self, line: str) -> None:
        if self._session is None:
            raise NodeError(self.name, line, "agent not started")
        try:
            self._session.send(line)
        except NodeError as exc:
            self._pending.fail_all(exc)
            raise

    def _reply(self, future: Future[str], what: str, timeout: float) -> str:
        try:
            return future.result(timeout)
        except FutureTimeout:
            raise NodeError(self.name, what, f"no answer from the agent in {timeout:g} s") from None

    def run(self, argv: Sequence[str], timeout: float = REPLY_TIMEOUT_S) -> int:
        """Run a command through the agent and return its exit code."""
        _, future = self._send("run", *argv)
        return int(self._reply(future, shlex.join(argv), timeout) or 1)

    def arm(self, argv: Sequence[str]) -> str:
        """Start an `inject --armed` command waiting for `fire`; returns its request id."""
        request_id, _ = self._send("arm", *argv)
        return request_id

    def fire(self, request_id: str) -> float:
        """Release an armed injector; returns the controller time the request left."""
        sent = time.time()
        self._write(shlex.join(["fire", request_id]))
        return sent

    def cancel(self, request_id: str) -> None:
        """Tell an armed injector to leave without touching anything."""
        self._write(shlex.join(["cancel", request_id]))

    def clock(self) -> ClockSample:
        """One clock probe."""
        sent = time.time()
        _, future = self._send("clock")
        value = self._reply(future, "clock", REPLY_TIMEOUT_S)
        return ClockSample(sent, time.time(), float(value.replace(",", ".")))

    def clock_offset(self, probes: int = 3) -> ClockSample:
        """The probe with the shortest round trip of `probes` (NTP style)."""
        return min((self.clock() for _ in range(probes)), key=lambda s: s.round_trip)

    def kill_run(self, run_id: str, timeout: float = REPLY_TIMEOUT_S) -> int:
        """End every process of a run on this node; returns how many are left (0: all gone)."""
        _, future = self._send("kill", run_id)
        return int(self._reply(future, f"kill {run_id}", timeout) or 0)

    def run_processes(self) -> dict[int, str]:
        """Processes of any r2bench run on this node: pid -> run id."""
        _, future = self._send("procs")
        pairs = (
            word.partition("=") for word in self._reply(future, "procs", REPLY_TIMEOUT_S).split()
        )
        return {int(pid): run for pid, _, run in pairs if pid.isdigit()}

    # ---- fault lines ------------------------------------------------------------------------
    def wait_fault(
        self, tag: str, actions: Sequence[str], after: int, timeout: float
    ) -> tuple[FaultLine | None, int]:
        """The first fault line for `tag` with an action in `actions`, at or after index
        `after` of this agent's fault lines; returns it (None on timeout) and the next index."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for index in range(after, len(self._faults)):
                    line = self._faults[index]
                    if line.tag == tag and line.action in actions:
                        return line, index + 1
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not self.alive:
                    return None, len(self._faults)
                self._cond.wait(min(remaining, 0.5))

    @property
    def fault_count(self) -> int:
        """How many fault lines this agent has seen (an index for `wait_fault`)."""
        with self._cond:
            return len(self._faults)

    @property
    def alive(self) -> bool:
        """Whether the agent's channel is still open."""
        return self._session is not None and self._session.alive

    def close(self) -> None:
        """Ask the agent to quit (armed injectors are cancelled) and close the channel."""
        session, self._session = self._session, None
        if session is None:
            return
        asked = False
        with contextlib.suppress(NodeError):
            session.send("quit")
            asked = True
        session.close(end_input=not asked)
        self._pending.fail_all(NodeError(self.name, "agent", "agent closed"))
