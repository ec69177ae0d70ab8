"""Faults in flight: arm around the launch, fire on time, revert, verify, and record every step.

The driver runs a run's schedule (`schedule.fault_actions`) in a thread of its own while the
job runs. Each inject is armed before its schedule starts (`inject --armed`: checks, record and
lease done; while the job launches, or before the launch for a fault due right after it), so
firing is one line on the node's open agent channel. Every step becomes a
`FaultEvent` with the planned time (controller clock), the time the request left (controller),
and the applied/verified times (node clock) plus the node's clock offset, so the history can be
put on one time line.
"""

from __future__ import annotations

import shlex
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from r2bench.errors import EnvironmentFailure
from r2bench.nodes import NodeError
from r2bench.plan.model import FaultStep, PlannedRun
from r2bench.runfolder.runmodel import FaultEvent
from r2bench.sweep.agent import FaultLine, NodeAgent
from r2bench.sweep.schedule import FaultAction, fault_actions

ARM_TIMEOUT_S = 30.0
INJECT_TIMEOUT_S = 30.0
REVERT_TIMEOUT_S = 120.0


class FaultError(EnvironmentFailure, RuntimeError):
    """A fault could not be armed, applied or (worst) reverted."""


@dataclass
class _FaultState:
    step: FaultStep
    agent: NodeAgent
    offset: float
    """The executor's clock offset (its times are read on its clock)."""
    node_offset: float
    """The affected node's: the records put the fault on that node's clock."""
    armed: str | None = None
    seen: int = 0
    """The agent's fault-line count when the injector was started (where its answer starts)."""
    active: bool = False
    cycle: int = 0
    fired: bool = False


def _argv(command: str) -> list[str]:
    return shlex.split(command)


