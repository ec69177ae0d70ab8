"""One answer per run: every log and run folder under tests/data gives the same library, R2CC
mode, outcome and number of timed iterations through `r2bench parse --json`, through
`r2bench import` and the tables, and (for a run folder) in the outcome the sweep recorded.

`parse` and `import` share one reading (`analysis.parseview.read_log_set`, the library from
`parse.library.identify_library`, the mode from `r2cc_mode`). What does not agree is listed in
`KNOWN`, each input with the reason, as a strict xfail: an input that starts to agree fails until
it is taken off the list (today: none).
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


KNOWN: dict[str, str] = {}
"""Inputs (relative to tests/data) whose paths disagree today, with why: none."""


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
        answer = Answer(doc["library"], doc["mode"], doc["outcome"], iterations)
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


@pytest.mark.parametrize("folder", [_case(p) for p in _run_folders()])
def test_a_run_folder_names_one_library_and_mode(answers: Answers, folder: Path) -> None:
    [parsed] = answers.parse[folder]
    table = answers.tables[folder]
    assert (parsed.library, parsed.mode) == (table.library, table.mode)
