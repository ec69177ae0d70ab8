"""`compare` gates on the cost of a fault (`COST_METRICS`, from the `recovery_cost` table):
five restart runs against themselves, and against a copy that took longer to get back."""

from __future__ import annotations

import dataclasses
import json

import pytest

from r2bench.compare.policy import COST_METRICS, Policy
from r2bench.compare.samples import SweepData, load_sweep
from r2bench.compare.stats import Verdict
from r2bench.compare.training import training_cells
from r2bench.compare.verdict import compare_sweeps
from tests.support.training_runs import (
    TrainingText,
    fault_applied,
    launch_offset,
    training_folder,
)
from tests.unit.test_recovery_cost_table import restart_lines

RUNS = 5


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> SweepData:
    root = tmp_path_factory.mktemp("recovery-compare")
    text = "\n".join(restart_lines(fault_applied(), launch_offset())) + "\n"
    for repeat in range(RUNS):
        run = training_folder(root, f"restart-r{repeat}", TrainingText(), faulted=True,
                              repeat=repeat)  # fmt: skip
        (run / "stdout.txt").write_text(text)
        spec = json.loads((run / "spec.json").read_text())
        spec["recovery"] = {"strategy": "restart"}
        (run / "spec.json").write_text(json.dumps(spec))
    return load_sweep(root)


def _cost_verdicts(base: SweepData, cand: SweepData) -> dict[str, Verdict]:
    result = compare_sweeps(base, cand, Policy())
    return {r.metric: r.verdict for r in result.rows if r.metric in COST_METRICS}


def test_each_run_is_one_sample_of_each_cost_metric(base: SweepData) -> None:
    (cell,) = training_cells(base.tables, ["library", "scenario"]).values()
    assert len(cell.runs) == RUNS
    assert cell.count("cost_detect_s") == RUNS
    assert cell.samples["cost_back_s"][0] == pytest.approx([4.3], abs=1e-3)
    assert cell.count("cost_goodput_ratio") == RUNS


def test_the_same_costs_pass(base: SweepData) -> None:
    verdicts = _cost_verdicts(base, base)
    assert set(verdicts) == set(COST_METRICS)
    assert set(verdicts.values()) == {Verdict.SAME}


def test_getting_back_later_is_a_regression(base: SweepData) -> None:
    cost = base.tables.recovery_cost.copy()
    cost["back_s"] *= 1.5
    cost["lost_gpu_s"] *= 1.5
    cand = SweepData("slower", base.path, dataclasses.replace(base.tables, recovery_cost=cost))
    verdicts = _cost_verdicts(base, cand)
    assert verdicts["cost_back_s"] is Verdict.REGRESSION
    assert verdicts["cost_lost_gpu_s"] is Verdict.REGRESSION
    assert verdicts["cost_detect_s"] is Verdict.SAME
