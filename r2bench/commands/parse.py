"""`r2bench parse`: nccl-tests outputs, NCCL/R2CC logs or a sweep's run folder, read into
result rows, events and an outcome (a table, or JSON Lines).

`parse_command` returns the process exit code: 0 done, 1 an input that is not nccl-tests
output, 2 a path that cannot be read. `parse_file` reads one file (benchmarks/bench_logs.py
times it).
"""

from __future__ import annotations

import json
import math
import shutil
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from r2bench.analysis.decision import decide
from r2bench.analysis.parseview import FolderRun, read_folder, run_folder_of
from r2bench.errors import ExitCode
from r2bench.parse.events import read_log
from r2bench.parse.library import nccl_version_text
from r2bench.parse.models import Event, Outcome, OutcomeStatus, ParsedNcclTests
from r2bench.parse.nccltests.jsonfile import parse_json
from r2bench.parse.verify import Verification, verifications, with_verification
from r2bench.runfolder.runmodel import RecordError
from r2bench.safeio import JSON_RECORD_LIMIT, InputRefused, check_regular, read_text_bounded
from r2bench.textsafe import printable

_SNIFF_BYTES = 4096


def _is_json(name: str, data: bytes) -> bool:
    return name.lower().endswith(".json") or data[:_SNIFF_BYTES].lstrip()[:1] == b"{"


def parse_file(path: Path) -> list[tuple[ParsedNcclTests, list[Event], Outcome]]:
    """Parse one nccl-tests text/JSON output or NCCL log (`-` reads stdin); one entry per run
    (a text file holding several runs is split where a new run shows: a header, rows after a
    footer, a device list, a command line, another file's grep prefix, another busbw/algbw
    factor). A file is streamed once, in chunks, never read whole, so logs of gigabytes parse
    in bounded memory. Raises OSError, or InputRefused for a device,
    fifo or folder, or a JSON file over its size cap."""
    if str(path) == "-":
        # spooled to a file in chunks: stdin is parsed like any file, never held whole
        with tempfile.TemporaryDirectory(prefix="r2b-parse-") as tmp:
            spooled = Path(tmp) / "stdin"
            with spooled.open("wb") as out:
                shutil.copyfileobj(sys.stdin.buffer, out, 1 << 20)
            return parse_file(spooled)
    check_regular(path, "log")
    with path.open("rb") as handle:
        head = handle.read(_SNIFF_BYTES)
    if _is_json(path.name, head):
        data = read_text_bounded(path, JSON_RECORD_LIMIT, "nccl-tests -J JSON").encode()
        parsed = parse_json(data)
        return [(parsed, [], decide(parsed, [], source=path.name))]
    from r2bench.analysis.parseview import parse_artifact_file  # R-2CCL's own harness logs

    return parse_artifact_file(path) or _parse_runs(path.name, head, lambda: path.open("rb"))


def _parse_runs(
    name: str, head: bytes, reopen: Callable[[], Iterable[bytes]]
) -> list[tuple[ParsedNcclTests, list[Event], Outcome]]:
    if _is_json(name, head):
        parsed = parse_json(b"".join(reopen()))
        return [(parsed, [], decide(parsed, [], source=name))]
    source = reopen()
    try:
        runs, all_events = read_log(source, file_name=name)
    finally:
        _close(source)
    out = []
    for parsed in runs:
        first, last = parsed.first_line or 1, parsed.last_line or 1 << 62
        events = [e for e in all_events if first <= e.line <= last] if len(runs) > 1 else all_events
        out.append((parsed, events, decide(parsed, [(name, e) for e in events], source=name)))
    return out


def _close(source: Iterable[bytes]) -> None:
    close = getattr(source, "close", None)
    if close is not None:
        close()


