"""`r2bench parse`: nccl-tests outputs, NCCL/R2CC logs or a sweep's run folder, read into
result rows, events and an outcome (a table, or JSON Lines).

`parse_command` returns the process exit code: 0 done, 1 an input that is not nccl-tests
output, 2 a path that cannot be read. The reading is `analysis.parseview`'s (the one `import`
uses); this module holds the arguments and the printing. `parse_file` (re-exported from there)
reads one file (benchmarks/bench_logs.py times it).
"""

from __future__ import annotations

import json
import math
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from r2bench import plaintable
from r2bench.analysis.parseview import (
    JSON_SUFFIXES,
    FolderRun,
    LogRun,
    json_twin,
    parse_file,
    read_folder,
    read_path,
    run_folder_of,
    text_twin,
)
from r2bench.errors import ExitCode
from r2bench.parse.library import nccl_version_text
from r2bench.parse.models import (
    Outcome,
    OutcomeStatus,
    ParsedNcclTests,
    PerIteration,
    ResultRow,
)
from r2bench.runfolder.runmodel import RecordError
from r2bench.safeio import InputRefused, TooDeep
from r2bench.textsafe import printable

__all__ = ["command", "file_summary", "folder_summary", "parse_command", "parse_file"]


def file_summary(path: Path, run: LogRun, recovery: bool = True) -> dict[str, Any]:
    """The JSON object `r2bench parse --json` prints for one run of a file (with `recovery`,
    the metrics of the run folder holding it)."""
    doc = _summary(path, run.parsed, run.outcome, run.per_iteration)
    doc.update(library=run.library.shown, library_basis=run.library.basis, mode=run.mode)
    doc["events"] = [e.model_dump(mode="json", exclude_defaults=True) for e in run.events]
    if recovery:
        from r2bench.analysis.recovery import recovery_doc  # needs pandas (the report extra)

        doc["recovery"] = recovery_doc(path)  # the run folder's metrics (docs/recovery.md)
    return doc


def _summary(
    path: Path, parsed: ParsedNcclTests, outcome: Outcome, per_iteration: list[PerIteration]
) -> dict[str, Any]:
    """The keys a file's and a run folder's JSON objects share; `rows` holds the result rows
    as read (`_json_line` writes them as JSON, the table reads them as they are)."""
    doc: dict[str, Any] = {
        "file": str(path),
        "collective": parsed.collective,
        "collective_from": parsed.collective_from,
        "nccl_tests_version": parsed.nccl_tests_version,
        "nccl_library": nccl_version_text(parsed.nccl_library),
        "nccl_headers": nccl_version_text(parsed.nccl_headers),
        "library_family": parsed.library_family,
        "library_version": parsed.library_version,
        "library_path": parsed.library_path,
        "outcome": outcome.status.value,
        "reason": outcome.reason,
        "failed_rank": outcome.failed_rank,
        "failed_host": outcome.failed_host,
        "evidence": [e.model_dump(mode="json") for e in outcome.evidence],
        "rows": parsed.rows,
        "per_iteration": [p.model_dump(mode="json") for p in per_iteration],
        "warnings": parsed.warnings,
    }
    if parsed.avg_busbw_gbps is not None:
        doc["avg_busbw_gbps"] = parsed.avg_busbw_gbps
    return doc


_ROW_KEYS = {
    "size_bytes",
    "count",
    "type",
    "redop",
    "placement",
    "cycle",
    "time_us",
    "algbw_gbps",
    "busbw_gbps",
    "wrong",
    "timestamp",
}


def _json_line(doc: dict[str, Any]) -> str:
    """One line of `--json`: the object with its rows written out; strict JSON (a value that
    is not a number, NaN or inf, is written as null)."""
    rows = [_row_json(r) for r in doc["rows"]]
    return json.dumps(_finite({**doc, "rows": rows}), allow_nan=False) + "\n"


