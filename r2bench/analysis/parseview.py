"""What `r2bench parse` and `r2bench import` read a log or a run folder as: the one reading
both share, so they give one answer (library, R2CC_MODE, outcome, iterations) per run.

- **A log set** (`LogSet`: a text output and the `-J` JSON it names, else the JSON of its stem)
  is read by `read_log_set` into its runs (`LogRun`); `import` writes one run folder per
  `LogRun`, `parse` prints one JSON object per `LogRun`. A text output and its `-J` twin are
  one run (`json_twin`, `text_twin`): given either or both, `parse` reads the pair.
- **A run folder** is read as one run (`read_folder`): its stdout and stderr together, with
  its `-J` results, spec, recorded outcome and events, as the tables read it
  (`analysis.parsedrun`). Given one of a run folder's own files
  (`results/<sweep>/<run>/stdout.txt`), `parse` reads the whole folder.
"""

from __future__ import annotations

import bisect
import re
import shutil
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from r2bench.analysis.decision import decide
from r2bench.analysis.parsedrun import ParsedRun, parse_run, read_outputs
from r2bench.parse.events import read_events, read_log
from r2bench.parse.iterlines import logged_blocks
from r2bench.parse.library import LibraryIdentity, identify_library, nccl_version_text, r2cc_mode
from r2bench.parse.models import Event, Outcome, ParsedNcclTests, PerIteration
from r2bench.parse.nccltests.jsonfile import parse_json
from r2bench.parse.nccltests.runs import combine, twins_differ
from r2bench.parse.r2ccl_artifact import (
    ArtifactError,
    ArtifactLog,
    HarnessRun,
    HotRepairRun,
    events_between,
    library_basis,
    looks_like_artifact,
    read_artifact,
)
from r2bench.parse.verify import Verification, verifications
from r2bench.runfolder import runformat, runmodel
from r2bench.safeio import JSON_RECORD_LIMIT, InputRefused, TooDeep, check_regular, json_loads
from r2bench.textinput import TextFile, TextStats, open_text, read_text_capped

RUN_FILES = (
    runformat.SPEC,
    runformat.PROVENANCE,
    runformat.STDOUT,
    runformat.STDERR,
    runformat.STDOUT_TIMES,
    runformat.STDERR_TIMES,
    runformat.RESULT_JSON,
    runformat.EVENTS,
    runformat.FAULTS,
    runformat.OUTCOME,
    runformat.COMPLETE,
)
"""The files r2bench writes in a run folder: given one of them, `parse` reads the folder."""


def run_folder_of(path: Path) -> Path | None:
    """The run folder `path` is, or holds as one of its own files (`RUN_FILES`); None for
    anything else (a log of its own, a folder without spec.json)."""
    if path.is_dir():
        return path if (path / runformat.SPEC).is_file() else None
    if path.name in RUN_FILES and (path.parent / runformat.SPEC).is_file():
        return path.parent
    return None


@dataclass(frozen=True)
class FolderRun:
    """What `parse` says of a run folder."""

    path: Path
    files: list[str]
    """The folder's files read, in `RUN_FILES` order."""
    parsed: ParsedNcclTests
    events: list[tuple[str, Event]]
    """(source file, event): both logs' events, or events.jsonl's when the sweep kept them."""
    outcome: Outcome
    recorded: bool
    """True: the outcome is the one the sweep recorded (outcome.json); False: judged here."""
    verification: Verification | None = None
    transport: str | None = None
    exit_code: int | None = None
    warnings: list[str] = field(default_factory=list)
    library: str | None = None
    """The spec's library recipe; None when the import that wrote it only guessed it."""
    library_basis: str | None = None
    mode: str | None = None
    """The spec's R2CC_MODE."""


def read_folder(path: Path) -> FolderRun:
    """Read a run folder as one run. Raises `runmodel.RecordError` naming the file and field
    when its record cannot be read (a bad spec.json, a folder from a newer r2bench)."""
    record = runmodel.load_run(path)
    if record.problems:
        raise runmodel.RecordError("; ".join(record.problems))
    files = [name for name in RUN_FILES if record.file(name) is not None]
    outputs = read_outputs(record)
    run = parse_run(record, outputs)
    parsed = _with_spec_collective(run, record.spec.collective)
    if run.logged:  # the sizes only the workload's `#iter` lines hold (parse.iterlines)
        blocks = [*parsed.per_iteration, *(block.times for block in run.logged)]
        parsed = parsed.model_copy(update={"per_iteration": blocks})
    outcome, recorded = run.outcome, run.outcome is not None and record.end is not None
    if outcome is None:  # no outcome.json (a run that did not finish): judged from the logs
        outcome = decide(
            parsed,
            run.events,
            env=record.spec.env,
            verification=run.verification,
            evidence=run.evidence,
        )
    return FolderRun(
        path=path,
        files=files,
        parsed=parsed,
        events=run.events,
        outcome=outcome,
        recorded=recorded,
        verification=run.verification,
        transport=run.transport,
        exit_code=record.end.exit_code if record.end else None,
        warnings=list(parsed.warnings),
        **_folder_library(record),
    )


