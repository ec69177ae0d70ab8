"""Hostile and broken results, round 4: sweep paths given as `.`, `..` or in any script, kept
rows that must follow what the parser reads, kept-row files of the wrong shape, series
baselines over thousands of scenarios, and compare's provenance check over partly known
testbeds. Each is what the user meant or a one-line error with exit 2, never a traceback."""

from __future__ import annotations

import json
import re
import shutil
import time
import tracemalloc
from pathlib import Path

import pandas as pd
import pytest

from r2bench.compare.provenance import compare_provenance, sweep_facts
from r2bench.compare.samples import load_sweep
from r2bench.runfolder import runformat, runmodel
from r2bench.runfolder import store as st
from r2bench.tables import rowcache
from r2bench.tables.build import Tables, build_tables, rebuild
from tests.support import paths
from tests.support.results_round4 import copy, invoke

CAPTURED = paths.DATA / "nccl-tests"


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


# ---- compare: a fact only some runs record is partly unknown, and says so --------------------


def _drop_from_spec(run: Path, field: str) -> None:
    spec = json.loads((run / runformat.SPEC).read_text())
    spec.pop(field, None)
    (run / runformat.SPEC).write_text(json.dumps(spec))


# ---- run-folder side files are never read whole past their cap -------------------------------


def _sparse(path: Path, size: int) -> None:
    """A file of `size` zero bytes that takes no disk (and no time) to make."""
    with path.open("wb") as handle:
        handle.truncate(size)


# ---- a reference file's numbers: finite, whole where they count -------------------------------