def file_summary(
    path: Path,
    parsed: ParsedNcclTests,
    events: list[Event],
    outcome: Outcome,
    recovery: bool = True,
) -> dict[str, Any]:
    """The JSON object `r2bench parse --json` prints for one file (with `recovery`, the
    metrics of the run folder holding it)."""
    rows = []
    for r in parsed.rows:
        row = r.model_dump(mode="json", include=_ROW_KEYS)
        if r.timestamp is None:
            row.pop("timestamp", None)
        rows.append(row)
    doc: dict[str, Any] = {
        "file": str(path),
        "collective": parsed.collective,
        "collective_from": parsed.collective_from,
        "nccl_tests_version": parsed.nccl_tests_version,
        "nccl_library": nccl_version_text(parsed.nccl_library),
        "nccl_headers": nccl_version_text(parsed.nccl_headers),
        "library_family": parsed.library_family,
        "library_version": parsed.library_version,
        "outcome": outcome.status.value,
        "reason": outcome.reason,
        "failed_rank": outcome.failed_rank,
        "failed_host": outcome.failed_host,
        "evidence": [e.model_dump(mode="json") for e in outcome.evidence],
        "rows": rows,
        "per_iteration": [p.model_dump(mode="json") for p in parsed.per_iteration],
        "events": [e.model_dump(mode="json", exclude_defaults=True) for e in events],
        "warnings": parsed.warnings,
    }
    if parsed.avg_busbw_gbps is not None:
        doc["avg_busbw_gbps"] = parsed.avg_busbw_gbps
    if recovery:
        from r2bench.analysis.recovery import recovery_doc  # needs pandas (the report extra)

        doc["recovery"] = recovery_doc(path)  # the run folder's metrics (docs/recovery.md)
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


def _rich_table(doc: dict[str, Any]) -> Table:
    run = f" (run {doc['run']})" if "run" in doc else ""
    collective = doc["collective"] or "collective not stated"
    title = Text(printable(f"{doc['file']}{run}: {collective} -> {doc['outcome']}"))
    table = Table(title=title, title_justify="left")
    for col in (
        "size (B)",
        "count",
        "type",
        "redop",
        "placement",
        "time (us)",
        "algbw",
        "busbw",
        "#wrong",
    ):
        table.add_column(col, justify="right")
    for r in doc["rows"]:
        table.add_row(
            *(
                Text(printable(str(r[k])))
                for k in ("size_bytes", "count", "type", "redop", "placement")
            ),
            *(
                Text(printable(_num(r[k])))
                for k in ("time_us", "algbw_gbps", "busbw_gbps", "wrong")
            ),
        )
    return table


def _facts(doc: dict[str, Any]) -> list[str]:
    """One line per thing a reader asks of a run, each said once; what the input does not
    tell is named as such, never a `?`."""
    where = "this run's files" if doc.get("run_folder") else "this file"
    how = (
        f" (from the {doc['collective_from'].replace('_', ' ')})" if doc["collective_from"] else ""
    )
    family = str(doc.get("library_family") or "").upper().replace("R2CCL", "R-2CCL")
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
    if doc.get("run_folder"):
        transport = doc.get("transport") or "not logged (no NCCL INFO `via` line)"
        lines.insert(0, f"read as one run: {', '.join(doc['files'])}")
        lines.append(f"transport: {transport}")
    judged = " (as the sweep recorded it)" if doc.get("outcome_recorded") else ""
    lines.append(f"outcome{judged}: {doc['outcome']}: {doc['reason']}")
    return lines


def _print_human(console: Console, doc: dict[str, Any]) -> None:
    console.print(_rich_table(doc))
    facts = _facts(doc)
    for line in facts[:-1]:
        console.print(Text(printable(line)))
    console.print(Text(printable(facts[-1])))
    for ev in doc["evidence"]:
        line = f"line {ev['line']}" if ev.get("line") else "line not known"
        console.print(Text(printable(f"  {line}: {ev['text']}"), style="dim"))
    sources = Counter(str(e.get("source")) for e in doc["events"] if e.get("source"))
    per = ", ".join(f"{n} from {source}" for source, n in sources.items())
    console.print(Text(printable(f"events: {len(doc['events'])}" + (f" ({per})" if per else ""))))
    # an outcome recorded by an older r2bench names the average in its reason: said once
    if "avg_busbw_gbps" in doc and "avg busbw" not in str(doc["reason"]):
        console.print(Text(printable(f"avg busbw: {doc['avg_busbw_gbps']:g} GB/s (the footer)")))