def _folder_library(record: runmodel.RunRecord) -> dict[str, Any]:
    """The library and mode the run's spec names (as the tables show them): an imported run's
    library guessed from R2CC_* variables alone is no library (`LibraryIdentity.shown`)."""
    spec = record.spec
    basis = record.provenance.get("library_basis") if record.provenance else None
    recipe = spec.library.recipe if spec.library else None
    if isinstance(basis, str):
        recipe = LibraryIdentity(recipe or "", None, basis).shown
    return {"library": recipe, "library_basis": basis, "mode": r2cc_mode(spec.env)}


def _with_spec_collective(run: ParsedRun, collective: str | None) -> ParsedNcclTests:
    """The results, with the collective the run's spec names where the output names none
    (the emulator's program is `ring_allreduce`, no nccl-tests test name)."""
    parsed = run.parsed
    if parsed.collective or not collective:
        return parsed
    return parsed.model_copy(update={"collective": collective, "collective_from": "run_spec"})


# --------------------------------------------------------------------------- log sets

TEXT_SUFFIXES = (".txt", ".log", ".out", ".err")
JSON_SUFFIXES = (".json",)
_JSON_NAMES = (".json", ".json.gz", ".json.bz2", ".json.xz")
_HEADER_BYTES = 65536
_SNIFF_BYTES = 4096
_WRITING_JSON_RE = re.compile(r"^# Writing JSON output to (.+)$", re.MULTILINE)
_SPEC_ENV_RE = re.compile(r"^(NCCL_|R2CC_)")


@dataclass(frozen=True)
class LogSet:
    """The files of one run (or of several runs one after another): a text output and/or the
    `-J` JSON it wrote."""

    stem: str
    text: Path | None = None
    json: Path | None = None

    @property
    def sources(self) -> list[Path]:
        """The files, text first."""
        return [p for p in (self.text, self.json) if p is not None]


def json_named_in(text: Path) -> str | None:
    """The `-J` file a text output says it wrote (`# Writing JSON output to <file>`), as
    printed (a path on the machine that ran it)."""
    try:
        m = _WRITING_JSON_RE.search(read_head(text))
    except InputRefused:  # a form not read (UTF-32, a zip): refused when the file is read
        return None
    return m.group(1).strip() if m else None


def read_head(path: Path, size: int = _HEADER_BYTES) -> str:
    """The first `size` bytes of a text file as `open_text` reads it (unpacked, decoded)."""
    with open_text(path) as handle:
        return handle.read(size).decode("utf-8", errors="replace")


COMPRESSED_SUFFIXES = (".gz", ".bz2", ".xz")


def log_suffix(path: Path) -> str:
    """A log's own suffix, that of a compressed one's inner name (`a.txt.gz` -> `.txt`),
    lower case."""
    name = Path(path.name)
    if name.suffix.lower() in COMPRESSED_SUFFIXES:
        name = Path(name.stem)
    return name.suffix.lower()


def log_stem(path: Path) -> Path:
    """`path` without its log suffix and compressed suffix (`d/a.socket.txt.gz` ->
    `d/a.socket`)."""
    if path.suffix.lower() in COMPRESSED_SUFFIXES:
        path = path.with_suffix("")
    return path.with_suffix("") if path.suffix.lower() in (*TEXT_SUFFIXES, *JSON_SUFFIXES) else path


def json_twin(text: Path) -> Path | None:
    """The `-J` JSON beside a text output that is the same run: the file it names (by name, in
    its own folder), else the JSON of its stem when it names none."""
    named = json_named_in(text)
    if named:
        twin = text.parent / Path(named).name
        return twin if twin != text and twin.is_file() else None
    stem = log_stem(text)
    for suffix in _JSON_NAMES:
        twin = stem.with_name(stem.name + suffix)
        if twin != text and twin.is_file():
            return twin
    return None


def text_twin(json_path: Path) -> Path | None:
    """The text output beside a `-J` JSON whose twin it is (`json_twin`), or None."""
    stem = log_stem(json_path)
    for suffix in TEXT_SUFFIXES:
        for packed in ("", *COMPRESSED_SUFFIXES):
            text = stem.with_name(stem.name + suffix + packed)
            if text.is_file() and json_twin(text) == json_path:
                return text
    return None