def _row_json(row: ResultRow) -> dict[str, Any]:
    out = row.model_dump(mode="json", include=_ROW_KEYS)
    if row.timestamp is None:
        out.pop("timestamp", None)
    return out


def _finite(value: Any) -> Any:
    """`value` with every NaN or infinite float replaced by None (JSON has no NaN)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def _num(value: float | int | None) -> str:
    return "" if value is None else f"{value:g}"


_HEADERS = (
    "size (B)",
    "count",
    "type",
    "redop",
    "placement",
    "time (us)",
    "algbw",
    "busbw",
    "#wrong",
)


def _print_rows(console: Console, doc: dict[str, Any]) -> None:
    """The result rows as a table under the run's title: drawn line by line (a log of 48,000
    rows prints in a second), by rich only where a cell is too wide or not ASCII."""
    run = f" (run {doc['run']})" if "run" in doc else ""
    collective = doc["collective"] or "collective not stated"
    title = printable(f"{doc['file']}{run}: {collective} -> {doc['outcome']}")
    rows = doc["rows"]
    widths = plaintable.column_widths(_HEADERS, rows, _cells)
    if widths is not None and plaintable.fits(console, widths):
        plaintable.print_table(console, title, _HEADERS, rows, _cells, widths)
        return
    table = Table(title=Text(title), title_justify="left")
    for col in _HEADERS:
        table.add_column(col, justify="right")
    for row in rows:
        table.add_row(*(Text(c) for c in _cells(row)))
    console.print(table)


def _cells(row: ResultRow) -> list[str]:
    """A result row's cells, as the table shows them."""
    return [
        str(row.size_bytes),
        str(row.count),
        printable(row.type),
        printable(row.redop),
        row.placement,
        _num(row.time_us),
        _num(row.algbw_gbps),
        _num(row.busbw_gbps),
        _num(row.wrong),
    ]


_LIBRARY_NAMES = {"nccl": "NCCL", "rccl": "RCCL", "r2ccl": "R-2CCL", "msccl": "MSCCL"}
"""How the human output writes a library family (a recipe's own name stays as it is)."""


def _facts(doc: dict[str, Any]) -> list[str]:
    """One line per thing a reader asks of a run, each said once; what the input does not
    tell is named as such, never a `?`."""
    where = "this run's files" if doc.get("run_folder") else "this file"
    how = (
        f" (from the {doc['collective_from'].replace('_', ' ')})" if doc["collective_from"] else ""
    )
    # the library the run is filed under (as import files it), else what the lines state
    name = str(doc.get("library") or doc.get("library_family") or "")
    family = _LIBRARY_NAMES.get(name, name)
    library = doc.get("library_version") or doc["nccl_library"]
    lines = [
        f"collective: {doc['collective']}{how}"
        if doc["collective"]
        else f"collective: not stated in {where}",
        f"nccl-tests: version {doc['nccl_tests_version']}"
        if doc["nccl_tests_version"]
        else f"nccl-tests: version not printed in {where} (nccl-tests before 2.17.4 prints none)",
        f"library: {family or 'NCCL'} {library}"
        if library
        else f"library: {family + ', ' if family else ''}version not printed in {where}",
    ]
    if doc.get("library_path"):
        lines.append(f"library file: {doc['library_path']} (the log says it was loaded)")
    if doc.get("mode") is not None:
        lines.append(f"R2CC_MODE: {doc['mode']} (the run's settings)")
    if doc.get("run_folder"):
        transport = doc.get("transport") or "not logged (no NCCL INFO `via` line)"
        lines.insert(0, f"read as one run: {', '.join(doc['files'])}")
        lines.append(f"transport: {transport}")
    judged = " (as the sweep recorded it)" if doc.get("outcome_recorded") else ""
    lines.append(f"outcome{judged}: {doc['outcome']}: {doc['reason']}")
    return lines