def folder_summary(run: FolderRun) -> dict[str, Any]:
    """The JSON object `r2bench parse --json` prints for a run folder: a file's keys, plus
    `run_folder`, `files` (what was read), `outcome_recorded`, `exit_code`, `transport`, each
    event's `source` file, and the folder's recovery metrics."""
    doc = file_summary(run.path, run.parsed, [], run.outcome, recovery=False)
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


def _inputs(files: list[Path]) -> list[tuple[Path, bool]]:
    """(path, is a run folder) of each input, in order: a run folder's own files given
    together (stdout.txt and stderr.txt) are its folder, once."""
    out: list[tuple[Path, bool]] = []
    seen: set[Path] = set()
    for path in files:
        folder = run_folder_of(path) if str(path) != "-" else None
        if folder is None:
            out.append((path, False))
        elif folder.resolve() not in seen:
            seen.add(folder.resolve())
            out.append((folder, True))
    return out


def parse_command(files: list[Path], as_json: bool) -> int:
    """Parse nccl-tests outputs (text or -J JSON), NCCL logs and run folders: result rows,
    events, outcome.

    `-` reads stdin. A file holding several runs gives one result per run. A run folder (or
    any of its own files: stdout.txt, stderr.txt, ...) is one run: its stdout and stderr read
    together with its -J results, spec and recorded outcome. With --json, print one JSON
    object per run (JSON Lines). A crashed or hung run is not an error (its outcome says
    crashed/timeout): exit 0; exit 1 if an input is not nccl-tests output at all; exit 2 if a
    file cannot be read.
    """
    console, errors = Console(width=max(Console().width, 132)), Console(stderr=True, soft_wrap=True)
    status = ExitCode.OK
    for path, is_folder in _inputs(files):
        try:
            docs = [folder_summary(read_folder(path))] if is_folder else _file_docs(path)
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
                # Strict JSON: a value that is not a number (NaN, inf) is written as null.
                sys.stdout.write(json.dumps(_finite(doc), allow_nan=False) + "\n")
            else:
                _print_human(console, doc)
    sys.stdout.flush()
    return status


def _file_docs(path: Path) -> list[dict[str, Any]]:
    """The JSON object of each run a file holds."""
    runs = parse_file(path)
    checks = _verifications(path, [parsed for parsed, _, _ in runs])
    docs = []
    for index, (run, check) in enumerate(zip(runs, checks, strict=True)):
        outcome = with_verification(run[2], check, path.name) or run[2]
        doc = file_summary(path, run[0], run[1], outcome)
        doc["verification"] = check.as_json() if check else None
        if len(runs) > 1:
            doc["run"] = index + 1
        docs.append(doc)
    return docs


def _verifications(path: Path, runs: list[ParsedNcclTests]) -> list[Verification | None]:
    """A verifying workload's account of each run of a text file (docs/verify.md); none for
    stdin (read once) and JSON files."""
    if str(path) == "-" or path.suffix.lower() == ".json":
        return [None] * len(runs)
    ranges = [(p.first_line or 1, p.last_line or 1 << 62) for p in runs]
    with path.open("rb") as handle:
        return verifications(handle, ranges)


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
        bool, typer.Option("--json", help="One JSON object per file (JSON Lines).")
    ] = False,
) -> None:
    """Parse nccl-tests outputs and NCCL/R2CC logs into results.

    Result rows, typed events and the run's outcome (ok, wrong_results, crashed, timeout,
    launch_failed...) with the lines that justify it. A run folder of a sweep (or several of
    its own files) is read as one run: stdout, stderr, the -J results, its spec and the
    outcome the sweep recorded. What the input does not say (no collective named, no library
    version printed) is said in words, not guessed.

    Exit codes: 0 parsed (a crashed or hung run is data, not an error), 1 an input is not
    nccl-tests output, 2 a file could not be read.

    Example: [bold]r2bench parse all_reduce_perf.log --json[/] (or a run folder:
    [bold]r2bench parse results/quickstart/RUN_ID[/])
    """
    raise typer.Exit(parse_command(files, as_json))
