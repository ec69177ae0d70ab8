"""Tables are read back from their Parquet while current, exactly as built; each run folder's
spec.json is read once per build."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from r2bench.runfolder import runformat, runmodel
from r2bench.runfolder import store as st
from r2bench.tables import tablefiles
from r2bench.tables.build import TABLE_NAMES, Tables, build_tables, rebuild
from r2bench.tables.tablefiles import BUILD_FILE, TablesChanged
from tests.support import paths
from tests.support.sample_sweep import SampleConfig, write_sample_sweep

DATA = paths.DATA / "nccl-tests"


@pytest.fixture
def sweep(tmp_path: Path) -> Path:
    cfg = SampleConfig(modes=(None, "1"), repeats=1, counters=True)
    return write_sample_sweep(tmp_path, DATA, cfg).sweep_dir


def _same(built: Tables, read: Tables) -> None:
    """Every table equal, column dtypes and the Python type of every object cell included
    (a missing value stays None, never NaN)."""
    for name in TABLE_NAMES:
        a, b = getattr(built, name), getattr(read, name)
        pd.testing.assert_frame_equal(a, b, check_exact=True)
        assert list(map(str, a.dtypes)) == list(map(str, b.dtypes)), name
        for column in [c for c in a.columns if str(a[c].dtype) == "object"]:
            assert list(map(type, a[column])) == list(map(type, b[column])), (name, column)
    assert built.warnings == read.warnings


def _copy_of_first_run(sweep: Path) -> Path:
    run = next(st.RunStore.at(sweep).run_dirs())
    return Path(shutil.copytree(run, sweep / f"{run.name} copy"))


def test_current_tables_are_read_back_as_they_were_built(sweep: Path) -> None:
    _copy_of_first_run(sweep)  # a warning the read-back must keep
    built = rebuild(sweep)
    assert built.warnings and "counted once" in built.warnings[0]
    assert len(built.counters) and len(built.windows) and len(built.traffic)
    read = build_tables(sweep)
    assert read.stored_iterations is not None  # from the Parquet, not the run folders
    _same(built, read)


def test_the_iterations_are_read_a_few_runs_or_a_slice_at_a_time(sweep: Path) -> None:
    built = rebuild(sweep)
    read = build_tables(sweep)
    assert read.n_iterations == built.n_iterations > 0
    run_id = str(built.runs["run_id"].iloc[1])
    pd.testing.assert_frame_equal(read.iterations_of([run_id]), built.iterations_of([run_id]))
    parts = list(read.iteration_slices(1000))
    assert len(parts) > 1 and read.stored_iterations is not None  # still not read whole
    pd.testing.assert_frame_equal(pd.concat(parts, ignore_index=True), built.iterations)


def _later(path: Path) -> None:
    """A file's time a second on (two writes within a clock tick share their time)."""
    info = path.stat()
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns + 10**9))


def _edit_a_spec(sweep: Path) -> None:
    spec = next(st.RunStore.at(sweep).run_dirs()) / runformat.SPEC
    doc = json.loads(spec.read_text())
    spec.write_text(json.dumps({**doc, "repeat": 7}))
    _later(spec)


def _touch_a_table(sweep: Path) -> None:
    table = sweep / runformat.TABLES_DIR / "results.parquet"
    table.write_bytes(table.read_bytes())
    _later(table)


def _build_of_an_older_format(sweep: Path) -> None:
    build = sweep / runformat.TABLES_DIR / BUILD_FILE
    doc = json.loads(build.read_text())
    build.write_text(json.dumps({k: v for k, v in doc.items() if k not in ("format", "dtypes")}))


@pytest.mark.parametrize(
    "change",
    [_edit_a_spec, _touch_a_table, _build_of_an_older_format, _copy_of_first_run],
    ids=["a run changed", "a table file rewritten", "an older BUILD", "a run folder added"],
)
def test_tables_no_longer_current_are_built_again(sweep: Path, change: Any) -> None:
    rebuild(sweep)
    change(sweep)
    again = build_tables(sweep)
    assert again.stored_iterations is None
    shutil.rmtree(sweep / runformat.TABLES_DIR)
    _same(build_tables(sweep), again)


