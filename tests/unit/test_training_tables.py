"""The `training` and `training_checks` tables: a row per update per run and a row per run,
the same whether parsed, read back from kept rows or from the written tables; a sweep of
collective runs has both, empty, with their columns."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from r2bench.analysis.training import CHECK_COLUMNS
from r2bench.tables import build as tb
from r2bench.tables.training import TRAINING_COLUMNS
from tests.support import paths
from tests.support.sample_sweep import SampleConfig, write_sample_sweep
from tests.support.training_runs import (
    STEP_S,
    TrainingText,
    around_the_fault,
    base_loss,
    launch_offset,
    training_folder,
)


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    sweep = tmp_path_factory.mktemp("results") / "train"
    sweep.mkdir()
    training_folder(sweep, "a-base", TrainingText(), library="nccl")
    training_folder(sweep, "b-same", TrainingText())
    training_folder(sweep, "c-bit", TrainingText(loss_bits={57: 1}))
    cut = around_the_fault(37, step_s={37: 1.4}, loss_delta={60: 1e-3})
    training_folder(sweep, "d-cut", cut, faulted=True)
    return sweep


def test_a_row_per_update_per_run(sweep: Path) -> None:
    tables = tb.build_tables(sweep)
    frame = tables.training
    assert tuple(frame.columns) == TRAINING_COLUMNS
    assert len(frame) == 400 and list(frame["run_id"].unique()) == [
        "a-base",
        "b-same",
        "c-bit",
        "d-cut",
    ]
    row = frame[(frame["run_id"] == "c-bit") & (frame["update"] == 57)].iloc[0]
    assert row["loss"] == math.nextafter(base_loss(57), math.inf)
    assert row["library"] == "r2ccl" and row["scenario"] == "none" and row["repeat"] == 0
    assert row["step_s"] == STEP_S and row["allreduce_bytes"] == 4000
    tenth = frame[(frame["run_id"] == "a-base") & (frame["update"] == 10)].iloc[0]
    assert tenth["digest"].startswith("0000000a") and bool(tenth["digests_agree"])
    assert pd.isna(frame.iloc[0]["digests_agree"]) and frame.iloc[0]["digest"] is None
    cut = frame[(frame["run_id"] == "d-cut") & (frame["update"] == 37)].iloc[0]
    windows = tables.windows
    applied = float(windows[windows["run_id"] == "d-cut"]["applied_at"].iloc[0])
    assert cut["start"] == pytest.approx(applied - 0.02, abs=2e-6)  # controller clock
    assert cut["start"] != pytest.approx(applied - 0.02 + launch_offset(), abs=1e-9)
    assert int(windows[windows["run_id"] == "d-cut"]["iteration"].iloc[0]) == 37


def test_a_row_of_checks_per_run(sweep: Path) -> None:
    checks = tb.build_tables(sweep).training_checks.set_index("run_id")
    assert tuple(checks.reset_index().columns) == CHECK_COLUMNS
    assert pd.isna(checks.loc["a-base", "baseline_run_id"])
    assert pd.isna(checks.loc["a-base", "identical"])
    assert checks.loc["b-same", "baseline_run_id"] == "a-base"
    assert bool(checks.loc["b-same", "identical"]) and pd.isna(checks.loc["b-same", "hit_update"])
    assert not bool(checks.loc["c-bit", "identical"])
    assert checks.loc["c-bit", "first_difference_update"] == 57
    assert checks.loc["c-bit", "first_difference"].startswith("loss at update 57 differs: ")
    cut = checks.loc["d-cut"]
    assert bool(cut["identical"]) and cut["hit_update"] == 37 and cut["hit_step_s"] == 1.4
    assert cut["step_s_median_before"] == STEP_S and cut["step_s_median"] == STEP_S
    assert cut["max_abs_dloss_after"] == pytest.approx(1e-3)
    assert cut["final_loss_delta"] == 0.0 and cut["eval_ppl_delta_pct"] == 0.0
    assert cut["overhead_pct"] == pytest.approx(0.0)
    assert "hit update 37 (running when it was applied)" in cut["sentence"]
    runs = tb.build_tables(sweep).runs.set_index("run_id")
    assert set(runs["outcome"]) == {"ok"}


def test_kept_rows_and_written_tables_read_back_the_same(sweep: Path) -> None:
    built = tb.rebuild(sweep)  # keeps each run's rows and writes the tables
    again = tb.build_tables(sweep)
    assert again.stored_iterations is not None  # read back from the tables folder
    for name in ("training", "training_checks"):
        pd.testing.assert_frame_equal(getattr(built, name), getattr(again, name), check_exact=True)
        a, b = getattr(built, name), getattr(again, name)
        assert list(map(str, a.dtypes)) == list(map(str, b.dtypes))
    # the written tables gone: the kept rows of every run make them again
    for path in (sweep / "tables").glob("*.parquet"):
        path.unlink()
    kept = tb.build_tables(sweep)
    for name in ("training", "training_checks"):
        pd.testing.assert_frame_equal(getattr(built, name), getattr(kept, name), check_exact=True)


def test_a_collective_sweep_has_both_tables_empty(tmp_path: Path) -> None:
    cfg = SampleConfig(modes=(None,), scenarios=("none",), repeats=1, sizes=3)
    store = write_sample_sweep(tmp_path, paths.DATA / "nccl-tests", cfg)
    tables = tb.build_tables(store.sweep_dir)
    assert tables.training.empty and tuple(tables.training.columns) == TRAINING_COLUMNS
    assert tables.training_checks.empty
    assert tuple(tables.training_checks.columns) == CHECK_COLUMNS
    assert str(tables.training["loss"].dtype) == "float64"
    assert str(tables.training_checks["identical"].dtype) == "boolean"
