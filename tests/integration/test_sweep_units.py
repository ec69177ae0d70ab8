"""The sweep's pieces on this machine: the node agent (real bash, real FIFOs, real processes),
armed injects through the real lib.sh, the fault schedule and driver, the lock, the summary.

Faults here are of a test-only kind (`file_fault.sh`: the "link" is a state file), written
beside a copy of the real injectors, so lib.sh's armed mode, records and leases run for real
without root or network namespaces.

This module holds those with real processes; the same subject's other tests:
tests/unit/test_sweep_units.py (its pure tests).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

import pytest

from r2bench.analysis.windows import fault_windows
from r2bench.nodes import LocalNode
from r2bench.plan.model import PlannedRun
from r2bench.sweep.agent import NodeAgent
from r2bench.sweep.faults import FaultDriver, FaultError
from r2bench.sweep.lock import LockedError, SweepLock
from tests.support.sweep_units import fault_step


@pytest.fixture
def agent(injectors: Path) -> Iterator[NodeAgent]:
    agent = NodeAgent(LocalNode("node1", sudo=False), str(injectors)).start()
    yield agent
    agent.close()


# ---- the injectors on a node ----------------------------------------------------------------
def test_injectors_go_over_in_one_file_and_only_when_changed(tmp_path: Path) -> None:
    """Every script arrives whole with its digest; the staged tar is gone; a second install
    of the same set copies nothing; a changed set is copied again."""
    from r2bench.sweep.nodeside import _injector_files, injectors_current, install_injectors

    node, target = LocalNode("node1", sudo=False), str(tmp_path / "work" / "injectors")
    with mock.patch.object(node, "put", wraps=node.put) as put:
        assert install_injectors(node, target) is True
        assert put.call_count == 1, "one file goes over"
        assert not Path(put.call_args.args[1]).exists(), "the staged tar is removed"
        for script in _injector_files():
            assert (Path(target) / script.name).read_bytes() == script.read_bytes()
        assert not list(Path(target).glob(".unpack.*")), "no unpack folder left"
        assert install_injectors(node, target) is False and put.call_count == 1
        (Path(target) / ".digest").write_text("older\n")
        assert not injectors_current(node, target, "0" * 16)
        assert install_injectors(node, target) is True and put.call_count == 2


# ---- the agent -------------------------------------------------------------------------------
def test_agent_runs_commands_and_reports_exit_codes(agent: NodeAgent) -> None:
    assert agent.run(["bash", "-c", "exit 3"]) == 3
    assert agent.run(["true"]) == 0
    sample = agent.clock_offset()
    assert sample.round_trip < 1.0 and abs(sample.offset) < sample.round_trip + 0.01


def test_agent_ends_exactly_the_processes_of_one_run(agent: NodeAgent) -> None:
    env = {**os.environ, "R2B_RUN": "run-a"}
    mine = subprocess.Popen(["sleep", "60"], env=env)
    other = subprocess.Popen(["sleep", "60"], env={**os.environ, "R2B_RUN": "run-b"})
    try:
        assert agent.run_processes().get(mine.pid) == "run-a"
        assert agent.kill_run("run-a") == 0
        assert mine.wait(5) != 0
        assert other.poll() is None and agent.run_processes().get(other.pid) == "run-b"
    finally:
        for proc in (mine, other):
            proc.kill()
            proc.wait()


def test_armed_inject_waits_for_go_then_applies_with_times(
    agent: NodeAgent, injectors: Path, tmp_path: Path
) -> None:
    state = tmp_path / "link"
    state.write_text("up\n")
    seen = agent.fault_count
    armed = agent.arm(["bash", f"{injectors}/file_fault.sh", "inject", "--armed", "--tag", "a1",
                       "--lease-s", "30", "--state", str(state)])  # fmt: skip
    line, _ = agent.wait_fault("a1", ("armed",), seen, 10)
    assert line is not None and line.ok
    time.sleep(0.2)
    assert state.read_text().strip() == "up", "an armed fault must not be applied before go"
    assert list((tmp_path / "faults" / "active").glob("*/a1")), "record written before the change"
    sent = agent.fire(armed)
    line, _ = agent.wait_fault("a1", ("inject",), seen, 10)
    assert line is not None and line.result == "ok"
    applied, verified = line.time_field("applied"), line.time_field("verified")
    assert applied is not None and verified is not None
    assert sent <= applied + 0.01 and applied <= verified
    assert applied - sent < 1.0
    assert state.read_text().strip() == "down"


def test_cancelled_arm_leaves_nothing_and_no_lease(
    agent: NodeAgent, injectors: Path, tmp_path: Path
) -> None:
    state = tmp_path / "link"
    state.write_text("up\n")
    seen = agent.fault_count
    armed = agent.arm(["bash", f"{injectors}/file_fault.sh", "inject", "--armed", "--tag", "c1",
                       "--lease-s", "30", "--state", str(state)])  # fmt: skip
    assert agent.wait_fault("c1", ("armed",), seen, 10)[0] is not None
    agent.cancel(armed)
    line, _ = agent.wait_fault("c1", ("inject",), seen, 10)
    assert line is not None and line.result == "cancelled"
    assert state.read_text().strip() == "up"
    assert not list((tmp_path / "faults" / "active").glob("*/c1"))
    leases = subprocess.run(["pgrep", "-f", "r2b-lease.*--tag c1"], capture_output=True)
    assert leases.stdout.strip() == b"", "the lease timer of a cancelled arm must be gone"


# ---- the driver ------------------------------------------------------------------------------
def test_driver_fires_on_time_reverts_verifies_and_records(
    agent: NodeAgent, injectors: Path, tmp_path: Path
) -> None:
    state = tmp_path / "link"
    state.write_text("up\n")
    step = fault_step(injectors, state, cycles=2, period_s=0.8)
    run = PlannedRun.model_construct(spec=None, run_dir="", launch=step.inject, faults=[step])
    driver = FaultDriver(run, {"node1": agent}, {"node1": 0.0})
    driver.arm()
    launched = time.time()
    driver.start(launched)
    time.sleep(2.0)
    driver.finish()
    assert driver.problems == []
    assert state.read_text().strip() == "up"
    kinds = [(e.action, e.cycle) for e in driver.history]
    assert kinds == [
        ("inject", 0),
        ("revert", 0),
        ("verify", 0),
        ("inject", 1),
        ("revert", 1),
        ("verify", 1),
    ]
    injects = [e for e in driver.history if e.action == "inject"]
    assert all(e.applied_at is not None and e.clock_offset_s is not None for e in injects)
    # when each change was made, on the controller's clock, as the records read it
    windows = fault_windows(driver.history, None)
    planned_at = (launched + 0.3, launched + 1.1)
    for event, window, planned in zip(injects, windows, planned_at, strict=True):
        assert event.planned_at == pytest.approx(planned)
        assert abs(window.applied - planned) < 0.2
    assert all(e.ok for e in driver.history)


def test_driver_refuses_to_arm_a_fault_whose_precheck_fails(
    agent: NodeAgent, injectors: Path, tmp_path: Path
) -> None:
    state = tmp_path / "link"
    state.write_text("down\n")  # already down: not ours to fault
    step = fault_step(injectors, state)
    run = PlannedRun.model_construct(spec=None, run_dir="", launch=step.inject, faults=[step])
    with pytest.raises(FaultError, match="already down"):
        FaultDriver(run, {"node1": agent}, {"node1": 0.0}).arm()


def test_injectors_armed_during_the_launch_answer_before_the_schedule(
    agent: NodeAgent, injectors: Path, tmp_path: Path
) -> None:
    """`request_arming` returns before the injector is ready; `wait_armed` collects its
    answer, and a refusal then leaves nothing armed (no lease, no record). A tag of its own:
    other tests' leases run beside it."""
    state = tmp_path / "link"
    state.write_text("up\n")
    run = PlannedRun.model_construct(
        spec=None, run_dir="", launch=None, faults=[fault_step(injectors, state, tag="armlaunch")]
    )
    driver = FaultDriver(run, {"node1": agent}, {"node1": 0.0})
    driver.request_arming()
    assert agent.fault_count == 0, "the request must not wait for the injector's answer"
    driver.wait_armed()
    assert list((tmp_path / "faults" / "active").glob("*/armlaunch")), "armed: record written"
    driver.finish()
    line, _ = agent.wait_fault("armlaunch", ("inject",), 0, 10)  # the cancel's answer
    assert line is not None and line.result == "cancelled" and driver.never_fired
    assert not list((tmp_path / "faults" / "active").glob("*/armlaunch"))

    state.write_text("down\n")  # already down: the injector refuses
    refused = FaultDriver(run, {"node1": agent}, {"node1": 0.0})
    refused.request_arming()
    with pytest.raises(FaultError, match="already down"):
        refused.wait_armed()
    leases = subprocess.run(["pgrep", "-f", "r2b-lease.*--tag armlaunch"], capture_output=True)
    assert leases.stdout.strip() == b"" and not list(
        (tmp_path / "faults" / "active").glob("*/armlaunch")
    )


