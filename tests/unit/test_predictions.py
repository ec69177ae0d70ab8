"""Predictions registered before a sweep (analysis/predictions.py, plan/predict.py,
`r2bench plan --predict`): matched, scored into a confusion table, checked against the plan,
and written as a template."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from r2bench.analysis.predictions import ScoredRun, score
from r2bench.analysis.verdict import SCORED
from r2bench.analysis.verdict import OutcomeClass as C
from r2bench.config.errors import ConfigError
from r2bench.config.predictions import SCORED_NAMES, PredictionsFile, read_predictions, sha256_of
from tests.support import paths
from tests.support.cli_runner import invoke_as_main

CAMPAIGN = paths.REPO / "experiments" / "campaign.yaml"
PREDICTIONS = paths.REPO / "experiments" / "campaign-predictions.yaml"
VIRTUAL = paths.REPO / "experiments" / "testbeds" / "virtual-example.yaml"


def _file() -> PredictionsFile:
    return PredictionsFile.model_validate(
        {
            "predictions": [
                {"match": {"library": "nccl", "scenario": "cut"}, "expect": "DECLINED"},
                {"match": {"library": "r2ccl", "R2CC_MODE": 0}, "expect": "TRANSPARENT"},
            ]
        }
    )


def _run(library: str, verdict: C, armed: bool = True, **env: str) -> ScoredRun:
    return ScoredRun({"library": library, "scenario": "cut", **env}, verdict, armed)


def test_score_is_a_confusion_table() -> None:
    runs = [
        _run("nccl", C.DECLINED),
        _run("nccl", C.DECLINED),
        _run("nccl", C.HUNG),
        _run("r2ccl", C.TRANSPARENT, R2CC_MODE="0"),
        _run("r2ccl", C.SILENT_WRONG, R2CC_MODE="0"),
        _run("r2ccl", C.TRANSPARENT, R2CC_MODE="2"),  # no prediction covers mode 2
        _run("r2ccl", C.DECLINED, armed=False, R2CC_MODE="0"),  # failover impossible
        _run("nccl", C.UNSCORED),
        _run("nccl", C.NO_FAULT),
    ]
    result = score(_file(), runs)
    assert result.confusion == {
        (C.DECLINED, C.DECLINED): 2,
        (C.DECLINED, C.HUNG): 1,
        (C.TRANSPARENT, C.TRANSPARENT): 1,
        (C.TRANSPARENT, C.SILENT_WRONG): 1,
    }
    assert (result.scored, result.hits) == (5, 3)
    assert (result.unpredicted, result.unarmed, result.unscored) == (1, 1, 1)


def test_a_changed_file_has_another_digest(tmp_path: Path) -> None:
    data = PREDICTIONS.read_bytes()
    assert sha256_of(data) == sha256_of(PREDICTIONS.read_bytes())
    assert sha256_of(data) != sha256_of(data.replace(b"DECLINED", b"HUNG"))


def test_the_example_file_reads_and_bad_ones_are_located(tmp_path: Path) -> None:
    assert len(read_predictions(PREDICTIONS).predictions) == 2
    bad = tmp_path / "bad.yaml"
    bad.write_text("predictions:\n  - match: {library: x}\n    expect: NO_FAULT\n")
    with pytest.raises(ConfigError, match=r"bad.yaml:3:\d+: predictions\[0\].expect"):
        read_predictions(bad)


def test_plan_notes_the_digest_and_uncovered_cells(tmp_path: Path) -> None:
    from r2bench.commands.plan import plan_of

    folder = tmp_path / "exp"
    folder.mkdir()
    (folder / "campaign.yaml").write_text(CAMPAIGN.read_text())
    data = yaml.safe_load(PREDICTIONS.read_text())
    data["predictions"][1]["match"]["library"] = "r2ccl-typo"
    (folder / "campaign-predictions.yaml").write_text(yaml.safe_dump(data))
    plan = plan_of(folder / "campaign.yaml", VIRTUAL)
    notes = "\n".join(plan.notes)
    digest = sha256_of((folder / "campaign-predictions.yaml").read_bytes())
    assert f"SHA-256 {digest}" in notes
    assert "no prediction covers the cell library=r2ccl-m0" in notes
    assert "predictions[1] covers no run of the plan" in notes


def test_a_missing_predictions_file_is_refused_where_it_is_named(tmp_path: Path) -> None:
    from r2bench.commands.plan import plan_of

    (tmp_path / "campaign.yaml").write_text(CAMPAIGN.read_text())
    with pytest.raises(ConfigError, match=r"campaign.yaml:\d+:\d+: predictions: predictions file"):
        plan_of(tmp_path / "campaign.yaml", VIRTUAL)


def test_plan_predict_writes_a_template_then_checks_it(tmp_path: Path) -> None:
    target = tmp_path / "mine.yaml"
    args = ["plan", str(CAMPAIGN), "-t", str(VIRTUAL), "--predict", str(target)]
    first = invoke_as_main(*args)
    assert first.exit_code == 0, first.output
    written = yaml.safe_load(target.read_text())
    matches = [p["match"] for p in written["predictions"]]
    assert matches == [
        {"library": "nccl-emulated", "scenario": "nic1-cut"},
        {"library": "r2ccl-m0", "scenario": "nic1-cut"},
    ]
    unfilled = invoke_as_main(*args)
    assert unfilled.exit_code == 2 and "expect" in unfilled.output
    target.write_text(target.read_text().replace("TODO", "HUNG"))
    filled = invoke_as_main(*args)
    assert filled.exit_code == 0 and sha256_of(target.read_bytes()) in filled.output.replace(
        "\n", ""
    )


def test_the_file_states_exactly_the_scored_classes() -> None:
    assert tuple(c.value for c in SCORED) == SCORED_NAMES


def test_the_sweep_registers_once_and_a_changed_file_is_flagged(tmp_path: Path) -> None:
    from r2bench.runfolder.predictions import COPY, register, registered

    file = tmp_path / "predictions.yaml"
    file.write_bytes(PREDICTIONS.read_bytes())
    sweep = tmp_path / "results" / "campaign"
    record, written = register(sweep, file)
    assert written and record.sha256 == sha256_of(file.read_bytes())
    assert (sweep / COPY).read_bytes() == file.read_bytes()
    state = registered(sweep)
    assert state is not None and not state.changed
    file.write_text(file.read_text().replace("TRANSPARENT", "HUNG"))  # edited after the runs
    again, written = register(sweep, file)  # a resumed sweep keeps its first record
    assert not written and again == record
    state = registered(sweep)
    assert state is not None and state.changed
    assert state.now_sha256 == sha256_of(file.read_bytes())
    file.unlink()
    gone = registered(sweep)
    assert gone is not None and gone.changed and gone.now_sha256 is None


def test_the_sweep_registers_the_experiments_file_before_running(tmp_path: Path) -> None:
    """`sweep` records the experiment's `predictions:` file in its folder (orchestrate), and a
    resumed sweep whose file was edited says so and keeps the first record."""
    import io

    from rich.console import Console

    from r2bench.plan.build import load_inputs
    from r2bench.runfolder.predictions import read_record
    from r2bench.runfolder.store import RunStore
    from r2bench.sweep.orchestrate import _register_predictions

    folder = tmp_path / "exp"
    folder.mkdir()
    (folder / "campaign.yaml").write_text(CAMPAIGN.read_text())
    file = folder / "campaign-predictions.yaml"
    file.write_bytes(PREDICTIONS.read_bytes())
    inputs = load_inputs(folder / "campaign.yaml", VIRTUAL)
    store = RunStore(tmp_path / "results", "campaign")
    printed = io.StringIO()
    console = Console(file=printed, width=300)
    _register_predictions(inputs, store, console)
    record = read_record(store.sweep_dir)
    assert record is not None and record.sha256 == sha256_of(file.read_bytes())
    assert f"SHA-256 {record.sha256} registered" in printed.getvalue()
    file.write_text(file.read_text().replace("DECLINED", "HUNG"))
    _register_predictions(inputs, store, console)
    assert "changed since the sweep registered them" in printed.getvalue()
    assert read_record(store.sweep_dir) == record
