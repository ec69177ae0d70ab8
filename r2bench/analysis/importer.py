"""Import a folder of existing nccl-tests outputs into a results sweep.

Each run of each log becomes one run folder: the runs `r2bench parse` shows of it, read by the
same code (`analysis.parseview.read_log_set`), so both give one library, R2CC_MODE, outcome
and iteration count per run. A text file holding several runs is split at each new nccl-tests
header. A text output and the `-J` JSON it names (`# Writing JSON output to <file>`) are one
run; without that line, files sharing a stem are. A run's identity includes its source
(relative path and content hash), so two different files never collide and importing the same
file again is a no-op. The library is what the output proves (R2CC log lines, the NCCL
version; `parse.library.identify_library`); a guess says so (`Provenance.library_basis`). The
RunSpec is reconstructed from what the output says (collective,
sizes, iterations, devices and hosts, NCCL_* / R2CC_* variables of the JSON's environment);
the provenance says `imported from <path>`. Files that hold no nccl-tests output and no log
event are skipped with a reason. Importing the same folder again skips runs already complete.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from r2bench.analysis.parseview import (
    JSON_SUFFIXES,
    TEXT_SUFFIXES,
    LineCursor,
    LogRun,
    LogSet,
    json_doc,
    json_env,
    json_named_in,
    log_stem,
    log_suffix,
    read_head,
    read_log_set,
    settings_env,
    timed_iterations,
)
from r2bench.config.experiment import NcclTestsOptions
from r2bench.errors import WriteFailed
from r2bench.parse.library import LibraryIdentity, identify_library, nccl_version_text
from r2bench.parse.models import Event, Outcome, ParsedNcclTests
from r2bench.parse.nccltests.collective import collective_from_file_name
from r2bench.parse.numbers import shown
from r2bench.parse.r2ccl_artifact import (
    ArtifactLog,
    HarnessRun,
    HotRepairRun,
    declared_failure,
    hot_repair_scenario,
    looks_like_artifact,
)
from r2bench.plan.runspec import ComponentRef, RunSpec
from r2bench.runfolder import runformat, runmodel
from r2bench.runfolder import store as st
from r2bench.runfolder.provenance import Provenance, redact_env
from r2bench.safeio import JSON_RECORD_LIMIT, utf8_text
from r2bench.textinput import open_text

IMPORTED_TESTBED = "imported"
_HEADER_RE = re.compile(r"minBytes (\d+) maxBytes (\d+) step: (\d+)\((factor|bytes)\)")
_HEADER_BYTES = 65536


@dataclass
class ImportReport:
    """What an import did."""

    sweep_dir: Path
    imported: list[tuple[str, str]] = field(default_factory=list)  # (run id, source)
    already: list[tuple[str, str]] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (source, reason)
    scenarios: dict[str, str] = field(default_factory=dict)  # source -> scenario of its name


def _input_files(directory: Path) -> list[Path]:
    """Files under `directory`, leaving out r2bench's own results (run folders, which hold a
    spec.json, and the tables beside them): importing a sweep folder, or a folder that holds
    the results of an earlier import, must not import them again."""
    out: list[Path] = []
    for root, dirs, files in os.walk(directory):
        here = Path(root)
        if runformat.SPEC in files and here != directory:
            dirs[:] = []
            continue
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != runformat.TABLES_DIR)
        out += [here / f for f in files if not f.startswith(".")]
    return sorted(out)


def find_logs(directory: Path) -> list[LogSet]:
    """Text and JSON files under `directory` (recursively): a text output with the JSON it
    says it wrote (`# Writing JSON output to`), else with the JSON of the same stem."""
    texts: list[Path] = []
    jsons: dict[str, Path] = {}
    for path in _input_files(directory):
        if not path.is_file():
            continue
        suffix = log_suffix(path)
        if suffix in JSON_SUFFIXES:
            jsons[str(path.relative_to(directory))] = path
        elif suffix in TEXT_SUFFIXES:
            texts.append(path)
    by_name: dict[str, list[str]] = {}
    by_stem: dict[str, str] = {}
    for rel in jsons:
        by_name.setdefault(Path(rel).name, []).append(rel)
        by_stem.setdefault(str(log_stem(Path(rel))), rel)
    sets = []
    for text in texts:
        text_rel = text.relative_to(directory)
        named = json_named_in(text)
        twin = _pick_named(named, text_rel, by_name) if named else None
        if twin is None and not named:
            stem_twin = by_stem.get(str(log_stem(text_rel)))
            twin = stem_twin if stem_twin in jsons else None
        stem = str(log_stem(text_rel))
        sets.append(LogSet(stem, text, jsons.pop(twin) if twin else None))
    sets += [LogSet(str(log_stem(Path(rel))), None, path) for rel, path in jsons.items()]
    return sorted(sets, key=lambda s: s.stem)


ARCHIVE_SUFFIXES = {".zst": "zstd", ".zip": "zip", ".7z": "7z", ".lz4": "lz4", ".tar": "tar",
                    ".tgz": "tar"}  # fmt: skip
"""Packed files that may hold logs but that import does not open: named, never skipped
silently."""


def packed_files(directory: Path) -> list[tuple[Path, str]]:
    """(file, why) for each archive under `directory` that import does not open itself."""
    out = []
    for path in _input_files(directory):
        form = ARCHIVE_SUFFIXES.get(path.suffix.lower())
        if form is not None and path.is_file():
            out.append((path, f"a {form} archive: not read (unpack it, then import the folder)"))
    return out


def _pick_named(named: str, text_rel: Path, by_name: dict[str, list[str]]) -> str | None:
    """The JSON file a text output names (its path was on the machine that ran it: match by
    file name, preferring the one in the text's own folder)."""
    candidates = by_name.get(Path(named).name, [])
    same_dir = [c for c in candidates if Path(c).parent == text_rel.parent]
    pool = same_dir or candidates
    if not pool:
        return None
    by_name[Path(named).name].remove(pool[0])
    return pool[0]


def _too_large(path: Path) -> bool:
    """Whether a -J twin is larger than any r2bench reads (checked before parsing it)."""
    try:
        return path.stat().st_size > JSON_RECORD_LIMIT
    except OSError:
        return False


def _size_args(text: Path | None, doc: dict[str, Any], parsed: ParsedNcclTests) -> tuple[int, ...]:
    cfg = doc.get("config") if isinstance(doc.get("config"), dict) else {}
    if cfg and all(isinstance(cfg.get(k), int) for k in ("minimum_bytes", "maximum_bytes")):
        return cfg["minimum_bytes"], cfg["maximum_bytes"], int(cfg.get("step_factor") or 1)
    if text is not None:
        m = _HEADER_RE.search(read_head(text, _HEADER_BYTES))
        if m:
            return int(m[1]), int(m[2]), int(m[3]) if m[4] == "factor" else 1
    sizes = [r.size_bytes for r in parsed.rows] or [0]
    return min(sizes), max(sizes), 2


def library_of(
    parsed: ParsedNcclTests, env: dict[str, str], events: list[Event]
) -> tuple[str, ComponentRef, str]:
    """(label, library, basis): what the output proves about the library that ran
    (`parse.library.identify_library`, the reading `parse` shares)."""
    identity = identify_library(parsed, env, events)
    return identity.recipe, _library_ref(identity), identity.basis


def _library_ref(identity: LibraryIdentity) -> ComponentRef:
    return ComponentRef(recipe=identity.recipe, ref=_version_number(identity.version))


def _version_number(printed: str | None) -> str | None:
    """`2.19.3+cuda12.2` -> `2.19.3`, `2.28.3-gfx1151-rccl:a188cf2` -> `2.28.3`: the release a
    series is keyed by (the build suffix stays in the provenance)."""
    if not printed:
        return None
    m = re.match(r"\d+(?:\.\d+)+", printed)
    return m.group(0) if m else printed


def _options(parsed: ParsedNcclTests, doc: dict[str, Any]) -> NcclTestsOptions:
    args = doc.get("args")
    extra = [str(a) for a in args[1:]] if isinstance(args, list) else []
    return NcclTestsOptions(
        iterations=timed_iterations(parsed),
        warmup=parsed.warmup_iters or 0,
        check=bool(parsed.validation),
        cycles=parsed.cycles if parsed.cycles > 1 else None,
        timestamps=any(r.timestamp is not None for r in parsed.rows),
        per_iteration=bool(parsed.per_iteration),
        extra_args=extra,
    )


def reconstruct_spec(
    logs: LogSet,
    parsed: ParsedNcclTests,
    sweep: str,
    repeat: int = 0,
    events: list[Event] | None = None,
    source: str | None = None,
) -> RunSpec:
    """The RunSpec of an imported output, as far as the output tells it."""
    doc = json_doc(logs.json)
    env = settings_env(_utf8_env(doc))
    label, library, _ = library_of(parsed, env, events or [])
    begin, end, factor = _size_args(logs.text, doc, parsed)
    hosts = sorted({d.host for d in parsed.devices}) or ["unknown"]
    collective = parsed.collective or collective_from_file_name(logs.stem)
    return RunSpec(
        experiment=sweep,
        testbed=IMPORTED_TESTBED,
        library_label=label,
        library=library,
        benchmark=ComponentRef(recipe="nccl-tests", ref=parsed.nccl_tests_version),
        collective=collective or "unknown",
        size_begin=begin,
        size_end=end,
        size_factor=factor,
        nodes=tuple(hosts),
        ranks_per_node=max(1, (parsed.ranks or 1) // len(hosts)),
        env=env,
        scenario=variant(logs.stem),
        faults=(),
        options=_options(parsed, doc),
        deadline_s=0.0,
        repeat=repeat,
        source=source,
    )


def _utf8_env(doc: dict[str, Any]) -> dict[str, str]:
    """The -J file's environment, each lone surrogate (`\\ud800`, which JSON can spell but no
    UTF-8 file can hold) written as its escape: the run is imported with the value as the
    file spells it, instead of failing half-written."""
    return {utf8_text(name): utf8_text(value) for name, value in json_env(doc).items()}


def utf8_name(name: str | Path) -> str:
    """A file name as UTF-8 text: bytes that are not UTF-8 (kept by Python as lone
    surrogates, which no record can hold) written as their escapes (`\\xff`)."""
    return os.fsencode(str(name)).decode("utf-8", "backslashreplace")


def _provenance(
    logs: LogSet, parsed: ParsedNcclTests, events: list[Event], run_note: str = ""
) -> Provenance:
    doc = json_doc(logs.json)
    env, dropped = redact_env(_utf8_env(doc))
    spec_env = settings_env(env)
    return Provenance(
        imported_from=", ".join(utf8_name(p.resolve()) for p in logs.sources) + run_note,
        library_basis=library_of(parsed, spec_env, events)[2],
        nccl_version=parsed.library_version
        or nccl_version_text(parsed.nccl_library or parsed.nccl_headers),
        nccl_tests_version=parsed.nccl_tests_version,
        cuda_version=env.get("CUDA_VERSION"),
        hostnames=sorted({d.host for d in parsed.devices}),
        env=env,
        env_dropped=dropped,
        launch_command=" ".join(str(a) for a in doc.get("args") or []) or None,
        notes=[f"imported from {', '.join(utf8_name(p) for p in logs.sources)}"],
    )


def _start_time(doc: dict[str, Any]) -> float | None:
    raw = doc.get("start_time")
    try:
        stamp = datetime.strptime(str(raw), "%Y-%m-%d %H:%M:%S")
    except ValueError:
        return None
    return stamp.replace(tzinfo=timezone.utc).timestamp()


def _content_hash(paths: list[Path]) -> str:
    digest = hashlib.sha256()
    for path in paths:
        with path.open("rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
    return digest.hexdigest()[:16]


def import_logs(logs: LogSet, store: st.RunStore, repeat: int = 0) -> list[tuple[str, str]]:
    """Import one log set, one run folder per run in it; returns (run id, "imported" |
    "already imported" | skip reason) per run. The text is streamed (read twice: once to
    parse, once to copy each run's lines), never held whole."""
    if logs.json is not None and _too_large(logs.json):
        why = f"{logs.json}: larger than {JSON_RECORD_LIMIT >> 20} MiB, not read"
        if logs.text is None:
            return [("", why)]
        logs = LogSet(logs.stem, logs.text, None)  # the text alone: its rows are the run
    logs = replace(logs, stem=utf8_name(logs.stem))
    source = f"{logs.stem}@{_content_hash(logs.sources)}"
    read = read_log_set(logs, runformat.STDOUT)  # the reading `parse` shows
    several = len(read.runs) > 1
    out = []
    cursor = LineCursor(logs.text) if logs.text is not None else None
    try:
        for index, run in enumerate(read.runs):
            run_source = f"{source}#run{index + 1}" if several else source
            note = f" (run{index + 1})" if several else ""
            out.append(_import_run(logs, store, repeat, run, run_source, note, cursor))
            if run.twin_refused:  # the text imported alone: its twin named among the skipped
                out.append(("", f"{run.twin_refused}; the text imported alone"))
    finally:
        if cursor is not None:
            cursor.close()
    if read.artifact is not None:
        out += _artifact_leftovers(read.artifact)
    return out


def _import_run(
    logs: LogSet,
    store: st.RunStore,
    repeat: int,
    run: LogRun,
    source: str,
    note: str,
    cursor: LineCursor | None = None,
) -> tuple[str, str]:
    """One run's folder: its spec and provenance as the output tells them (its lines of the
    text read through `cursor`, which reads the runs of one file in one pass)."""
    part = LogSet(logs.stem, None if run.alone else logs.text, run.json)
    if not run.artifact and not run.parsed.is_nccl_tests and not run.events:
        return "", "no nccl-tests output and no NCCL/MPI event in it"
    try:
        spec = _spec_of(part, run, store.sweep, repeat, source)
    except ValidationError as refused:
        return "", _beyond_limits(refused, run.lines)
    if run.artifact is not None:
        provenance = _artifact_provenance(part, run, note)
    else:
        provenance = _provenance(part, run.parsed, run.events, note)
    text = None
    if part.text is not None:
        first, last = run.lines or (1, 1 << 62)
        text = (cursor or LineCursor(part.text)).lines(first, last)
    return _write_run(store, spec, provenance, part, text, run.events, run.outcome)


def _spec_of(logs: LogSet, run: LogRun, sweep: str, repeat: int, source: str) -> RunSpec:
    """The run's spec as its output tells it (ValidationError: a value no run may hold)."""
    if isinstance(run.artifact, HotRepairRun):
        return _hot_repair_spec(run.artifact, sweep, repeat, source)
    if isinstance(run.artifact, HarnessRun):
        return _harness_spec(logs, run, sweep, repeat, source)
    return reconstruct_spec(logs, run.parsed, sweep, repeat, run.events, source)


def _beyond_limits(refused: ValidationError, lines: tuple[int, int] | None) -> str:
    """One line for a run whose output states a value beyond what a run spec holds (an
    iteration count over the planning limit, a size beyond int64): the field, the value and
    the limit, not the validator's dump."""
    where = f"lines {lines[0]}-{lines[1]}: " if lines else ""
    said = []
    for error in refused.errors()[:3]:
        field = ".".join(str(part) for part in error["loc"]) or "a value"
        value = shown(error.get("input"))
        said.append(f"{field} {value}: {error['msg'].lower()}")
    return f"{where}{'; '.join(said)} (a limit of r2bench's run specs); not imported"


def _write_run(
    store: st.RunStore,
    spec: RunSpec,
    provenance: Provenance,
    logs: LogSet,
    text: Iterator[bytes] | None,
    events: list[Event],
    outcome: Outcome,
) -> tuple[str, str]:
    """One run folder: its lines of the text (`text`, None: no text), the JSON,
    the events and the outcome; nothing written for a run already complete."""
    if store.is_complete(spec.run_id):
        return spec.run_id, "already imported"
    folder = store.create(spec.run_id)
    try:
        _fill_run(folder, spec, provenance, logs, text, events, outcome)
    except BaseException:
        # half a run imported would count as an incomplete run in every later report; the
        # logs are still where they were, so a later import writes it whole
        shutil.rmtree(folder.path, ignore_errors=True)
        raise
    return spec.run_id, "imported"


def _fill_run(
    folder: st.RunFolder,
    spec: RunSpec,
    provenance: Provenance,
    logs: LogSet,
    text: Iterator[bytes] | None,
    events: list[Event],
    outcome: Outcome,
) -> None:
    folder.write_spec(spec)
    folder.write_provenance(provenance)
    if text is not None:
        _copy_text(folder, runformat.STDOUT, text)
    if logs.json is not None:
        with open_text(logs.json, "nccl-tests -J JSON", line_limit=None) as handle:
            _copy_text(folder, runformat.RESULT_JSON, iter(lambda: handle.read(1 << 20), b""))
    folder.write_events(events)
    folder.write_outcome(
        runmodel.RunEnd(outcome=outcome, started_at=_start_time(json_doc(logs.json)))
    )
    folder.mark_complete()


def _copy_text(folder: st.RunFolder, name: str, blocks: Iterable[bytes]) -> None:
    """Write `name` of the run folder from `blocks` (a log as `open_text` reads it: UTF-8, LF
    line ends, unpacked), streamed, renamed into place once whole."""
    with folder.stream_path(name).open("wb") as out:
        for block in blocks:
            out.write(block)
    folder.commit_stream(name)


# --------------------------------------------------------------------------- R-2CCL's artifact


def is_artifact(logs: LogSet) -> bool:
    """Whether a log set is one of R-2CCL's artifact logs (a text output of its harness
    scripts, `parse.r2ccl_artifact`), read by its scripts' own structure."""
    return logs.text is not None and logs.json is None and looks_like_artifact(logs.text)


def _artifact_leftovers(log: ArtifactLog) -> list[tuple[str, str]]:
    """What an artifact log holds besides its runs, as skip reasons: each run refused
    (`ArtifactError`) and each script table."""
    out = [("", f"refused: {refusal}") for refusal in log.errors]
    out += [
        (
            "",
            f"lines {t.first_line}-{t.last_line}: the script's table '{t.title}' (a summary "
            "the script printed, not a run: never read as result rows)",
        )
        for t in log.tables
    ]
    if not log.runs and not log.errors and not log.tables:
        out.append(("", "an R-2CCL artifact log with no run in it"))
    return out


def _harness_spec(logs: LogSet, run: LogRun, sweep: str, repeat: int, source: str) -> RunSpec:
    """The nccl-tests spec as the output tells it, with R-2CCL as the library, the settings
    the harness stated as its environment and scenario `none` (a declared failure is one of
    those settings: nothing was injected)."""
    spec = reconstruct_spec(logs, run.parsed, sweep, repeat, run.events, source)
    sizes = [r.size_bytes for r in run.parsed.rows]
    return spec.model_copy(
        update={
            "library_label": run.library.recipe,
            "library": _library_ref(run.library),
            "env": run.env,
            "scenario": BASELINE_VARIANT,  # a declared failure is a setting, not a fault
            "size_begin": min(sizes, default=spec.size_begin),
            "size_end": max(sizes, default=spec.size_end),
        }
    )


def _hot_repair_spec(run: HotRepairRun, sweep: str, repeat: int, source: str) -> RunSpec:
    """The hot-repair program's run: an in-place AllReduce of one size, `iters` times."""
    hosts = sorted({d.host for d in run.devices}) or ["unknown"]
    size = run.size_bytes or 0
    return RunSpec(
        experiment=sweep,
        testbed=IMPORTED_TESTBED,
        library_label="r2ccl",
        library=ComponentRef(recipe="r2ccl", ref=_version_number(run.library_version)),
        benchmark=ComponentRef(recipe="r2ccl-hot-repair", ref=None),
        collective="all_reduce",
        size_begin=size,
        size_end=size,
        size_factor=1,
        nodes=tuple(hosts),
        ranks_per_node=max(1, len(run.devices) // len(hosts)),
        env={},
        scenario=hot_repair_scenario(run),
        faults=(),
        options=NcclTestsOptions(
            iterations=run.iters or max(1, len(run.iterations)),
            warmup=0,
            check=run.verification is not None,
            timestamps=False,
            per_iteration=True,
            datatype=run.datatype or "float",
        ),
        deadline_s=0.0,
        repeat=repeat,
        source=source,
    )


def _artifact_provenance(logs: LogSet, logged: LogRun, note: str) -> Provenance:
    """The provenance of an artifact run: R-2CCL proven by the line that shows it, the
    settings the harness stated as the job's environment."""
    run = logged.artifact
    assert run is not None, "an artifact run"
    base = _provenance(logs, logged.parsed, logged.events, note)
    settings = run.settings if isinstance(run, HarnessRun) else {}
    extra = [f"R-2CCL artifact log, lines {run.first_line}-{run.last_line}"]
    if isinstance(run, HarnessRun) and run.label:
        extra.append(f"the script's label: {run.label}")
    if isinstance(run, HarnessRun) and run.command:
        extra.append(f"the script ran: {run.command}")
    if isinstance(run, HarnessRun) and (declared := declared_failure(run.settings)):
        extra.append(f"{declared} (R2CC_MODE {run.settings.get('R2CC_MODE')}), nothing injected")
    if isinstance(run, HotRepairRun) and run.disconnect_cmd:
        extra.append(
            f"hot-repair program: cut by {run.disconnect_cmd} after "
            f"{run.disconnect_delay_ms} ms, during iteration {run.cut_during}"
        )
    return base.model_copy(
        update={
            "library_basis": logged.library.basis,
            "env": {**base.env, **settings},
            "launch_command": run.command if isinstance(run, HarnessRun) else None,
            "notes": [*base.notes, *extra],
        }
    )


def import_dir(directory: Path, results: Path, sweep: str | None = None) -> ImportReport:
    """Import every log of `directory` into `results/<sweep>` (sweep: the folder's name)."""
    store = st.RunStore(results, sweep or directory.resolve().name)
    report = ImportReport(store.sweep_dir)
    report.skipped += [(str(path), why) for path, why in packed_files(directory)]
    for logs in find_logs(directory):
        source = str(logs.sources[0])
        try:
            results_of = import_logs(logs, store)
        except (OSError, ValueError) as exc:
            if isinstance(exc, WriteFailed) or (
                isinstance(exc, OSError)
                and exc.filename
                and store.sweep_dir in Path(exc.filename).parents
            ):
                raise  # the results folder cannot be written: not the input's fault
            report.skipped.append((source, f"unreadable: {exc}"))
            continue
        scenario = variant(utf8_name(logs.stem))
        if scenario != BASELINE_VARIANT and not is_artifact(logs):
            report.scenarios[source] = scenario
        for run_id, status in results_of:
            if status == "imported":
                report.imported.append((run_id, source))
            elif status == "already imported":
                report.already.append((run_id, source))
            else:
                report.skipped.append((source, status))
    return report


BASELINE_VARIANT = "none"


def variant(stem: str) -> str:
    """The scenario of an imported run: what its file name adds to the test's name
    (`all_reduce_perf.socket.c1` -> `socket.c1`), or `none`."""
    parts = Path(stem).name.split(".", 1)
    return parts[1] if len(parts) == 2 and parts[1] else BASELINE_VARIANT
