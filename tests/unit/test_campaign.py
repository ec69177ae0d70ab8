"""Fault campaigns (plan/campaign.py, the drawn triggers of config/experiment.py): the same seed
draws the same schedule, another seed another; every trial is a run whose spec records its
draw; the checks see a drawn trigger's whole range; `plan` notes the campaign.

The campaign run on the virtual testbed is tests/system/test_campaign_virtual.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from r2bench.commands.plan import plan_of
from r2bench.config.errors import ConfigError
from r2bench.config.experiment import FaultSpec, Scenario
from r2bench.plan.campaign import draw_fault, schedule, trial_faults
from r2bench.plan.model import Plan
from tests.support import paths

CAMPAIGN = paths.REPO / "experiments" / "campaign.yaml"
VIRTUAL = paths.REPO / "experiments" / "testbeds" / "virtual-example.yaml"


def _scenario(seed: int = 7, trials: int = 5, **trigger: object) -> Scenario:
    fault = {
        "kind": "link_down",
        "node": "node1",
        "nic": "nic1",
        "trigger": trigger or {"after_s": 0.5, "within_s": 2.0, "since": "first_result"},
    }
    return Scenario.model_validate(
        {"name": "cut", "trials": trials, "seed": seed, "faults": [fault]}
    )


def _times(scenario: Scenario) -> list[float]:
    return [trial[0].after_s for trial in schedule(scenario)]


def test_same_seed_same_schedule_other_seed_another() -> None:
    first, again, other = _times(_scenario(7)), _times(_scenario(7)), _times(_scenario(8))
    assert first == again
    assert first != other
    assert len(set(first)) == len(first)  # each trial draws its own time
    assert all(0.5 <= t <= 2.5 for t in first + other)


def test_a_draw_does_not_depend_on_the_order_it_is_drawn_in() -> None:
    scenario = _scenario(7)
    fault = scenario.faults[0]
    backwards = [draw_fault(7, "cut", 0, t, fault).after_s for t in reversed(range(5))]
    assert list(reversed(backwards)) == _times(scenario)


def test_drawn_update_stays_in_its_range() -> None:
    scenario = _scenario(3, 20, since="update", update=10, within_updates=5, after_s=0.0)
    updates = [trial[0].update for trial in schedule(scenario)]
    assert all(u is not None and 10 <= u <= 15 for u in updates)
    assert len(set(updates)) > 1


def test_trial_faults_are_fixed_and_keep_everything_else() -> None:
    scenario = _scenario(7)
    faults, draws = trial_faults(scenario, 2)
    trigger = faults[0].trigger
    assert trigger.within_s is None and trigger.after_s == draws[0].after_s
    assert (
        faults[0].model_copy(update={"trigger": scenario.faults[0].trigger}) == (scenario.faults[0])
    )


@pytest.mark.parametrize(
    ("scenario", "words"),
    [
        ({"trials": 2, "faults": [{"trigger": {"after_s": 1, "within_s": 1}}]}, "needs the"),
        ({"seed": 1, "faults": [{"trigger": {"after_s": 1}}]}, "nothing to draw"),
        ({"faults": [{"trigger": {"after_s": 1, "within_updates": 3}}]}, "since: update"),
    ],
)
def test_refused_campaigns(scenario: dict, words: str) -> None:
    base = {"kind": "link_down", "node": "node1", "nic": "nic1"}
    scenario["faults"] = [{**base, **f} for f in scenario["faults"]]
    with pytest.raises(ValueError, match=words):
        Scenario.model_validate({"name": "cut", **scenario})


def _plan(tmp_path: Path, seed: int = 7, trials: int = 3, deadline: float = 60) -> Plan:
    data = yaml.safe_load(CAMPAIGN.read_text())
    data["scenarios"][0].update(seed=seed, trials=trials)
    data["deadline_s"] = deadline
    data.pop("predictions")
    path = tmp_path / f"campaign-{seed}.yaml"
    path.write_text(yaml.safe_dump(data))
    return plan_of(path, VIRTUAL)


def _drawn(plan: Plan) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for run in plan.runs:
        if run.spec.campaign is not None:
            out.setdefault(run.spec.library_label, []).append(run.faults[0].inject_after_s)
    return out


def test_the_example_plans_trials_with_their_draws_recorded(tmp_path: Path) -> None:
    plan = _plan(tmp_path)
    assert len(plan.runs) == 2 * (1 + 3)
    drawn = _drawn(plan)
    assert drawn["nccl-emulated"] == drawn["r2ccl-m0"]  # paired: one schedule for every cell
    for run in plan.runs:
        campaign = run.spec.campaign
        if campaign is None:
            assert run.spec.scenario == "none"
            continue
        assert f"-t{campaign.trial}-" in run.spec.run_id
        assert campaign.seed == 7 and campaign.trials == 3
        assert campaign.draws[0].after_s == run.faults[0].inject_after_s
        assert "uniform [0.5, 2.5] s" in campaign.draws[0].drawn_from
    assert any("campaign nic1-cut: 3 trial(s)" in note for note in plan.notes)


def test_a_replanned_campaign_has_the_same_runs_another_seed_other_ones(tmp_path: Path) -> None:
    first, again, other = _plan(tmp_path), _plan(tmp_path), _plan(tmp_path, seed=8)
    ids = [r.spec.run_id for r in first.runs]
    assert ids == [r.spec.run_id for r in again.runs]  # resume finds its runs again
    assert _drawn(first) == _drawn(again)
    assert _drawn(first) != _drawn(other)


def test_the_deadline_check_sees_the_latest_draw(tmp_path: Path) -> None:
    # after_s 0.5 fits a 2.4 s deadline; the range's end (2.5 s) does not.
    with pytest.raises(ConfigError, match=r"latest drawn trigger at 2\.5 s"):
        _plan(tmp_path, deadline=2.4)


def test_a_fixed_trigger_keeps_the_run_ids_it_had() -> None:
    """Runs planned before drawn triggers existed keep their ids (resume relies on them)."""
    from r2bench.plan.runspec import RunSpec

    fault = FaultSpec.model_validate(
        {"kind": "link_down", "node": "n", "nic": "e", "trigger": {"after_s": 1}}
    )
    text = fault.model_dump_json()
    assert "within_s" in text  # the model has the field ...
    spec_fields = RunSpec.model_fields
    assert "campaign" in spec_fields
    dumped = _minimal_spec(fault).canonical_json()
    assert "within_s" not in dumped and "campaign" not in dumped  # ... the id never sees it


def _minimal_spec(fault: FaultSpec):
    from r2bench.config.experiment import NcclTestsOptions
    from r2bench.plan.runspec import ComponentRef, RunSpec

    ref = ComponentRef(recipe="x", ref=None)
    return RunSpec(
        experiment="e", testbed="t", library_label="l", library=ref, benchmark=ref,
        collective="all_reduce", size_begin=1, size_end=1, size_factor=2, nodes=("n",),
        ranks_per_node=1, env={}, scenario="s", faults=(fault,), options=NcclTestsOptions(),
        deadline_s=60, repeat=0,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("experiment", "pretold"),
    [("01-hot-repair-to-balance", True), ("09-training-with-nic-failure", False)],
)
def test_plan_notes_the_artifacts_pre_told_tests(experiment: str, pretold: bool) -> None:
    """Upstream's test 01 declares mlx5_2 failed while cutting it; test 09 runs blind."""
    r7525 = paths.REPO / "experiments" / "r7525"
    testbed = paths.REPO / "experiments" / "testbeds" / "cloudlab-r7525.yaml"
    plan = plan_of(r7525 / f"{experiment}.yaml", testbed)
    notes = [n for n in plan.notes if "pre-told" in n]
    assert bool(notes) is pretold
    if pretold:
        assert "R2CC_FAILED_HCA=mlx5_2" in notes[0]
