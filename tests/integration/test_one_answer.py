"""One answer per run: every log and run folder under tests/data gives the same library, R2CC
mode, outcome and number of timed iterations through `r2bench parse --json`, through
`r2bench import` and the tables, and (for a run folder) in the outcome the sweep recorded.

What does not agree yet is listed in `KNOWN`, each input with the reason, as a strict xfail:
an input that starts to agree fails until it is taken off the list.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from r2bench.analysis.importer import find_logs, import_dir
from r2bench.commands.parse import parse_command
from r2bench.runfolder import runmodel
from r2bench.tables.build import build_tables
from tests.support import paths

DATA = paths.DATA


@dataclass(frozen=True)
class Answer:
    """What one path says of one run."""

    library: str | None
    mode: str | None
    outcome: str
    iterations: int


NO_MODE = "parse --json reports no R2CC_MODE (import takes it from the -J env or the run's spec)"
ARTIFACT = (
    "R-2CCL's artifact logs: import labels them R-2CCL with their R2CC_MODE (the harness's "
    "settings lines); parse --json says what the lines state: library_family nccl, no mode"
)
HOT_REPAIR = (
    "the hot-repair program's log: import labels it R-2CCL (the artifact's harness); parse "
    "--json names no library"
)
ITER_LINES = (
    "a verifying workload's #iter lines: the tables count them as timed iterations, parse "
    "--json on a log file leaves them out of per_iteration (on a run folder it keeps them)"
)
JSON_TWIN = "import reads the text with its -J twin (the iterations); parse reads one file"
JSON_LIBRARY = (
    "a -J file names NCCL's version (nccl_library): import calls the library NCCL, parse "
    "--json leaves library_family empty"
)
FOLDER_LIBRARY = (
    "a run folder: the tables give the spec's library, parse --json what the logs state "
    "(library_family, none for the emulator)"
)

_KNOWN_BY_REASON: dict[str, tuple[str, ...]] = {
    JSON_TWIN: ("nccl-tests/all_reduce_perf.socket.I1.txt",),
    "parse --json finds 2 runs in it, import 1": ("public/rccl-2075-b.txt",),
    HOT_REPAIR: (
        "r7525/logs/01.hot_repair_to_balance.log",
        "r7525/logs/02.hot_repair_to_r2cc_allreduce.log",
    ),
    ARTIFACT: tuple(
        f"r7525/logs/{name}.log"
        for name in (
            "03.nccl_tests_compare_all",
            "04.nccl_tests_baseline_healthy",
            "05.nccl_tests_balance_unhealthy",
            "06.nccl_tests_r2cc_allreduce_unhealthy",
            "07.nccl_tests_r2cc_allreduce_k_sweep",
        )
    ),
    ITER_LINES: tuple(
        f"verify/{name}.stdout.txt"
        for name in (
            "all_gather.np2.ok",
            "all_reduce.np2.16M-256M.n20",
            "all_reduce.np2.256M.check",
            "all_reduce.np2.256M.nocheck",
            "all_reduce.np2.corrupt3",
            "all_reduce.np2.ok",
            "broadcast.np2.ok",
            "reduce_scatter.np2.ok",
        )
    ),
    NO_MODE: tuple(
        f"r2ccl/runs/r2ccl-{name}-all_reduce.json"
        for name in (
            "m0-nvlink",
            "m0-socket",
            "m0-socket-hca0",
            "m1-nvlink",
            "m1-socket",
            "m2-nvlink",
            "m2-socket",
            "m2-socket-hca0",
            "m3-nvlink",
            "m3-socket",
        )
    ),
    JSON_LIBRARY: (
        "r2ccl/runs/stock-nvlink-all_reduce.json",
        "r2ccl/runs/stock-socket-all_reduce.json",
    ),
}
KNOWN = {name: reason for reason, names in _KNOWN_BY_REASON.items() for name in names}
"""Inputs (relative to tests/data) whose paths disagree today, with why."""


def _run_folders() -> list[Path]:
    return sorted(spec.parent for spec in DATA.rglob(runmodel.SPEC))


def _logs() -> list[Path]:
    """Every log `import` reads (its text file, else its JSON file)."""
    logs = [s.text or s.json for s in find_logs(DATA)]
    return sorted(p for p in logs if p is not None)


def _parse_answers(paths: list[Path]) -> dict[Path, list[Answer]]:
    """`r2bench parse --json` on every path, in one call: each path's runs."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        parse_command(paths, as_json=True)
    answers: dict[Path, list[Answer]] = defaultdict(list)
    for line in out.getvalue().splitlines():
        doc = json.loads(line)
        iterations = sum(len(block["times_us"]) for block in doc["per_iteration"])
        answer = Answer(doc["library_family"], None, doc["outcome"], iterations)
        answers[Path(doc["file"])].append(answer)
    return answers