# ---- lock and summary ------------------------------------------------------------------------
def test_lock_refuses_a_second_sweep_and_dies_with_its_holder(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys,time; from pathlib import Path; from r2bench.sweep.lock import SweepLock;"
         "SweepLock(Path(sys.argv[1])).acquire(); print('held', flush=True); time.sleep(60)",
         str(tmp_path)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(LockedError, match=f"pid {holder.pid}"):
            SweepLock(tmp_path).acquire()
    finally:
        holder.kill()
        holder.wait()
    with SweepLock(tmp_path):  # the dead holder's lock is gone
        pass


def test_the_interrupt_handler_imports_nothing() -> None:
    """A signal can land in the middle of an import (rich loads its emoji table on the first
    print): the handler must not need a module that may be half made at that moment."""
    code = """
import io, signal, sys
from rich.console import Console
from r2bench.sweep.interrupts import Interrupts
handler = Interrupts(Console(file=io.StringIO()))
before = set(sys.modules)
handler.handle(signal.SIGINT, None)
handler.handle(signal.SIGINT, None)
print(sorted(set(sys.modules) - before))
print(handler.console.file.getvalue())
"""
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    imported, said = out.split("\n", 1)
    assert imported == "[]", imported
    assert "interrupted: finishing the current step" in said and "already stopping" in said


def test_the_interrupt_handler_never_reenters_the_consoles_stream(tmp_path: Path) -> None:
    """A signal that lands while the console is writing to stderr: a second write through the
    same buffered stream would raise "reentrant call inside <_io.BufferedWriter>" (a sweep
    barraged with Ctrl-C died of it). The handler writes its line straight to the descriptor."""
    import io
    import signal

    from rich.console import Console

    from r2bench.sweep.interrupts import Interrupts

    target = (tmp_path / "stderr").open("w+b", buffering=0)
    nested: list[str] = []
    handlers: list[Interrupts] = []

    class Stream(io.TextIOBase):
        busy = False

        def fileno(self) -> int:
            return target.fileno()

        def write(self, text: str) -> int:
            if self.busy:
                nested.append(text)
            self.busy = True
            try:
                for handler in handlers:
                    handler.handle(signal.SIGINT, None)  # the signal lands mid-write
                target.write(text.encode())
            finally:
                self.busy = False
            return len(text)

    handlers.append(Interrupts(Console(file=Stream(), force_terminal=False)))
    handlers[0].console.print("a sweep's line")
    target.seek(0)
    written = target.read().decode()
    assert nested == []
    assert written.index("interrupted: finishing") < written.index("a sweep's line")
    handlers[0].handle(signal.SIGINT, None)
    target.seek(0)
    assert (
        target.read()
        .decode()
        .endswith("already stopping, faults are being reverted; please wait\n")
    )
