"""`compare` on training sweeps: the real example (results/examples/virtual-training) against
itself and against copies of its tables made worse in one way each: slower steps, a run that
crashed, a run no longer bit-identical to its baseline run."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest

from r2bench.compare.policy import Policy
from r2bench.compare.samples import SweepData, load_sweep
from r2bench.compare.stats import Verdict
from r2bench.compare.training import training_cells
from r2bench.compare.verdict import IDENTITY, OUTCOME, compare_sweeps
from r2bench.runfolder.runformat import TABLES_DIR
from tests.support import paths

EXAMPLE = paths.REPO / "results" / "examples" / "virtual-training"
R2CCL_FAULTED = "train-r2ccl-m0-nic1-down-r0-4ba2a36fe3"
R2CCL_CLEAN = "train-r2ccl-m0-none-r0-17c50c7d82"


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> SweepData:
    target = tmp_path_factory.mktemp("compare-training") / EXAMPLE.name
    shutil.copytree(EXAMPLE, target, ignore=shutil.ignore_patterns(TABLES_DIR, "report.html"))
    return load_sweep(target)


def _changed(data: SweepData, name: str, **frames: object) -> SweepData:
    return SweepData(name, data.path, dataclasses.replace(data.tables, **frames))


def _verdicts(result: object, library: str, scenario: str) -> dict[str, Verdict]:
    return {
        r.metric: r.verdict
        for r in result.rows  # type: ignore[attr-defined]
        if r.fields.get("library") == library and r.fields.get("scenario") == scenario
    }


def test_the_training_samples_per_series(base: SweepData) -> None:
    names = ["collective", "library", "scenario", "R2CC_MODE"]
    cells = {dict(k)["library"] + "/" + dict(k)["scenario"]: c
             for k, c in training_cells(base.tables, names).items()}  # fmt: skip
    r2 = cells["r2ccl-m0/nic1-down"]
    assert r2.runs == [R2CCL_FAULTED]
    assert r2.count("step_s") == 60 and r2.count("tokens_per_s") == 60  # each update a sample
    assert r2.samples["hit_step_s"][0] == pytest.approx([0.8008], abs=1e-4)
    assert r2.samples["overhead_ratio"][0] == pytest.approx([1.6486], abs=1e-4)
    stock = cells["nccl-emulated/nic1-down"]
    assert stock.count("step_s") == 20 and stock.count("hit_step_s") == 0  # crashed in 21
    assert cells["nccl-emulated/none"].count("overhead_ratio") == 0  # the baseline run itself


def test_a_training_sweep_compared_with_itself_passes(base: SweepData) -> None:
    result = compare_sweeps(base, base, Policy())
    assert result.exit_code == 0
    metrics = {r.metric for r in result.rows}
    assert {"step_s", "tokens_per_s", "hit_step_s", "overhead_ratio", IDENTITY} <= metrics
    assert {r.verdict for r in result.rows} == {Verdict.SAME}


def test_slower_steps_are_a_regression(base: SweepData) -> None:
    training = base.tables.training.copy()
    slower = training["library"] == "r2ccl-m0"
    training.loc[slower, "step_s"] *= 1.3
    training.loc[slower, "tokens_per_s"] /= 1.3
    result = compare_sweeps(base, _changed(base, "slower", training=training), Policy())
    verdicts = _verdicts(result, "r2ccl-m0", "none")
    assert verdicts["step_s"] is Verdict.REGRESSION
    assert verdicts["tokens_per_s"] is Verdict.REGRESSION
    assert _verdicts(result, "nccl-emulated", "none")["step_s"] is Verdict.SAME
    assert result.exit_code == 1


def test_a_run_that_survived_and_now_crashed_is_a_regression(base: SweepData) -> None:
    runs = base.tables.runs.copy()
    runs.loc[runs["run_id"] == R2CCL_FAULTED, "outcome"] = "crashed"
    result = compare_sweeps(base, _changed(base, "crashed", runs=runs), Policy())
    row = next(
        r for r in result.rows
        if r.metric == OUTCOME and r.fields["library"] == "r2ccl-m0"
        and r.fields["scenario"] == "nic1-down"
    )  # fmt: skip
    assert row.verdict is Verdict.REGRESSION and result.exit_code == 1


def test_a_run_no_longer_bit_identical_is_a_regression(base: SweepData) -> None:
    checks = base.tables.training_checks.copy()
    checks.loc[checks["run_id"] == R2CCL_CLEAN, "identical"] = False
    result = compare_sweeps(base, _changed(base, "drifted", training_checks=checks), Policy())
    row = next(
        r for r in result.rows
        if r.metric == IDENTITY and r.fields["library"] == "r2ccl-m0"
        and r.fields["scenario"] == "none"
    )  # fmt: skip
    assert row.verdict is Verdict.REGRESSION
    assert (row.baseline, row.candidate) == ("identical 1/1", "differs 1/1")
    assert "now differ" in row.note
    back = compare_sweeps(_changed(base, "drifted", training_checks=checks), base, Policy())
    assert next(r for r in back.rows if r.metric == IDENTITY and r.fields["scenario"] == "none"
                and r.fields["library"] == "r2ccl-m0").verdict is Verdict.IMPROVEMENT  # fmt: skip


def test_a_policy_names_the_training_metrics(tmp_path: Path) -> None:
    policy = Policy.model_validate({"metrics": {"step_s": {"min_effect": 0.2}}})
    assert policy.metric("step_s", {}).min_effect == 0.2
    assert policy.metric("hit_step_s", {}).min_effect == 0.10