def _mode(value: Any) -> str | None:
    return None if value is None or value != value else str(value)  # NaN: not set


def _table_answers(sweep_dir: Path) -> dict[str, Answer]:
    """{run id: the tables' answer}; a library only guessed at import is no library."""
    tables = build_tables(sweep_dir)
    iterations = tables.iterations.groupby("run_id").size()
    answers = {}
    for row in tables.runs.to_dict("records"):
        guessed = str(row.get("library_basis") or "").startswith("guess")
        answers[row["run_id"]] = Answer(
            None if guessed else row["library_recipe"],
            _mode(row.get("R2CC_MODE")),
            row["outcome"],
            int(iterations.get(row["run_id"], 0)),
        )
    return answers


@dataclass(frozen=True)
class Answers:
    parse: dict[Path, list[Answer]]
    imported: dict[Path, list[Answer]]
    tables: dict[Path, Answer]
    recorded: dict[Path, str | None]


@pytest.fixture(scope="module")
def answers(tmp_path_factory: pytest.TempPathFactory) -> Answers:
    """Every input through every path, once."""
    work = tmp_path_factory.mktemp("one-answer")
    report = import_dir(DATA, work / "results", "imported")
    tables = _table_answers(report.sweep_dir)
    imported: dict[Path, list[Answer]] = defaultdict(list)
    for run_id, source in report.imported:
        imported[Path(source)].append(tables[run_id])
    folders: dict[Path, Answer] = {}
    recorded: dict[Path, str | None] = {}
    for sweep in {folder.parent for folder in _run_folders()}:
        copy = work / "sweeps" / sweep.relative_to(DATA)
        shutil.copytree(sweep, copy)
        by_id = _table_answers(copy)
        for folder in sweep.iterdir():
            if (folder / runmodel.SPEC).is_file():
                folders[folder] = by_id[folder.name]
                end = runmodel.load_run(folder).end
                recorded[folder] = end.outcome.status.value if end else None
    return Answers(_parse_answers([*_logs(), *_run_folders()]), imported, folders, recorded)


def _case(path: Path) -> Any:
    name = str(path.relative_to(DATA))
    marks = [pytest.mark.xfail(reason=KNOWN[name], strict=True)] if name in KNOWN else []
    return pytest.param(path, id=name, marks=marks)


@pytest.mark.parametrize("log", [_case(p) for p in _logs()])
def test_parse_and_import_give_one_answer(answers: Answers, log: Path) -> None:
    parsed = answers.parse.get(log, [])
    imported = answers.imported.get(log, [])
    if not imported:  # not a run to import (no nccl-tests output, no event): parse says so
        assert all(a.outcome == "not_nccl_tests" for a in parsed), parsed
        return
    assert parsed == imported


@pytest.mark.parametrize("folder", [_case(p) for p in _run_folders()])
def test_a_run_folder_gives_one_answer(answers: Answers, folder: Path) -> None:
    """parse --json on the folder, the tables, and the outcome the sweep recorded agree."""
    [parsed] = answers.parse[folder]
    table = answers.tables[folder]
    assert (parsed.outcome, parsed.iterations) == (table.outcome, table.iterations)
    assert table.outcome == answers.recorded[folder]


@pytest.mark.parametrize(
    "folder",
    [
        pytest.param(
            p,
            id=str(p.relative_to(DATA)),
            marks=pytest.mark.xfail(reason=FOLDER_LIBRARY, strict=True),
        )
        for p in _run_folders()
    ],
)
def test_a_run_folder_names_one_library_and_mode(answers: Answers, folder: Path) -> None:
    [parsed] = answers.parse[folder]
    table = answers.tables[folder]
    assert (parsed.library, parsed.mode) == (table.library, table.mode)
