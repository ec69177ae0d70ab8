"""A run is parsed once: its rows are kept beside the tables and read back while it is unchanged."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from r2bench.runfolder import runformat, runmodel
from r2bench.runfolder import store as st
from r2bench.tables import rowcache
from r2bench.tables.build import Tables, build_tables, rebuild
from r2bench.tables.tablefiles import BUILD_FILE
from tests.support import paths
from tests.support.cli_runner import invoke_wide
from tests.support.sample_sweep import SampleConfig, write_sample_sweep
from tests.support.sweeps import copy_sweep

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


# ---- kept rows: keyed by what the parser reads, and only exactly as they were written -------


def _fresh(sweep: Path) -> Tables:
    shutil.rmtree(sweep / runformat.TABLES_DIR, ignore_errors=True)
    return build_tables(sweep)


def _linked_stdout(sweep: Path, into: str) -> tuple[str, Path]:
    """A run whose stdout.txt is a link to a file inside the run folder (at `into`)."""
    run = next(p for p in st.RunStore.at(sweep).run_dirs() if "r2ccl" in p.name)
    target = run / into
    target.parent.mkdir(parents=True, exist_ok=True)
    (run / runformat.STDOUT).rename(target)
    (run / runformat.STDOUT).symlink_to(target.relative_to(run))
    return str(runmodel.load_run(run).spec_run_id), target


def _rewrite_in_place(target: Path) -> None:
    """Keep half the result lines, writing through the same inode (no new file, no rename)."""
    lines = target.read_text().splitlines(keepends=True)
    rows = [i for i, line in enumerate(lines) if line.strip()[:1].isdigit()]
    keep = [line for i, line in enumerate(lines) if i not in rows[len(rows) // 2 :]]
    with target.open("r+") as handle:
        handle.write("".join(keep))
        handle.truncate()


# Cells of the wrong type in a kept-rows file: each crashed the build (a TypeError, an
# OverflowError, an AttributeError) before kept rows had to be exactly as written.
CELL_EDITS = [
    ("results", "size_bytes", "x"),
    ("results", "busbw_gbps", 10**30),
    ("results", "wrong", 1.5),
    ("provenance", "field", None),
    ("runs", "library", 7),
    ("runs", "repeat", 10**30),
    ("runs", "avg_busbw_gbps", "x"),
]


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


@pytest.mark.parametrize("into", ["sub/out.txt", "node/x/out.txt", "sub/deeper/out.txt"])
def test_a_linked_file_rewritten_in_place_is_parsed_again(
    small_sweep: Path, tmp_path: Path, into: str
) -> None:
    sweep = copy_sweep(small_sweep, tmp_path / "s")
    run_id, target = _linked_stdout(sweep, into)
    cold = rebuild(sweep)
    before = int(cold.runs.set_index("run_id").loc[run_id, "n_rows"])
    _rewrite_in_place(target)
    warm = build_tables(sweep)
    after = int(warm.runs.set_index("run_id").loc[run_id, "n_rows"])
    assert after < before
    assert after == int(_fresh(sweep).runs.set_index("run_id").loc[run_id, "n_rows"])


def test_a_linked_node_folder_rewritten_in_place_is_parsed_again(
    small_sweep: Path, tmp_path: Path
) -> None:
    sweep = copy_sweep(small_sweep, tmp_path / "s")
    run = next(p for p in st.RunStore.at(sweep).run_dirs() if "r2ccl" in p.name)
    first = rebuild(sweep).build_key
    (run / "elsewhere" / "n0").mkdir(parents=True)
    if (run / runformat.NODE_DIR).exists():
        (run / runformat.NODE_DIR).rename(run / "elsewhere" / "n0" / "node")
    (run / "elsewhere" / "n0" / "node").mkdir(exist_ok=True)
    (run / runformat.NODE_DIR).symlink_to("elsewhere/n0/node")
    second = rebuild(sweep).build_key
    assert second != first
    log = run / "elsewhere" / "n0" / "node" / "counters.tsv"
    log.write_text("x\n")
    assert rebuild(sweep).build_key != second  # a file added behind the link counts


def test_a_link_loop_in_a_run_folder_costs_only_its_rows(small_sweep: Path, tmp_path: Path) -> None:
    sweep = copy_sweep(small_sweep, tmp_path / "s")
    run = next(p for p in st.RunStore.at(sweep).run_dirs() if "r2ccl" in p.name)
    (run / "loop").symlink_to("loop")
    (run / runformat.NODE_DIR).mkdir(exist_ok=True)
    (run / runformat.NODE_DIR / "up").symlink_to("..")
    assert len(rebuild(sweep).runs) == len(_fresh(sweep).runs)


@pytest.mark.parametrize(("table", "column", "value"), CELL_EDITS)
def test_kept_rows_of_the_wrong_shape_are_ignored_and_rebuilt(
    small_sweep: Path, tmp_path: Path, table: str, column: str, value: object
) -> None:
    sweep = copy_sweep(small_sweep, tmp_path / "s")
    cold = rebuild(sweep)
    for path in sorted((sweep / runformat.TABLES_DIR / rowcache.CACHE_DIR).glob("*.json")):
        doc = json.loads(path.read_text())
        rows = doc["rows"][table]
        if table == "runs":
            rows[0][column] = value
        else:
            rows[column] = [value] * len(rows[column])
        path.write_text(json.dumps(doc))
    warm = build_tables(sweep)
    for name, frame in cold.items():
        pd.testing.assert_frame_equal(frame, getattr(warm, name))
    assert invoke_wide("report", str(sweep)).exit_code == 0


def test_kept_rows_cut_short_or_reordered_are_ignored(small_sweep: Path, tmp_path: Path) -> None:
    sweep = copy_sweep(small_sweep, tmp_path / "s")
    cold = rebuild(sweep)
    paths = sorted((sweep / runformat.TABLES_DIR / rowcache.CACHE_DIR).glob("*.json"))
    paths[0].write_bytes(paths[0].read_bytes()[:-100])
    doc = json.loads(paths[1].read_text())
    paths[1].write_text(json.dumps({"rows": doc["rows"], **doc}))  # same data, keys moved
    warm = build_tables(sweep)
    for name, frame in cold.items():
        pd.testing.assert_frame_equal(frame, getattr(warm, name))
