"""The sweep's pieces on this machine: the node agent (real bash, real FIFOs, real processes),
armed injects through the real lib.sh, the fault schedule and driver, the lock, the summary.

Faults here are of a test-only kind (`file_fault.sh`: the "link" is a state file), written
beside a copy of the real injectors, so lib.sh's armed mode, records and leases run for real
without root or network namespaces.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from r2bench.analysis.windows import fault_windows
from r2bench.config.errors import ConfigError
from r2bench.nodes import LocalNode
from r2bench.parse.models import OutcomeStatus
from r2bench.plan.model import FaultStep, NodeCommand, PlannedRun
from r2bench.sweep.agent import NodeAgent, parse_fault_line
from r2bench.sweep.display import summary_table
from r2bench.sweep.faults import FaultDriver, FaultError
from r2bench.sweep.lock import LockedError, SweepLock
from r2bench.sweep.run import RunResult
from r2bench.sweep.schedule import fault_actions

ROOT = Path(__file__).resolve().parents[1]

FILE_FAULT = r"""#!/usr/bin/env bash
# Test-only kind: the "link" is the file --state; down = it holds "down".
KIND=file_fault
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
kind_validate() { need state; }
kind_describe() { echo "state=${OPT[state]}"; }
is_down() { [[ $(cat "${OPT[state]}" 2>/dev/null) == down ]]; }
kind_precheck() { ! is_down || die "already down"; }
kind_inject() { echo down >"${OPT[state]}" && mark_applied && is_down; }
kind_revert() { echo up >"${OPT[state]}"; }
kind_status() { if is_down; then echo active; else echo inactive; fi; }
main "$@"
"""


@pytest.fixture
def injectors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the real injectors plus the test kind; fault records under tmp_path."""
    target = tmp_path / "injectors"
    shutil.copytree(ROOT / "injectors", target)
    (target / "file_fault.sh").write_text(FILE_FAULT)
    monkeypatch.setenv("R2B_FAULT_DIR", str(tmp_path / "faults"))
    return target


@pytest.fixture
def agent(injectors: Path) -> Iterator[NodeAgent]:
    agent = NodeAgent(LocalNode("node1", sudo=False), str(injectors)).start()
    yield agent
    agent.close()


def _step(injectors: Path, state: Path, **overrides: object) -> FaultStep:
    def command(action: str, *extra: str) -> NodeCommand:
        argv = ["bash", f"{injectors}/file_fault.sh", action, "--tag", "t0", *extra]
        return NodeCommand(
            node="node1", command=" ".join([*argv, "--state", str(state)]), root=True
        )

    fields: dict[str, object] = {
        "index": 0,
        "kind": "file_fault",
        "node": "node1",
        "nic": "nic1",
        "tag": "t0",
        "inject_after_s": 0.3,
        "since": "launch",
        "heal_after_s": 0.6,
        "lease_s": 30.0,
        "inject": command("inject", "--lease-s", "30"),
        "revert": command("revert"),
        "status": command("status"),
    }
    fields.update(overrides)
    return FaultStep.model_validate(fields)


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


def test_fault_lines_parse_and_garbage_does_not() -> None:
    line = parse_fault_line(
        "r2b-fault 1700000000,5 inject tag=x kind=link_down result=ok dev=nic1 applied=1700000000.25"
    )
    assert (
        line is not None
        and line.node_time == 1700000000.5
        and line.time_field("applied") == 1700000000.25
    )
    assert line.tag == "x" and line.ok
    for text in ("r2b-fault", "r2b-fault nope inject", "hello", ""):
        assert parse_fault_line(text) is None


# ---- the schedule ----------------------------------------------------------------------------
def test_schedule_flaps_and_anchors(tmp_path: Path) -> None:
    flap = _step(tmp_path, tmp_path / "s", cycles=3, period_s=1.0)
    actions = [(a.kind, a.cycle, round(a.at_s, 6)) for a in fault_actions([flap])]
    assert actions == [
        ("inject", 0, 0.3), ("revert", 0, 0.6), ("inject", 1, 1.3), ("revert", 1, 1.6),
        ("inject", 2, 2.3), ("revert", 2, 2.6),
    ]  # fmt: skip
    until_end = _step(tmp_path, tmp_path / "s", heal_after_s=None, since="first_result")
    assert [(a.kind, a.anchor) for a in fault_actions([until_end])] == [("inject", "first_result")]


def test_flap_needs_duration_shorter_than_period(tmp_path: Path) -> None:
    from r2bench.config.experiment import FaultSpec

    base = {"kind": "link_down", "node": "n", "nic": "x", "trigger": {"after_s": 1}}
    with pytest.raises(ValueError, match="repeat needs duration_s"):
        FaultSpec.model_validate({**base, "repeat": {"count": 2, "period_s": 1}})
    with pytest.raises(ValueError, match=r"shorter than repeat\.period_s"):
        FaultSpec.model_validate({**base, "duration_s": 2, "repeat": {"count": 2, "period_s": 1}})
    ok = FaultSpec.model_validate(
        {**base, "duration_s": 0.5, "repeat": {"count": 3, "period_s": 1}}
    )
    assert ok.active_window_s == 2.5


# ---- the driver ------------------------------------------------------------------------------
def test_driver_fires_on_time_reverts_verifies_and_records(
    agent: NodeAgent, injectors: Path, tmp_path: Path
) -> None:
    state = tmp_path / "link"
    state.write_text("up\n")
    step = _step(injectors, state, cycles=2, period_s=0.8)
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
    step = _step(injectors, state)
    run = PlannedRun.model_construct(spec=None, run_dir="", launch=step.inject, faults=[step])
    with pytest.raises(FaultError, match="already down"):
        FaultDriver(run, {"node1": agent}, {"node1": 0.0}).arm()


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


def test_manual_fault_on_the_management_nic_is_refused() -> None:
    from r2bench.commands.handfault import ManualFault, manual_fault_step

    testbed = ROOT / "experiments" / "testbeds" / "virtual-example.yaml"
    with pytest.raises(ConfigError) as caught:
        manual_fault_step(testbed, ManualFault("link_down", "node1", "mgmt0", {}))
    refusal = caught.value.issues[0].render()
    assert "management" in refusal
    # located at the arguments it came from, not at a line of the experiment written for them
    assert refusal.startswith("r2bench inject arguments: nic: "), refusal
    assert "<command line>" not in refusal and "scenarios[0]" not in refusal
    step, _ = manual_fault_step(testbed, ManualFault("link_down", "node1", "nic1", {}, 120))
    assert step.tag == "r2b-hand-node1-nic1" and "--tag r2b-hand-node1-nic1" in step.revert.command
    assert "--lease-s 120" in step.inject.command


def test_summary_counts_outcomes_per_scenario_and_mode() -> None:
    from r2bench.plan.build import load_inputs, make_plan

    plan = make_plan(
        load_inputs(
            ROOT / "experiments" / "quickstart.yaml",
            ROOT / "experiments" / "testbeds" / "virtual-example.yaml",
        )
    )
    results = {
        r.spec.run_id: RunResult(
            r.spec.run_id,
            OutcomeStatus.CRASHED
            if r.spec.scenario != "none" and r.spec.library_label == "nccl-emulated"
            else OutcomeStatus.OK,
            "",
            1.0,
        )
        for r in plan.runs
    }
    from rich.console import Console

    console = Console(width=200, record=True)
    console.print(summary_table(plan.runs, results))
    text = console.export_text()
    assert "crashed" in text and "nccl-emulated" in text
    assert "r2ccl-m0 mode 0" in text and "r2ccl-m2 mode 2" in text


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