def json_env(doc: dict[str, Any]) -> dict[str, str]:
    """The environment a -J file lists (`env`: `NAME=value` strings)."""
    env = {}
    for item in doc.get("env") or []:
        if isinstance(item, str) and "=" in item:
            name, value = item.split("=", 1)
            env[name] = value
    return env


def json_doc(path: Path | None) -> dict[str, Any]:
    """A -J file as a JSON object; {} when there is none or it cannot be read as one."""
    if path is None:
        return {}
    try:
        doc = json_loads(read_text_capped(path, JSON_RECORD_LIMIT, "nccl-tests -J JSON"))
    except (OSError, ValueError, RecursionError):  # InputRefused and TooDeep are ValueErrors
        return {}
    return doc if isinstance(doc, dict) else {}


def settings_env(env: dict[str, str]) -> dict[str, str]:
    """The NCCL_* and R2CC_* variables of an environment: the settings a run is keyed by."""
    return {k: v for k, v in env.items() if _SPEC_ENV_RE.match(k)}


@dataclass(frozen=True)
class LogRun:
    """One run of a log set, as `parse` prints it and `import` writes it."""

    parsed: ParsedNcclTests
    """The results as read (the text's, with its -J twin's per-iteration times)."""
    events: list[Event]
    outcome: Outcome
    library: LibraryIdentity
    env: dict[str, str]
    """The NCCL_* / R2CC_* settings the input states (the -J env, the artifact harness's)."""
    lines: tuple[int, int] | None = None
    """The run's lines of the text when the file holds several runs; None: all of it."""
    json: Path | None = None
    """The -J twin read with it."""
    verification: Verification | None = None
    logged: tuple[PerIteration, ...] = ()
    """Iterations only the workload's `#iter` lines hold (`parse.iterlines`)."""
    artifact: HarnessRun | HotRepairRun | None = None
    """The artifact run it is, for an R-2CCL artifact log."""
    alone: bool = False
    """A -J file of the text's stem that is another run (`twins_differ`), read alone."""
    twin_refused: str | None = None
    """Why the text's -J twin was not read (nested too deeply): the text is the run."""

    @property
    def mode(self) -> str | None:
        """The run's R2CC_MODE, as its settings state it."""
        return r2cc_mode(self.env)

    @property
    def per_iteration(self) -> list[PerIteration]:
        """Every timed iteration's block: the results', then the `#iter` lines' (as the tables
        count them)."""
        return [*self.parsed.per_iteration, *self.logged]


@dataclass(frozen=True)
class LogSetRead:
    """A log set's runs, and for an artifact log what its harness printed besides."""

    runs: list[LogRun]
    artifact: ArtifactLog | None = None


def _is_json(name: str, data: bytes) -> bool:
    return name.lower().endswith(".json") or data[:_SNIFF_BYTES].lstrip()[:1] == b"{"


def _read_json_file(path: Path) -> ParsedNcclTests:
    """A -J file, size-capped (`InputRefused` over it)."""
    return parse_json(read_text_capped(path, JSON_RECORD_LIMIT, "nccl-tests -J JSON"))


def read_log_set(logs: LogSet, source: str | None = None) -> LogSetRead:
    """A log set's runs. `source` names the file in events and evidence (default: the text's
    name). A text holding several runs is split where a new run shows; a part holding no
    result and no event (a banner at its end) is no run. Raises OSError, or `InputRefused`
    for a device, fifo or folder, or a JSON file over its size cap."""
    if logs.text is None:
        assert logs.json is not None, "a log set holds a file"
        return LogSetRead([_json_run(logs.json, source or logs.json.name)])
    check_regular(logs.text, "log")
    name = source or logs.text.name
    with open_text(logs.text) as handle:
        head = handle.read(_SNIFF_BYTES)
    if _is_json(logs.text.name, head):
        return LogSetRead([_json_run(logs.text, name)])
    if logs.json is None and looks_like_artifact(logs.text):
        return _artifact_runs(logs.text, name)
    return LogSetRead(_text_runs(logs, name))


def _json_run(path: Path, name: str) -> LogRun:
    check_regular(path, "log")
    parsed = _read_json_file(path)
    env = settings_env(json_env(json_doc(path)))
    outcome = decide(parsed, [], env=env, source=name)
    return LogRun(parsed, [], outcome, identify_library(parsed, env, []), env, json=path)