def test_a_tables_folder_linked_out_of_the_sweep_is_never_read(sweep: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(sweep, elsewhere)
    rebuild(elsewhere)  # current tables of the same runs, outside this sweep
    (sweep / runformat.TABLES_DIR).symlink_to(elsewhere / runformat.TABLES_DIR)
    assert build_tables(sweep).stored_iterations is None


def test_a_table_file_that_does_not_hold_what_build_says_is_built_again(sweep: Path) -> None:
    built = rebuild(sweep)
    runs = sweep / runformat.TABLES_DIR / "runs.parquet"
    stamp = runs.stat()
    runs.write_bytes(b"PAR1 not a table" + b"\0" * (stamp.st_size - 16))
    os.utime(runs, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))  # as written, to BUILD's eye
    again = build_tables(sweep)
    assert again.stored_iterations is None
    _same(built, again)


def test_each_spec_is_read_once_per_build(sweep: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _copy_of_first_run(sweep)
    reads: list[Path] = []
    real = runmodel.load_json_record

    def counting(path: Path, *args: Any, **kwargs: Any) -> Any:
        if path.name == runformat.SPEC:
            reads.append(path)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(runmodel, "load_json_record", counting)
    folders = list(st.RunStore.at(sweep).run_dirs())
    rebuild(sweep)  # parsed: each spec.json once, the copy's too (it is told apart by its id)
    assert sorted(reads) == sorted(f / runformat.SPEC for f in folders)
    reads.clear()
    (sweep / runformat.TABLES_DIR / BUILD_FILE).unlink()
    build_tables(sweep)  # every run's rows kept: no spec.json read at all
    assert reads == []
    build_tables(sweep)
    assert reads == []


def test_tables_read_back_never_read_a_rewritten_file(sweep: Path) -> None:
    rebuild(sweep)
    read = build_tables(sweep)
    _edit_a_spec(sweep)
    rebuild(sweep)  # another build rewrote the table files under the tables read back
    with pytest.raises(TablesChanged, match="rewritten since it was read back"):
        read.iterations_of(["any"])


def test_the_rows_of_a_run_are_read_from_the_row_groups_that_hold_them(
    sweep: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tablefiles, "ROW_GROUP_ROWS", 97)  # runs span groups, groups span runs
    built = rebuild(sweep)
    read = build_tables(sweep)
    assert read.stored_iterations is not None
    runs = [str(r) for r in built.runs["run_id"]]
    for chosen in ([runs[0]], [runs[-1]], [runs[2], runs[0]], runs, ["no such run"]):
        pd.testing.assert_frame_equal(read.iterations_of(chosen), built.iterations_of(chosen))


def test_rows_not_written_run_by_run_are_still_found(tmp_path: Path) -> None:
    frame = pd.DataFrame(
        {"run_id": pd.Categorical(["a", "a", "b", "a"]), "time_us": [1.0, 2.0, 3.0, 4.0]}
    )
    path = tmp_path / "iterations.parquet"
    frame.to_parquet(path, index=False)
    info = path.stat()
    stored = tablefiles.StoredIterations(
        path, {"run_id": "category", "time_us": "float64"}, [info.st_size, info.st_mtime_ns]
    )
    assert list(stored.of_runs({"a"})["time_us"]) == [1.0, 2.0, 4.0]
    assert list(stored.of_runs({"b"})["time_us"]) == [3.0]


def test_an_empty_table_has_no_rows_of_any_run(tmp_path: Path) -> None:
    """A training sweep's iterations table has no row: its run_id column has no type (null),
    and filtering it on strings raised (the report of a real GPU training sweep failed so)."""
    path = tmp_path / "iterations.parquet"
    pa_table = pd.DataFrame({"run_id": pd.Series([], dtype=object), "time_us": []})
    pa_table.to_parquet(path, index=False)
    info = path.stat()
    stored = tablefiles.StoredIterations(
        path, {"run_id": "category", "time_us": "float64"}, [info.st_size, info.st_mtime_ns]
    )
    assert len(stored.of_runs({"a", "b"})) == 0