@pytest.fixture(scope="module")
def reference(good: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("ref") / "ref.yaml"
    invoke("compare", str(good), str(good), "--write-reference", str(path))
    assert path.is_file()  # the gate's verdict (too few repeats here) does not matter
    return path


VALUE = r"busbw_gbps: \[[^,]+,"
LOWER = r"(busbw_gbps: \[[^,]+), [^,]+,"


def test_a_run_folder_named_in_any_script_is_read(good: Path, tmp_path: Path) -> None:
    sweep = copy(good, tmp_path / "s")
    run = next(p for p in sweep.iterdir() if p.is_dir() and p.name != "tables")
    run.rename(sweep / "exécution-1")
    result = invoke("report", str(sweep))
    assert result.exit_code == 0, result.output
    assert "exécution-1" in (sweep / "report.html").read_text(encoding="utf-8")


def test_the_root_folder_is_no_sweep_exit_2(tmp_path: Path) -> None:
    for command in ("report", "figures"):
        result = invoke(command, "/")
        assert result.exit_code == 2, result.output


def test_import_from_a_folder_named_in_any_script_makes_that_sweep(
    tmp_path: Path,
) -> None:
    logs = tmp_path / "journaux-été"
    logs.mkdir()
    shutil.copy(next(CAPTURED.glob("*.txt")), logs / "all_reduce_perf.txt")
    result = invoke("import", str(logs), "--results", str(tmp_path / "results"))
    assert result.exit_code == 0, result.output
    assert (tmp_path / "results" / "journaux-été").is_dir()


@pytest.mark.parametrize("into", ["sub/out.txt", "node/x/out.txt", "sub/deeper/out.txt"])
def test_a_linked_file_rewritten_in_place_is_parsed_again(
    good: Path, tmp_path: Path, into: str
) -> None:
    sweep = copy(good, tmp_path / "s")
    run_id, target = _linked_stdout(sweep, into)
    cold = rebuild(sweep)
    before = int(cold.runs.set_index("run_id").loc[run_id, "n_rows"])
    _rewrite_in_place(target)
    warm = build_tables(sweep)
    after = int(warm.runs.set_index("run_id").loc[run_id, "n_rows"])
    assert after < before
    assert after == int(_fresh(sweep).runs.set_index("run_id").loc[run_id, "n_rows"])


def test_a_linked_node_folder_rewritten_in_place_is_parsed_again(
    good: Path, tmp_path: Path
) -> None:
    sweep = copy(good, tmp_path / "s")
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


def test_a_link_loop_in_a_run_folder_costs_only_its_rows(good: Path, tmp_path: Path) -> None:
    sweep = copy(good, tmp_path / "s")
    run = next(p for p in st.RunStore.at(sweep).run_dirs() if "r2ccl" in p.name)
    (run / "loop").symlink_to("loop")
    (run / runformat.NODE_DIR).mkdir(exist_ok=True)
    (run / runformat.NODE_DIR / "up").symlink_to("..")
    assert len(rebuild(sweep).runs) == len(_fresh(sweep).runs)


@pytest.mark.parametrize(("table", "column", "value"), CELL_EDITS)
def test_kept_rows_of_the_wrong_shape_are_ignored_and_rebuilt(
    good: Path, tmp_path: Path, table: str, column: str, value: object
) -> None:
    sweep = copy(good, tmp_path / "s")
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
    assert invoke("report", str(sweep)).exit_code == 0


def test_kept_rows_cut_short_or_reordered_are_ignored(good: Path, tmp_path: Path) -> None:
    sweep = copy(good, tmp_path / "s")
    cold = rebuild(sweep)
    paths = sorted((sweep / runformat.TABLES_DIR / rowcache.CACHE_DIR).glob("*.json"))
    paths[0].write_bytes(paths[0].read_bytes()[:-100])
    doc = json.loads(paths[1].read_text())
    paths[1].write_text(json.dumps({"rows": doc["rows"], **doc}))  # same data, keys moved
    warm = build_tables(sweep)
    for name, frame in cold.items():
        pd.testing.assert_frame_equal(frame, getattr(warm, name))


@pytest.mark.parametrize("unnamed", [1, 3])
def test_runs_without_a_testbed_are_warned_of_even_when_others_name_one(
    good: Path, tmp_path: Path, unnamed: int
) -> None:
    cand = copy(good, tmp_path / "cand")
    runs = list(st.RunStore.at(cand).run_dirs())
    for run in runs[:unnamed]:
        _drop_from_spec(run, "testbed")
    facts = sweep_facts(load_sweep(cand))
    base = sweep_facts(load_sweep(good))
    problems, warnings = compare_provenance(base, facts)
    assert problems == []
    (line,) = [w for w in warnings if "testbed" in w]
    assert f"{unnamed} of {len(runs)} runs" in line and "candidate" in line
    result = invoke("compare", str(good), str(cand))
    assert f"{unnamed} of {len(runs)} runs" in result.output


def test_partly_known_facts_on_both_sides_are_never_a_difference(good: Path) -> None:
    facts = sweep_facts(load_sweep(good))
    base = {**facts, "testbed unknown in": "1 of 4 runs"}
    cand = {**facts, "testbed unknown in": "3 of 4 runs"}
    problems, warnings = compare_provenance(base, cand)
    assert problems == [] and len(warnings) == 2


@pytest.mark.parametrize("name", [runformat.FAULTS, runformat.EVENTS])
@pytest.mark.parametrize("content", ["zeros", "lines"])
def test_a_1gib_jsonl_side_file_is_refused_fast_and_named(
    good: Path, tmp_path: Path, name: str, content: str
) -> None:
    sweep = copy(good, tmp_path / "s")
    run = next(iter(st.RunStore.at(sweep).run_dirs()))
    if content == "zeros":
        _sparse(run / name, 1 << 30)
    else:  # valid-looking lines past the cap (a real file written by a runaway loop)
        fault = runmodel.FaultEvent(action="inject", fault=0, kind="nic_down", node="n0")
        line = (fault.model_dump_json() if name == runformat.FAULTS else "{}").encode() + b"\n"
        with (run / name).open("wb") as handle:
            handle.write(line * ((runmodel.JSONL_LIMIT // len(line)) + 10))
    tracemalloc.start()
    start = time.monotonic()
    try:
        record = runmodel.load_run(run)
        events = record.events()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert time.monotonic() - start < 2
    assert peak < 100 * 1024 * 1024
    assert events == [] and any(name in p and "larger than" in p for p in record.problems)


# ---- environment values from a run folder never take the tables down --------------------------


@pytest.mark.parametrize(
    "value", ["5000", "9" * 5001, "-1", "inf", "nan", "1e308", "\u00b9", "\u0661\u0662", ""]
)
def test_a_hostile_ib_timeout_in_a_run_s_environment_never_kills_the_report(
    good: Path, tmp_path: Path, value: str
) -> None:
    # `import` ends in the same rebuild as `report`: one test covers both.
    sweep = copy(good, tmp_path / "s")
    for run in st.RunStore.at(sweep).run_dirs():
        for name in (runformat.SPEC, runformat.PROVENANCE):
            doc = json.loads((run / name).read_text())
            doc.setdefault("env", {}).update(NCCL_IB_TIMEOUT=value, NCCL_IB_RETRY_CNT=value)
            (run / name).write_text(json.dumps(doc))
    result = invoke("report", str(sweep))
    assert result.exit_code == 0, result.output
    assert len(rebuild(sweep).runs) == len(list(st.RunStore.at(sweep).run_dirs()))


@pytest.mark.parametrize(
    ("pattern", "replacement", "field"),
    [
        *((r"\bn: \d+", f"n: {v}", "n") for v in (".inf", "-.inf", "1e400", ".nan", "-3", "2.5")),
        *((VALUE, f"busbw_gbps: [{v},", "busbw_gbps") for v in (".inf", ".nan", "-.inf", "x")),
        *((LOWER, rf"\1, {v},", "busbw_gbps") for v in (".inf", ".nan", "x")),
    ],
)
def test_non_finite_or_fractional_reference_numbers_are_refused_by_name(
    good: Path, reference: Path, tmp_path: Path, pattern: str, replacement: str, field: str
) -> None:
    text = reference.read_text()
    path = tmp_path / "ref.yaml"
    path.write_text(re.sub(pattern, replacement, text, count=1))
    assert path.read_text() != text
    result = invoke("compare", str(path), str(good))
    assert result.exit_code == 2, result.output
    assert f"cells[0].{field}" in result.output and str(path) in result.output.replace("\n", "")


@pytest.mark.parametrize("count", [".inf", "1e400", "-1", ".nan"])
def test_non_finite_outcome_counts_in_a_reference_are_refused(
    good: Path, reference: Path, tmp_path: Path, count: str
) -> None:
    text = reference.read_text()
    path = tmp_path / "ref.yaml"
    path.write_text(re.sub(r"outcomes: \{(\w+): \d+", rf"outcomes: {{\1: {count}", text, count=1))
    assert path.read_text() != text
    result = invoke("compare", str(path), str(good))
    assert result.exit_code == 2, result.output
    assert "outcomes" in result.output