def _text_runs(logs: LogSet, name: str) -> list[LogRun]:
    assert logs.text is not None
    with open_text(logs.text) as handle:
        runs, all_events = read_log(handle, file_name=logs.text.name)
        runs = _with_form_warnings(runs, handle.stats)
    several = len(runs) > 1
    ranges = [(p.first_line or 1, p.last_line or 1 << 62) for p in runs]
    json_lines = _writing_json_lines(logs.text) if several and logs.json else []
    # (an event held for its next lines is passed on after them: sorted once for bisection)
    by_line = sorted(all_events, key=lambda e: e.line) if several else all_events
    with open_text(logs.text) as handle:
        checks = verifications(handle, ranges)
    out = []
    apart: list[Path] = []
    for parsed, (first, last), check in zip(runs, ranges, checks, strict=True):
        events = _events_within(by_line, first, last) if several else all_events
        if several and not parsed.is_nccl_tests and not events and check is None:
            continue  # a banner or stray lines between runs: no run
        twin = logs.json if not several or _names_json(json_lines, first, last) else None
        pairing = _paired(parsed, twin)
        parsed, twin = pairing.parsed, pairing.twin
        apart += [pairing.apart] if pairing.apart is not None else []
        doc = json_doc(twin)
        env = settings_env(json_env(doc))
        outcome = decide(
            parsed, [(name, e) for e in events], env=env, verification=check, source=name
        )
        # a log file has no launch node: its clock offset is 0
        logged = logged_blocks(check, _blocks_of(parsed), timed_iterations(parsed), 0.0)
        out.append(
            LogRun(
                parsed,
                events,
                outcome,
                identify_library(parsed, env, events),
                env,
                lines=(first, last) if several else None,
                json=twin,
                verification=check,
                logged=tuple(block.times for block in logged),
                twin_refused=pairing.refused,
            )
        )
    out += [replace(_json_run(path, path.name), alone=True) for path in apart]
    return out


def _events_within(events: list[Event], first: int, last: int) -> list[Event]:
    """The events of lines `first`..`last` (`events` in line order): found by bisection, so
    the runs of a file of thousands cost linear time, not runs x events."""
    low = bisect.bisect_left(events, first, key=lambda e: e.line)
    high = bisect.bisect_right(events, last, lo=low, key=lambda e: e.line)
    return events[low:high]


@dataclass(frozen=True)
class _Pairing:
    """A text run and its -J twin, once the twin was checked (`_paired`)."""

    parsed: ParsedNcclTests
    """The text's results, combined with the twin's when they are one run."""
    twin: Path | None = None
    """The twin combined with the text."""
    apart: Path | None = None
    """A twin that is another run: read apart."""
    refused: str | None = None
    """Why the twin could not be read (nested too deeply): the text is the run."""


def _paired(parsed: ParsedNcclTests, twin: Path | None) -> _Pairing:
    """A text's results and its -J twin, checked before they are combined (`twins_differ`):
    a twin that cannot be read or is another run is named in a warning and kept apart."""
    if twin is None:
        return _Pairing(parsed)
    try:
        results = _read_json_file(twin)
    except TooDeep as deep:
        why = f"{twin.name}: the -J file of this output is {deep}; its results not combined"
        return _Pairing(_warned(parsed, why), refused=why)
    differ = twins_differ(parsed, results)
    if differ is None:
        return _Pairing(combine(parsed, results), twin=twin)
    why = f"{twin.name}: the -J file of the same stem is another run ({differ}): read apart"
    return _Pairing(_warned(parsed, why), apart=twin)


def _warned(parsed: ParsedNcclTests, warning: str) -> ParsedNcclTests:
    return parsed.model_copy(update={"warnings": [*parsed.warnings, warning]})


def _with_form_warnings(runs: list[ParsedNcclTests], stats: TextStats) -> list[ParsedNcclTests]:
    """The runs, the one holding the first cut line warned of the lines cut (`open_text`)."""
    warnings = stats.warnings()
    if not warnings:
        return runs
    out = list(runs)
    index = len(out) - 1 if stats.broken else 0  # broken off: at the end of the last run
    for at, run in enumerate(out):
        if stats.first_cut is not None and (run.first_line or 1) <= stats.first_cut <= (
            run.last_line or stats.first_cut
        ):
            index = at
    out[index] = out[index].model_copy(update={"warnings": [*out[index].warnings, *warnings]})
    return out


def timed_iterations(parsed: ParsedNcclTests) -> int:
    """The timed iterations per size and placement a log's run ran, as an imported run's spec
    states them (`NcclTestsOptions.iterations`): the `#iter` lines are split by it here as the
    tables split them."""
    return parsed.iters or 1