@dataclass
class FaultDriver:
    """Runs one run's fault schedule against the nodes' agents."""

    run: PlannedRun
    agents: Mapping[str, NodeAgent]
    offsets: Mapping[str, float]
    clock: Callable[[], float] = time.time
    history: list[FaultEvent] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    never_fired: list[str] = field(default_factory=list)
    """Faults still armed when the run ended: their trigger was never reached."""

    def __post_init__(self) -> None:
        self._states = {
            # A fault runs on its executor (the node, or the SmartNIC carrying its NIC).
            f.index: _FaultState(
                f,
                self.agents[f.inject.node],
                self.offsets.get(f.inject.node, 0.0),
                self.offsets.get(f.node, self.offsets.get(f.inject.node, 0.0)),
            )
            for f in self.run.faults
        }
        self._anchors: dict[str, float] = {}
        self._wake = threading.Condition()
        self._stop = False
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    # ---- before launch ------------------------------------------------------------------------
    def arm(self) -> None:
        """Arm the first cycle of every fault; FaultError (nothing left armed) if one refuses."""
        self.request_arming()
        self.wait_armed()

    def request_arming(self) -> None:
        """Start every fault's first-cycle injector (`--armed`) without waiting for it to be
        ready: its checks, record and lease take tens of ms on the node, which the launch can
        overlap. `wait_armed` collects the answers."""
        for state in self._states.values():
            self._request(state)

    def wait_armed(self) -> None:
        """Wait until every requested injector says `armed`; FaultError (nothing left armed)
        if one refuses or does not answer."""
        try:
            for state in self._states.values():
                self._await(state)
        except FaultError:
            self._cancel_armed()
            raise

    def _arm(self, state: _FaultState) -> None:
        self._request(state)
        self._await(state)

    def _request(self, state: _FaultState) -> None:
        argv = _argv(state.step.inject.command)
        state.seen = state.agent.fault_count
        state.armed = state.agent.arm([*argv[:3], "--armed", *argv[3:]])

    def _await(self, state: _FaultState) -> None:
        step = state.step
        line, _ = state.agent.wait_fault(step.tag, ("armed", "inject"), state.seen, ARM_TIMEOUT_S)
        if line is None or line.action != "armed" or not line.ok:
            state.armed = None
            why = line.text if line else f"no answer in {ARM_TIMEOUT_S:g} s"
            raise FaultError(f"fault {step.index} ({step.kind} {step.node}/{step.nic}): {why}")

    # ---- while the job runs ---------------------------------------------------------------------
    def start(self, launched_at: float) -> None:
        """The job was launched at `launched_at` (controller clock): start the schedule."""
        self.set_anchor("launch", launched_at)
        self._thread = threading.Thread(target=self._loop, daemon=True, name="r2bench-faults")
        self._thread.start()

    def set_anchor(self, anchor: str, at: float) -> None:
        """Record when an anchor happened (controller clock); the first time wins."""
        with self._wake:
            self._anchors.setdefault(anchor, at)
            self._wake.notify_all()

    def _loop(self) -> None:
        for action in fault_actions(self.run.faults):
            at = self._wait_until(action)
            if at is None:
                return
            try:
                self._do(action, at)
            except (FaultError, NodeError) as exc:
                self._problem(str(exc))

    def _wait_until(self, action: FaultAction) -> float | None:
        """Sleep until the action's planned time; None if stopped (or its anchor never came)."""
        with self._wake:
            while action.anchor not in self._anchors:
                if self._stop:
                    return None
                self._wake.wait(0.5)
            planned = self._anchors[action.anchor] + action.at_s
            while (remaining := planned - self.clock()) > 0:
                if self._stop:
                    return None
                self._wake.wait(min(remaining, 0.5))
            return None if self._stop else planned

    def _do(self, action: FaultAction, planned: float) -> None:
        state = self._states[action.fault.index]
        with self._lock:
            if action.kind == "inject":
                if state.armed is None and action.cycle > 0:
                    self._arm(state)
                self._fire(state, action.cycle, planned)
            else:
                self._revert(state, planned)
                if not action.last_cycle and not self._stop:
                    self._arm(state)

    def _fire(self, state: _FaultState, cycle: int, planned: float) -> None:
        if state.armed is None:
            return
        agent, step = state.agent, state.step
        seen = agent.fault_count
        requested = agent.fire(state.armed)
        state.armed, state.cycle, state.fired = None, cycle, True
        line, _ = agent.wait_fault(step.tag, ("inject",), seen, INJECT_TIMEOUT_S)
        state.active = line is not None and line.result == "ok"
        self._record(state, "inject", line, planned=planned, requested=requested)
        if not state.active:
            raise FaultError(f"fault {step.index} on {step.node}: inject failed: {_text(line)}")

    def _revert(self, state: _FaultState, planned: float | None) -> None:
        if not state.active:
            return
        agent, step = state.agent, state.step
        seen = agent.fault_count
        requested = self.clock()
        code = agent.run(_argv(step.revert.command), timeout=REVERT_TIMEOUT_S)
        line, _ = agent.wait_fault(step.tag, ("revert",), seen, 5.0)
        self._record(state, "revert", line, planned=planned, requested=requested, ok=code == 0)
        if code != 0:
            raise FaultError(
                f"fault {step.index} ({step.kind} {step.node}/{step.nic}) NOT reverted "
                f"(exit {code}): {_text(line)}; the node's lease will retry, fix it by hand "
                f"or run `r2bench heal`"
            )
        state.active = False
        self._verify(state)

    def _verify(self, state: _FaultState) -> None:
        """Ask the injector for the state it sees: the fault must be gone."""
        agent, step = state.agent, state.step
        seen = agent.fault_count
        agent.run(_argv(step.status.command))
        line, _ = agent.wait_fault(step.tag, ("status",), seen, 5.0)
        healthy = line is not None and "state=inactive" in line.text
        self._record(state, "verify", line, ok=healthy)
        if not healthy:
            raise FaultError(
                f"fault {step.index} ({step.kind} {step.node}/{step.nic}) still active after "
                f"revert: {_text(line)}"
            )

    # ---- the end ------------------------------------------------------------------------------
    def finish(self) -> None:
        """Stop the schedule, cancel armed injectors, revert and verify every active fault.

        Never raises: problems are kept in `problems` (a revert that failed is fatal to the
        sweep; the caller decides)."""
        with self._wake:
            self._stop = True
            self._wake.notify_all()
        if self._thread is not None:
            self._thread.join(REVERT_TIMEOUT_S + INJECT_TIMEOUT_S)
        with self._lock:
            self._cancel_armed()
            for state in self._states.values():
                try:
                    self._revert(state, None)
                except (FaultError, NodeError) as exc:
                    self._problem(str(exc))

    def _cancel_armed(self) -> None:
        for state in self._states.values():
            if state.armed is not None and not state.fired:
                step = state.step
                self.never_fired.append(f"fault {step.index} ({step.kind} {step.node}/{step.nic})")
            if state.armed is not None:
                try:
                    state.agent.cancel(state.armed)
                except NodeError as exc:
                    self._problem(str(exc))
                state.armed = None

    def _problem(self, text: str) -> None:
        self.problems.append(text)

    def _record(
        self,
        state: _FaultState,
        action: str,
        line: FaultLine | None,
        *,
        planned: float | None = None,
        requested: float | None = None,
        ok: bool | None = None,
    ) -> None:
        step = state.step
        # Times the executor reported, moved onto the affected node's clock: the records take a
        # fault's clock_offset_s as its node's (the same on both when the node runs it itself).
        shift = state.node_offset - state.offset

        def on_node(value: float | None) -> float | None:
            return None if value is None else value + shift

        node_time = line.node_time if line else None
        applied = on_node(line.time_field("applied")) if line else None
        event = FaultEvent.model_validate(
            {
                "action": action,
                "fault": step.index,
                "kind": step.kind,
                "node": step.node,
                "nic": step.nic,
                "tag": step.tag,
                "time": applied or on_node(node_time),
                "controller_time": requested if requested is not None else self.clock(),
                "ok": (line is not None and line.ok) if ok is None else ok,
                "detail": _text(line),
                "cycle": state.cycle,
                "planned_at": planned,
                "requested_at": requested,
                "applied_at": applied,
                "verified_at": on_node(line.time_field("verified")) if line else None,
                "clock_offset_s": state.node_offset,
            }
        )
        self.history.append(event)


def _text(line: FaultLine | None) -> str:
    return line.text if line else "no event line from the injector"
