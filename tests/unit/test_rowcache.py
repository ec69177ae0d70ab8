"""A run is parsed once: its rows are kept beside the tables and read back while it is unchanged."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from r2bench.runfolder import runformat, runmodel
from r2bench.runfolder import store as st
from r2bench.tables import rowcache
from r2bench.tables.build import Tables, build_tables, rebuild
from r2bench.tables.tablefiles import BUILD_FILE
from tests.support import paths
from tests.support.sample_sweep import SampleConfig, write_sample_sweep

DATA = paths.DATA / "nccl-tests"


@pytest.fixture
def sweep(tmp_path: Path) -> Path:
    return write_sample_sweep(tmp_path, DATA, SampleConfig(modes=(None, "1"), repeats=1)).sweep_dir


def _equal(a: Tables, b: Tables) -> None:
    for name, frame in a.items():
        pd.testing.assert_frame_equal(frame, getattr(b, name), check_dtype=True)


def _without_table_files(sweep: Path) -> Path:
    """The sweep with its written tables no longer current: a build reads the kept rows."""
    (sweep / runformat.TABLES_DIR / BUILD_FILE).unlink()
    return sweep


def _kept(sweep: Path) -> list[Path]:
    return sorted((sweep / runformat.TABLES_DIR / rowcache.CACHE_DIR).glob("*.json"))


def test_kept_rows_give_the_same_tables(sweep: Path) -> None:
    cold = rebuild(sweep)
    assert len(_kept(sweep)) == len(cold.runs) == 4
    warm = build_tables(_without_table_files(sweep))
    assert warm.stored_iterations is None  # from the kept rows, not the table files
    _equal(cold, warm)
    assert warm.build_key == cold.build_key


def test_build_tables_alone_keeps_nothing(sweep: Path) -> None:
    build_tables(sweep)
    assert not (sweep / runformat.TABLES_DIR).exists()


def test_a_changed_run_is_parsed_again(sweep: Path) -> None:
    before = rebuild(sweep)
    run = next(p for p in st.RunStore.at(sweep).run_dirs() if "r2ccl" in p.name)
    run_id = runmodel.load_run(run).spec_run_id
    assert (before.iterations["run_id"] == run_id).sum() > 0
    (run / runformat.RESULT_JSON).unlink()  # the per-iteration times are in the -J file only
    after = build_tables(sweep)
    assert after.build_key != before.build_key
    assert (after.iterations["run_id"] == run_id).sum() == 0


def test_rows_made_by_other_code_or_tampered_with_are_not_used(
    sweep: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cold = rebuild(sweep)
    path = _kept(sweep)[0]
    doc = json.loads(path.read_text())
    doc["rows"]["results"]["busbw_gbps"] = [{"not": "a value"}]
    path.write_text(json.dumps(doc))
    _without_table_files(sweep)
    _equal(cold, build_tables(sweep))  # the shape is checked: the run is parsed again
    path.write_text(json.dumps({**doc, "rows": {}}))
    _equal(cold, build_tables(sweep))
    rebuild(sweep)
    monkeypatch.setattr(rowcache, "code_key", lambda: "other code")
    assert all(rowcache.load(sweep, run, rowcache.fingerprint(run)) is None
               for run in st.RunStore.at(sweep).run_dirs())  # fmt: skip


def test_tables_built_from_the_same_runs_are_not_written_again(sweep: Path) -> None:
    rebuild(sweep)
    tables = sweep / runformat.TABLES_DIR
    stamps = {p.name: p.stat().st_mtime_ns for p in tables.glob("*.*")}
    rebuild(sweep)
    assert {p.name: p.stat().st_mtime_ns for p in tables.glob("*.*")} == stamps
    (tables / "runs.csv").write_text("edited by hand\n")
    rebuild(sweep)  # a table file changed since: all are written again
    assert (tables / "runs.csv").read_text().startswith('"run_id",')
    assert (tables / BUILD_FILE).is_file()


def test_rows_that_cannot_be_kept_only_cost_the_parse(sweep: Path) -> None:
    (sweep / runformat.TABLES_DIR).mkdir()
    (sweep / runformat.TABLES_DIR / rowcache.CACHE_DIR).write_text("a file where the folder goes\n")
    assert len(build_tables(sweep, keep=True).runs) == 4
    assert not _kept(sweep)


def test_a_symlinked_tables_folder_gets_no_kept_rows(sweep: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (sweep / runformat.TABLES_DIR).symlink_to(outside)
    tables = build_tables(sweep, keep=True)
    assert len(tables.runs) == 4
    assert not any(outside.rglob("*"))


def test_iterations_are_made_whole_only_when_read(sweep: Path) -> None:
    tables = build_tables(sweep)
    assert tables.blocks is not None and tables.n_iterations > 0
    run_id = str(tables.runs["run_id"].iloc[1])
    some = tables.iterations_of([run_id])
    parts = list(tables.iteration_slices(1000))
    assert tables.blocks is not None  # nothing above made the whole table
    whole = tables.iterations
    assert tables.blocks is None and len(whole) == tables.n_iterations
    expected = whole[whole["run_id"] == run_id]
    pd.testing.assert_frame_equal(
        some.reset_index(drop=True).astype({"run_id": str, "placement": str}),
        expected.reset_index(drop=True).astype({"run_id": str, "placement": str}),
    )
    pd.testing.assert_frame_equal(pd.concat(parts, ignore_index=True), whole)
    assert len(parts) > 1