def _blocks_of(parsed: ParsedNcclTests) -> list[tuple[int, str, int]]:
    return [(p.size_bytes, p.placement, p.cycle) for p in parsed.per_iteration]


def run_lines(path: Path, first: int, last: int) -> Iterator[bytes]:
    """Lines `first`..`last` (1-based) of a file, streamed (as `open_text` reads it). For the
    runs of one file in order, `LineCursor` reads the file once."""
    return LineCursor(path).lines(first, last)


class LineCursor:
    """The lines of a file by range, in one forward pass while the ranges come in order (a
    file of 6,000 runs is read once, not once per run); an earlier range reads it again."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._handle: TextFile | None = None
        self._next = 1  # the number of the next line the handle gives
        self._held: bytes | None = None  # a line read past the end of the last range

    def lines(self, first: int, last: int) -> Iterator[bytes]:
        """Lines `first`..`last` (1-based, inclusive)."""
        if self._handle is None or first < self._next - (self._held is not None):
            self.close()
            self._handle, self._next, self._held = open_text(self.path), 1, None
        handle = self._handle
        while True:
            if self._held is not None:
                line, self._held = self._held, None
            else:
                line = handle.readline()
                if not line:
                    return
                self._next += 1
            number = self._next - 1
            if number > last:
                self._held = line
                return
            if number >= first:
                yield line

    def close(self) -> None:
        """Close the file (a later range opens it again)."""
        if self._handle is not None:
            self._handle.close()
            self._handle = None


def _writing_json_lines(path: Path) -> list[int]:
    """The numbers of a text's `# Writing JSON output to` lines, in one pass."""
    with open_text(path) as handle:
        return [
            number
            for number, line in enumerate(handle, start=1)
            if b"# Writing JSON" in line
            and _WRITING_JSON_RE.match(line.decode("utf-8", "replace").strip())
        ]


def _names_json(json_lines: list[int], first: int, last: int) -> bool:
    """Whether lines `first`..`last` hold a `# Writing JSON output to` line."""
    at = bisect.bisect_left(json_lines, first)
    return at < len(json_lines) and json_lines[at] <= last


def _artifact_runs(path: Path, name: str) -> LogSetRead:
    """An R-2CCL artifact log's runs: R-2CCL by its harness, with the settings it states."""
    log = read_artifact(path, str(path))
    with open_text(path) as handle:
        all_events = read_events(handle)
    out = []
    for run in log.runs:
        events = events_between(all_events, run.first_line, run.last_line)
        basis = library_basis(log, run, events)
        if isinstance(run, HotRepairRun):
            parsed, env = run.as_parsed(), {}
            outcome = run.outcome(name)
            version = run.library_version
        else:
            parsed, env = run.parsed, settings_env(run.settings)
            outcome = decide(parsed, [(name, e) for e in events], env=env, source=name)
            version = parsed.library_version or nccl_version_text(parsed.nccl_library)
        library = LibraryIdentity("r2ccl", version, basis)
        lines = (run.first_line, run.last_line)
        out.append(LogRun(parsed, events, outcome, library, env, lines=lines, artifact=run))
    return LogSetRead(out, log)


def parse_file(path: Path) -> list[tuple[ParsedNcclTests, list[Event], Outcome]]:
    """Parse one nccl-tests text/JSON output or NCCL log alone (`-` reads stdin; its `-J` twin
    is not looked for: `read_log_set` reads the pair); one entry per run. A file is streamed,
    never read whole, so logs of gigabytes parse in bounded memory. Raises OSError, or
    InputRefused for a device, fifo or folder, or a JSON file over its size cap; an artifact
    log's refused run raises its located ArtifactError."""
    return [(r.parsed, r.events, r.outcome) for r in read_path(path).runs]


def read_path(path: Path, twin: Path | None = None) -> LogSetRead:
    """`read_log_set` of one file (with its `-J` twin when given); `-` reads stdin, spooled
    to a file in chunks (parsed like any file, never held whole). An artifact log's refused
    run raises its located ArtifactError."""
    if str(path) == "-":
        with tempfile.TemporaryDirectory(prefix="r2b-parse-") as tmp:
            spooled = Path(tmp) / "stdin"
            with spooled.open("wb") as out:
                shutil.copyfileobj(sys.stdin.buffer, out, 1 << 20)
            return read_path(spooled)
    read = read_log_set(LogSet(path.stem, path, twin))
    if read.artifact is not None and read.artifact.errors:
        first = read.artifact.errors[0]
        raise ArtifactError(first.path, first.line, first.what, first.fix)
    return read