def _print_human(console: Console, doc: dict[str, Any]) -> None:
    _print_rows(console, doc)
    # the facts in one print (a print costs ~0.2 ms: a log of 6,000 runs has 60,000 lines)
    text = Text("\n".join(printable(line) for line in _facts(doc)))
    for ev in doc["evidence"]:
        line = f"line {ev['line']}" if ev.get("line") else "line not known"
        text.append("\n" + printable(f"  {line}: {ev['text']}"), style="dim")
    sources = Counter(str(e.get("source")) for e in doc["events"] if e.get("source"))
    per = ", ".join(f"{n} from {source}" for source, n in sources.items())
    text.append("\n" + printable(f"events: {len(doc['events'])}" + (f" ({per})" if per else "")))
    # an outcome recorded by an older r2bench names the average in its reason: said once
    if "avg_busbw_gbps" in doc and "avg busbw" not in str(doc["reason"]):
        text.append("\n" + printable(f"avg busbw: {doc['avg_busbw_gbps']:g} GB/s (the footer)"))
    console.print(text)


def folder_summary(run: FolderRun) -> dict[str, Any]:
    """The JSON object `r2bench parse --json` prints for a run folder: a file's keys, plus
    `run_folder`, `files` (what was read), `outcome_recorded`, `exit_code`, `transport`, each
    event's `source` file, and the folder's recovery metrics."""
    doc = _summary(run.path, run.parsed, run.outcome, run.parsed.per_iteration)
    doc.update(library=run.library, library_basis=run.library_basis, mode=run.mode)
    doc["events"] = [
        {"source": source, **e.model_dump(mode="json", exclude_defaults=True)}
        for source, e in run.events
    ]
    doc.update(
        run_folder=True,
        files=run.files,
        outcome_recorded=run.recorded,
        exit_code=run.exit_code,
        transport=run.transport,
        verification=run.verification.as_json() if run.verification else None,
    )
    from r2bench.analysis.recovery import run_recovery  # needs pandas (the report extra)

    doc["recovery"] = run_recovery(run.path).columns()
    return doc


@dataclass(frozen=True)
class _Input:
    """One thing to read: a run folder, or a file (as given) read with its `-J` twin."""

    path: Path
    folder: bool = False
    text: Path | None = None
    """The text output read (the twin of a JSON given); None: `path` alone."""
    twin: Path | None = None
    """The `-J` JSON read with the text."""

    @property
    def other(self) -> Path | None:
        """The file read with the one given, if any."""
        return self.twin if self.text in (None, self.path) else self.text


def _inputs(files: list[Path]) -> list[_Input]:
    """Each input, in order: a run folder's own files given together (stdout.txt and
    stderr.txt) are its folder, once; a text output and its `-J` twin (`json_twin`), given
    together or either alone, are one run, read once."""
    out: list[_Input] = []
    seen: set[Path] = set()
    for path in files:
        if str(path) == "-":
            out.append(_Input(path))
            continue
        folder = run_folder_of(path)
        if folder is not None:
            if folder.resolve() not in seen:
                seen.add(folder.resolve())
                out.append(_Input(folder, folder=True))
            continue
        text, twin = _pair(path)
        if text.resolve() not in seen:
            seen.update(p.resolve() for p in (text, twin) if p is not None)
            out.append(_Input(path, text=text, twin=twin))
    return out


def _pair(path: Path) -> tuple[Path, Path | None]:
    """(text, -J twin) of a file given: a JSON with a text twin is read as that text's pair."""
    if not path.is_file():
        return path, None
    if path.suffix.lower() in JSON_SUFFIXES:
        text = text_twin(path)
        return (text, path) if text is not None else (path, None)
    return path, json_twin(path)


