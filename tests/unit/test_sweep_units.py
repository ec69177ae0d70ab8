"""The sweep's pieces on this machine: the node agent (real bash, real FIFOs, real processes),
armed injects through the real lib.sh, the fault schedule and driver, the lock, the summary.

Faults here are of a test-only kind (`file_fault.sh`: the "link" is a state file), written
beside a copy of the real injectors, so lib.sh's armed mode, records and leases run for real
without root or network namespaces.

This module holds its pure tests; the same subject's other tests:
tests/integration/test_sweep_units.py (those with real processes).
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from r2bench.config.errors import ConfigError
from r2bench.parse.models import OutcomeStatus
from r2bench.sweep.agent import parse_fault_line
from r2bench.sweep.display import SweepDisplay, summary_table
from r2bench.sweep.run import RunResult
from r2bench.sweep.schedule import fault_actions
from tests.support import paths
from tests.support.sweep_units import fault_step

ROOT = paths.REPO


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
    flap = fault_step(tmp_path, tmp_path / "s", cycles=3, period_s=1.0)
    actions = [(a.kind, a.cycle, round(a.at_s, 6)) for a in fault_actions([flap])]
    assert actions == [
        ("inject", 0, 0.3), ("revert", 0, 0.6), ("inject", 1, 1.3), ("revert", 1, 1.6),
        ("inject", 2, 2.3), ("revert", 2, 2.6),
    ]  # fmt: skip
    until_end = fault_step(tmp_path, tmp_path / "s", heal_after_s=None, since="first_result")
    assert [(a.kind, a.anchor) for a in fault_actions([until_end])] == [("inject", "first_result")]


def test_a_training_update_anchors_a_fault(tmp_path: Path) -> None:
    """`since: update` (the artifact cuts at update 400): the anchor is that update's line, and
    anchors come in the order a job reaches them."""
    from r2bench.config.experiment import Trigger
    from r2bench.sweep.firstresult import FirstResultWatch, training_update

    at_12 = fault_step(tmp_path, tmp_path / "s", since="update", at_update=12)
    at_3 = fault_step(tmp_path, tmp_path / "s", since="update", at_update=3, inject_after_s=5)
    first = fault_step(tmp_path, tmp_path / "s", since="first_result", inject_after_s=9)
    order = [a.anchor for a in fault_actions([at_12, first, at_3]) if a.kind == "inject"]
    assert order == ["first_result", "update 3", "update 12"]
    assert training_update('[1,0]<stdout>:#train {"update": 400, "start": 1.0}') == 400
    assert training_update("#train-start {}") is None and training_update("# 8 8 float") is None
    watch = FirstResultWatch()
    assert watch.feed("#train-start {}") is False
    assert watch.feed('#train {"update": 1, "start": 1.0}') is True  # a training job's result
    with pytest.raises(ValueError, match="`since: update` needs `update: N`"):
        Trigger.model_validate({"after_s": 0, "since": "update"})
    with pytest.raises(ValueError, match="`update` goes only with `since: update`"):
        Trigger.model_validate({"after_s": 0, "update": 4})


def test_only_a_fault_due_right_after_the_launch_is_armed_before_it(tmp_path: Path) -> None:
    """Injectors arm while the job launches, unless a first inject is due within the lead
    (then arming first keeps it on time); repeat cycles and other anchors never force it."""
    from r2bench.plan.model import FaultStep
    from r2bench.sweep.schedule import injects_soon_after_launch

    def early(*steps: FaultStep) -> bool:
        return injects_soon_after_launch(list(steps), 1.0)

    state = tmp_path / "s"
    assert early(fault_step(tmp_path, state, inject_after_s=0.3, heal_after_s=0.6))
    assert not early(fault_step(tmp_path, state, inject_after_s=1.0, heal_after_s=1.5))
    assert not early(fault_step(tmp_path, state, since="first_result", inject_after_s=0.0))
    assert not early(fault_step(tmp_path, state, since="update", at_update=3, inject_after_s=0))
    assert not early()


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


def test_display_shows_the_current_run_while_the_one_before_is_recorded() -> None:
    """Run 1's collect and record overlap run 2's start: the line keeps showing run 2."""
    console = Console(file=io.StringIO(), width=200, force_terminal=False)
    with SweepDisplay(console, total=2) as display:
        display.stage("run-1", "preflight")
        display.stage("run-1", "teardown")
        display.stage("run-2", "preflight")
        display.stage("run-1", "record")  # from the thread that records run 1
        assert display._description == "run-2 [dim]preflight[/]"
        display.finished(RunResult("run-1", OutcomeStatus.OK, "", 2.0))
        assert display._description == "run-2 [dim]preflight[/]"
        assert display.done == 1 and display.counts == {"ok": 1}
        display.stage("run-2", "launch")
        assert display._description == "run-2 [dim]launch[/]"
