"""A node whose clock runs 2 s ahead of the controller's moves nothing.

The sample sweep is written twice: once as recorded by nodes whose clocks agree with the
controller, once with node1 (where the faults are injected) 2 s ahead, its fault events
carrying that offset as the sweep measures it (`clock_offset_s`). Every reader must put the
fault on the controller's clock the same way: the runs table, the windows table, the report's
timelines and recovery table, and the paper figures' stall numbers and claims.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from r2bench.figures.registry import draw_timeline, stall_numbers
from r2bench.report.html import build_report
from r2bench.report.recovery import recovery_table, run_metrics
from r2bench.runfolder import runformat, runmodel
from r2bench.runfolder import store as st
from r2bench.tables.build import Tables, build_tables
from tests.support import paths
from tests.support.sample_sweep import SampleConfig, write_sample_sweep

DATA = paths.DATA / "nccl-tests"
OFFSET_S = 2.0
CONFIG = SampleConfig(modes=(None, "1"), repeats=2)


def _shift_node1(run_dir: Path) -> None:
    """Rewrite faults.jsonl as node1 would have written it with its clock OFFSET_S ahead."""
    path = run_dir / runformat.FAULTS
    events = [
        runmodel.FaultEvent.model_validate_json(line) for line in path.read_text().splitlines()
    ]
    shifted = []
    for event in events:
        update: dict[str, float] = {"clock_offset_s": OFFSET_S}
        for name in ("time", "applied_at", "verified_at"):
            value = getattr(event, name)
            if value is not None:
                update[name] = value + OFFSET_S
        shifted.append(event.model_copy(update=update) if event.node == "node1" else event)
    path.write_text("".join(json.dumps(e.model_dump(mode="json")) + "\n" for e in shifted))


def _sweep(tmp: Path, shifted: bool) -> tuple[Path, Tables]:
    store = write_sample_sweep(tmp, DATA, CONFIG)
    if shifted:
        for run_dir in store.run_dirs():
            if (run_dir / runformat.FAULTS).stat().st_size:
                _shift_node1(run_dir)
    return store.sweep_dir, build_tables(store.sweep_dir)


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory: pytest.TempPathFactory) -> tuple[Tables, Tables, Path]:
    _, truth = _sweep(tmp_path_factory.mktemp("same-clocks"), shifted=False)
    folder, skewed = _sweep(tmp_path_factory.mktemp("node1-ahead"), shifted=True)
    return truth, skewed, folder


def _faulted(tables: Tables) -> pd.DataFrame:
    return tables.runs[tables.runs["n_faults"] > 0].set_index("run_id").sort_index()


def test_the_offset_was_there_to_correct(sweeps: tuple[Tables, Tables, Path]) -> None:
    truth, skewed, _ = sweeps
    raw = [runmodel.FaultEvent.model_validate_json(line) for line in _faults_lines(sweeps[2])]
    assert raw and all(e.clock_offset_s == OFFSET_S for e in raw if e.node == "node1")
    assert len(_faulted(truth)) == len(_faulted(skewed)) > 0


def _faults_lines(folder: Path) -> list[str]:
    return [
        line
        for run_dir in st.RunStore.at(folder).run_dirs()
        for line in (run_dir / runformat.FAULTS).read_text().splitlines()
    ]


def test_runs_and_windows_tables_agree_with_the_truth(sweeps: tuple[Tables, Tables, Path]) -> None:
    truth, skewed, _ = sweeps
    columns = ["fault_applied_at", "fault_back_at", "stall_s", "recover_s", "degraded_ratio"]
    pd.testing.assert_frame_equal(_faulted(truth)[columns], _faulted(skewed)[columns])
    keys = ["run_id", "fault", "cycle"]
    a = truth.windows.sort_values(keys).reset_index(drop=True)
    b = skewed.windows.sort_values(keys).reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b)
    injects = skewed.events[skewed.events["kind"] == "fault_inject"].set_index("run_id")["time"]
    runs = _faulted(skewed)
    assert injects.sort_index().to_numpy() == pytest.approx(runs["fault_applied_at"].to_numpy())


def test_report_timelines_and_recovery_table_read_the_same_windows(
    sweeps: tuple[Tables, Tables, Path], tmp_path: Path
) -> None:
    _, skewed, folder = sweeps
    runs = _faulted(skewed)
    figures = build_report(folder, skewed, tmp_path / "report.html")
    timelines = [f for f in figures if f.id.startswith("timeline-")]
    assert len(timelines) == len(runs)
    for fig in timelines:
        run = runs.loc[fig.meta["run_id"]]
        [(start, end)] = fig.meta["windows"]
        assert start == pytest.approx(run["fault_applied_at"])
        assert end == pytest.approx(run["fault_back_at"])
    table = recovery_table(run_metrics(skewed)).set_index("mode")
    stalls = runs[runs["R2CC_MODE"].astype(str) == "1"]["stall_s"].astype(float)
    assert len(stalls.dropna()) == CONFIG.repeats
    assert table.loc["1", "stall_s median"] == pytest.approx(stalls.median())


def test_figures_claims_use_the_same_window_and_stall(sweeps: tuple[Tables, Tables, Path]) -> None:
    truth, skewed, _ = sweeps
    for tables in (truth, skewed):
        for run_id, run in _faulted(tables).iterrows():
            facts = stall_numbers(tables, str(run_id))
            assert facts["inject"] == pytest.approx(run["fault_applied_at"])
            stall = run["stall_s"]
            assert facts["stall_s"] == (None if stall != stall else pytest.approx(stall))
    a, b = draw_timeline(truth).claim, draw_timeline(skewed).claim
    assert (a.verdict, a.numbers) == (b.verdict, b.numbers)
