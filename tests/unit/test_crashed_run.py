"""A run that crashed at its fault, as the quickstart sweep wrote it
(tests/data/sweeps/quickstart-nccl-emulated, README there): every completed iteration reaches
the tables, also those of the size whose row never printed, and its fault window ends when the
job did, not when the link came back 1.7 s after the ranks' last line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from r2bench.analysis.jobend import LAUNCHER_RETURNED, RANKS_LAST_SEEN, JobEnd, job_end
from r2bench.parse.models import OutcomeStatus
from r2bench.tables import build as tb
from tests.support import paths

SWEEP = paths.DATA / "sweeps" / "quickstart-nccl-emulated"
CRASHED = "all_reduce-nccl-emulated-nic1-down-r0-a2fcee58fe"
CLEAN = "all_reduce-nccl-emulated-none-r0-645366c18b"
MIB = 1 << 20


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory) -> tb.Tables:
    sweep = tmp_path_factory.mktemp("results") / "quickstart"
    shutil.copytree(SWEEP, sweep)
    return tb.rebuild(sweep)


def _iter_lines(run: str) -> list[dict[str, float]]:
    lines = (SWEEP / run / "stdout.txt").read_text().splitlines()
    return [json.loads(line.removeprefix("#iter ")) for line in lines if line.startswith("#iter")]


def _iterations(tables: tb.Tables, run: str) -> pd.DataFrame:
    return tables.iterations_of([run]).reset_index(drop=True)


def test_the_crashed_runs_32_mib_iterations_are_in_the_table(tables: tb.Tables) -> None:
    it = _iterations(tables, CRASHED)
    logged = [line for line in _iter_lines(CRASHED) if line["size"] == 32 * MIB]
    big = it[it["size_bytes"] == 32 * MIB]
    assert len(logged) == 8 and len(big) == 8
    assert big["placement"].astype(str).unique().tolist() == ["out_of_place"]
    assert big["time_us"].tolist() == pytest.approx([line["seconds"] * 1e6 for line in logged])
    assert not big["row_printed"].any()  # no 32 MiB row in the results table
    results = tables.results[tables.results["run_id"] == CRASHED]
    assert 32 * MIB not in set(results["size_bytes"])
    # its last iteration ends when the workload logged it (rank 0 is the launch node)
    assert big["timestamp"].iloc[-1] == pytest.approx(logged[-1]["end"], abs=1e-6)
    assert (big["timestamp"] < tables.windows.set_index("run_id").loc[CRASHED, "applied_at"]).all()


def test_every_completed_iteration_of_the_crashed_run_is_there(tables: tb.Tables) -> None:
    it = _iterations(tables, CRASHED)
    assert len(it) == len(_iter_lines(CRASHED)) == 24
    small = it[it["size_bytes"] == MIB]
    assert len(small) == 16 and small["row_printed"].all()
    # busbw of an emulated 2-rank all_reduce: size / time (bus factor 2(n-1)/n = 1)
    assert it["busbw_gbps"].tolist() == pytest.approx(it["size_bytes"] / it["time_us"] / 1e3)


def test_a_run_whose_json_holds_its_iterations_is_unchanged(tables: tb.Tables) -> None:
    it = _iterations(tables, CLEAN)
    assert len(it) == 32 and it["row_printed"].all()
    # the -J twin's times (max over processes), not the #iter lines' (rank 0's)
    result = json.loads((SWEEP / CLEAN / "result.json").read_text())["results"][0]
    first = it[(it["size_bytes"] == MIB) & (it["placement"] == "out_of_place")]
    assert first["time_us"].tolist() == result["out_of_place_per_iter"]["times_us"]


def test_the_fault_window_ends_when_the_job_did(tables: tb.Tables) -> None:
    window = tables.windows.set_index("run_id").loc[CRASHED]
    run = tables.runs.set_index("run_id").loc[CRASHED]
    stdout_times = (SWEEP / CRASHED / "stdout.times").read_text().split()
    ranks_last_line = float(stdout_times[-1])  # launch node node0: no measured offset
    assert window["back_at"] == pytest.approx(ranks_last_line, abs=1e-6)
    assert window["ended_by"] == "job_end"
    assert window["back_at"] <= run["ended_at"]
    faults = [json.loads(x) for x in (SWEEP / CRASHED / "faults.jsonl").read_text().splitlines()]
    [revert] = [f for f in faults if f["action"] == "revert"]
    assert window["link_back_at"] == pytest.approx(revert["time"] - revert["clock_offset_s"])
    assert window["link_back_at"] - window["back_at"] > 1.5


def test_a_link_back_before_the_job_ended_closes_its_window(tmp_path: Path) -> None:
    """The earlier quickstart capture: runs that went on past the fault keep the link's return
    as their windows' end."""
    sweep = tmp_path / "quickstart"
    shutil.copytree(SWEEP.parent / "quickstart", sweep)
    t = tb.build_tables(sweep)
    windows = t.windows.merge(t.runs[["run_id", "outcome", "ended_at"]], on="run_id")
    survived = windows[windows["outcome"] == "ok"]
    assert len(survived) == 2
    assert (survived["ended_by"] == "link_back").all()
    assert survived["back_at"].tolist() == survived["link_back_at"].tolist()
    assert (windows["back_at"] <= windows["ended_at"]).all()


def test_job_end_of_each_outcome() -> None:
    crashed, ok = OutcomeStatus.CRASHED, OutcomeStatus.OK
    assert job_end(10.0, ok, [5.0], [4.0]) == JobEnd(10.0, LAUNCHER_RETURNED)
    assert job_end(10.0, OutcomeStatus.TIMEOUT, [5.0], [4.0]) == JobEnd(10.0, LAUNCHER_RETURNED)
    assert job_end(10.0, crashed, [5.0, 7.0], [4.0]) == JobEnd(7.0, RANKS_LAST_SEEN)
    # a fault after the ranks' last line hit a job still there (a rank killed while silent)
    assert job_end(10.0, crashed, [5.0], [6.0]) == JobEnd(10.0, LAUNCHER_RETURNED)
    assert job_end(None, crashed, [], []) is None
    assert job_end(None, crashed, [5.0], [4.0]) == JobEnd(5.0, RANKS_LAST_SEEN)