def parse_command(files: list[Path], as_json: bool) -> int:
    """Parse nccl-tests outputs (text or -J JSON), NCCL logs and run folders: result rows,
    events, outcome.

    `-` reads stdin. A file holding several runs gives one result per run; a text output and
    its -J twin are one run (`_inputs`), read as `import` reads them. A run folder (or
    any of its own files: stdout.txt, stderr.txt, ...) is one run: its stdout and stderr read
    together with its -J results, spec and recorded outcome. With --json, print one JSON
    object per run (JSON Lines). A crashed or hung run is not an error (its outcome says
    crashed/timeout): exit 0; exit 1 if an input is not nccl-tests output at all; exit 2 if a
    file cannot be read.
    """
    console, errors = Console(width=max(Console().width, 132)), Console(stderr=True, soft_wrap=True)
    status = ExitCode.OK
    for given in _inputs(files):
        path = given.path
        try:
            docs = iter([folder_summary(read_folder(path))]) if given.folder else _file_docs(given)
        except RecursionError:
            deep = "nested too deeply to read (a JSON twin of thousands of levels)"
            errors.print(Text(printable(f"r2bench parse: cannot read {path}: {deep}")), style="red")
            status = ExitCode.USAGE
            continue
        except (OSError, InputRefused, RecordError) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            errors.print(Text(printable(f"r2bench parse: cannot read {path}: {why}")), style="red")
            status = ExitCode.USAGE
            continue
        for doc in docs:
            if doc["outcome"] == OutcomeStatus.NOT_NCCL_TESTS.value and status == ExitCode.OK:
                status = ExitCode.FAILED
            if as_json:
                sys.stdout.write(_json_line(doc))
            else:
                _print_human(console, doc)
    sys.stdout.flush()
    return status


def _file_docs(given: _Input) -> Iterator[dict[str, Any]]:
    """The JSON object of each run a file (with its -J twin) holds, made as it is printed
    (the file is read here: what cannot be read raises before the first)."""
    runs = read_path(given.text or given.path, given.twin).runs
    if given.path == given.twin and any(run.twin_refused for run in runs):
        # the file given is the -J twin, and it cannot be read: refused, named (its text
        # alone is what `parse` of the text shows)
        raise TooDeep("nested too deeply to read")
    return (_file_doc(given, run, index, len(runs)) for index, run in enumerate(runs))


def _file_doc(given: _Input, run: LogRun, index: int, runs: int) -> dict[str, Any]:
    doc = file_summary(given.path, run)
    doc["verification"] = run.verification.as_json() if run.verification else None
    if given.other is not None:
        doc["read_with"] = str(given.other)
    if runs > 1:
        doc["run"] = index + 1
    return doc


def command(
    files: Annotated[
        list[Path],
        typer.Argument(
            help="nccl-tests text or -J JSON outputs, NCCL logs, or a sweep's run folder "
            "(`-`: standard input).",
            show_default=False,
            metavar="PATH...",
        ),
    ],
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="One JSON object per run (JSON Lines): results, outcome, library, library_basis, "
            "mode (R2CC_MODE) and more (docs/records.md lists the fields).",
        ),
    ] = False,
) -> None:
    """Parse nccl-tests outputs and NCCL/R2CC logs into results.

    Result rows, typed events and the run's outcome (ok, wrong_results, crashed, timeout,
    launch_failed...) with the lines that justify it. A run folder of a sweep (or several of
    its own files) is read as one run: stdout, stderr, the -J results, its spec and the
    outcome the sweep recorded. A text output and its -J twin (the JSON it says it wrote, else
    the one of its stem), given together or either alone, are one run, as `r2bench import`
    reads them. What the input does not say (no collective named, no library version printed)
    is said in words, not guessed. Compressed (.gz, .bz2, .xz) and UTF-16 files are read;
    other archives and UTF-32 are refused by name.

    Exit codes: 0 parsed (a crashed or hung run is data, not an error), 1 an input is not
    nccl-tests output, 2 a file could not be read.

    Example: [bold]r2bench parse all_reduce_perf.log --json[/] (or a run folder:
    [bold]r2bench parse results/quickstart/RUN_ID[/])
    """
    raise typer.Exit(parse_command(files, as_json))
