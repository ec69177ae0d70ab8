"""Import a folder of existing nccl-tests outputs into a results sweep.

Each run of each log becomes one run folder (a text file holding several runs, one after
another, is split at each new nccl-tests header). A text output and the `-J` JSON it names
(`# Writing JSON output to <file>`) are one run; without that line, files sharing a stem are.
A run's identity includes its source (relative path and content hash), so two different files
never collide and importing the same file again is a no-op. The library is what the output
proves (R2CC log lines, the NCCL version); a guess says so (`Provenance.library_basis`). The RunSpec is reconstructed from what the output says (collective,
sizes, iterations, devices and hosts, NCCL_* / R2CC_* variables of the JSON's environment);
the provenance says `imported from <path>`. Files that hold no nccl-tests output and no log
event are skipped with a reason. Importing the same folder again skips runs already complete.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from r2bench.analysis.decision import decide
from r2bench.analysis.parsedrun import parse_outputs
from r2bench.config.experiment import NcclTestsOptions
from r2bench.parse.events import read_events
from r2bench.parse.library import nccl_version_text
from r2bench.parse.models import Event, EventKind, Outcome, ParsedNcclTests
from r2bench.parse.nccltests.collective import collective_from_file_name
from r2bench.parse.nccltests.jsonfile import parse_json
from r2bench.parse.nccltests.runs import combine
from r2bench.parse.nccltests.text import iter_runs
from r2bench.parse.r2ccl_artifact import (
    ArtifactLog,
    HarnessRun,
    HotRepairRun,
    declared_failure,
    events_between,
    hot_repair_scenario,
    library_basis,
    looks_like_artifact,
    read_artifact,
)
from r2bench.plan.runspec import ComponentRef, RunSpec
from r2bench.runfolder import runformat, runmodel
from r2bench.runfolder import store as st
from r2bench.runfolder.provenance import Provenance, redact_env
from r2bench.safeio import JSON_RECORD_LIMIT

TEXT_SUFFIXES = (".txt", ".log", ".out", ".err")
JSON_SUFFIXES = (".json",)
IMPORTED_TESTBED = "imported"
_HEADER_RE = re.compile(r"minBytes (\d+) maxBytes (\d+) step: (\d+)\((factor|bytes)\)")
_SPEC_ENV_RE = re.compile(r"^(NCCL_|R2CC_)")
_HEADER_BYTES = 65536
_WRITING_JSON_RE = re.compile(r"^# Writing JSON output to (.+)$", re.MULTILINE)
_R2CC_EVENT_PREFIX = "r2cc_"


@dataclass(frozen=True)
class LogSet:
    """The files of one imported run: text output and/or JSON, sharing a stem."""

    stem: str
    text: Path | None = None
    json: Path | None = None

    @property
    def sources(self) -> list[Path]:
        """The files, text first."""
        return [p for p in (self.text, self.json) if p is not None]


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
        suffix = path.suffix.lower()
        if suffix in JSON_SUFFIXES:
            jsons[str(path.relative_to(directory))] = path
        elif suffix in TEXT_SUFFIXES:
            texts.append(path)
    by_name: dict[str, list[str]] = {}
    for rel in jsons:
        by_name.setdefault(Path(rel).name, []).append(rel)
    sets = []
    for text in texts:
        text_rel = text.relative_to(directory)
        named = _json_named_in(text)
        twin = _pick_named(named, text_rel, by_name) if named else None
        if twin is None and not named:
            stem_twin = str(text_rel.with_suffix(".json"))
            twin = stem_twin if stem_twin in jsons else None
        stem = str(text_rel.with_suffix(""))
        sets.append(LogSet(stem, text, jsons.pop(twin) if twin else None))
    sets += [LogSet(str(Path(rel).with_suffix("")), None, path) for rel, path in jsons.items()]
    return sorted(sets, key=lambda s: s.stem)


def _json_named_in(text: Path) -> str | None:
    with text.open("rb") as handle:
        head = handle.read(_HEADER_BYTES).decode("utf-8", errors="replace")
    m = _WRITING_JSON_RE.search(head)
    return m.group(1).strip() if m else None


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


def _json_doc(path: Path | None) -> dict[str, Any]:
    if path is None:
        return {}
    try:
        doc = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def _json_env(doc: dict[str, Any]) -> dict[str, str]:
    env = {}
    for item in doc.get("env") or []:
        if isinstance(item, str) and "=" in item:
            name, value = item.split("=", 1)
            env[name] = value
    return env


def _size_args(text: Path | None, doc: dict[str, Any], parsed: ParsedNcclTests) -> tuple[int, ...]:
    cfg = doc.get("config") if isinstance(doc.get("config"), dict) else {}
    if cfg and all(isinstance(cfg.get(k), int) for k in ("minimum_bytes", "maximum_bytes")):
        return cfg["minimum_bytes"], cfg["maximum_bytes"], int(cfg.get("step_factor") or 1)
    if text is not None:
        with text.open("rb") as handle:
            head = handle.read(_HEADER_BYTES).decode("utf-8", errors="replace")
        m = _HEADER_RE.search(head)
        if m:
            return int(m[1]), int(m[2]), int(m[3]) if m[4] == "factor" else 1
    sizes = [r.size_bytes for r in parsed.rows] or [0]
    return min(sizes), max(sizes), 2


def library_of(
    parsed: ParsedNcclTests, env: dict[str, str], events: list[Event]
) -> tuple[str, ComponentRef, str]:
    """(label, library, basis): what the output proves about the library that ran.

    R2CC log lines prove R-2CCL; rccl-tests' and RCCL's own lines (`rccl-tests: Version`,
    `# rccl-tests version`, `RCCL version : 2.28.3-...`) prove RCCL; otherwise the version the
    output prints (NCCL's `NCCL version 2.19.3+cuda12.2` line, nccl-tests' `nccl-library=`)
    names an NCCL build; R2CC_* variables without any R2CC line are only a guess, and the
    basis says so.
    """
    printed = parsed.library_version or next(
        (e.details.get("version") for e in events if e.kind is EventKind.NCCL_VERSION), None
    )
    version = printed or nccl_version_text(parsed.nccl_library or parsed.nccl_headers)
    if any(e.kind.value.startswith(_R2CC_EVENT_PREFIX) for e in events):
        recipe, basis = "r2ccl", "R2CC log lines"
    elif parsed.library_family == "rccl":
        said = f"RCCL version {version} printed" if version else "rccl-tests lines, no version"
        recipe, basis = "rccl", f"{said}, no R2CC log line"
    elif any(name.startswith("R2CC_") for name in env):
        recipe, basis = "r2ccl", "guess: R2CC_* variables set, no R2CC log line"
    elif version:
        recipe, basis = "nccl", f"NCCL version {version} printed, no R2CC log line"
    else:
        recipe, basis = "nccl", "guess: no library version or R2CC line in the output"
    return recipe, ComponentRef(recipe=recipe, ref=_version_number(version)), basis


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
        iterations=parsed.iters or 1,
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
    doc = _json_doc(logs.json)
    env = {k: v for k, v in _json_env(doc).items() if _SPEC_ENV_RE.match(k)}
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


def _provenance(
    logs: LogSet, parsed: ParsedNcclTests, events: list[Event], run_note: str = ""
) -> Provenance:
    doc = _json_doc(logs.json)
    env, dropped = redact_env(_json_env(doc))
    spec_env = {k: v for k, v in env.items() if _SPEC_ENV_RE.match(k)}
    return Provenance(
        imported_from=", ".join(str(p.resolve()) for p in logs.sources) + run_note,
        library_basis=library_of(parsed, spec_env, events)[2],
        nccl_version=parsed.library_version
        or nccl_version_text(parsed.nccl_library or parsed.nccl_headers),
        nccl_tests_version=parsed.nccl_tests_version,
        cuda_version=env.get("CUDA_VERSION"),
        hostnames=sorted({d.host for d in parsed.devices}),
        env=env,
        env_dropped=dropped,
        launch_command=" ".join(str(a) for a in doc.get("args") or []) or None,
        notes=[f"imported from {', '.join(str(p) for p in logs.sources)}"],
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
    source = f"{logs.stem}@{_content_hash(logs.sources)}"
    if logs.text is None:
        parsed = parse_outputs(None, logs.json)
        return [_import_run(logs, store, repeat, parsed, [], None, source)]
    if is_artifact(logs):
        return _import_artifact(logs, store, repeat, source)
    with logs.text.open("rb") as handle:
        runs = iter_runs(handle, file_name=logs.text.name)
    with logs.text.open("rb") as handle:
        all_events = read_events(handle)
    several = len(runs) > 1
    out = []
    for index, parsed in enumerate(runs):
        first, last = parsed.first_line or 1, parsed.last_line or 1 << 62
        events = [e for e in all_events if first <= e.line <= last] if several else all_events
        json_doc = logs.json if not several or _names_json(logs.text, first, last) else None
        if json_doc is not None:
            parsed = combine(parsed, parse_json(json_doc.read_bytes()))
        part = LogSet(logs.stem, logs.text, json_doc)
        run_source = f"{source}#run{index + 1}" if several else source
        lines = (first, last) if several else None
        out.append(_import_run(part, store, repeat, parsed, events, lines, run_source))
    return out


def _run_lines(path: Path, first: int, last: int) -> Iterator[bytes]:
    """Lines `first`..`last` (1-based) of a file, streamed."""
    with path.open("rb") as handle:
        for number, line in enumerate(handle, start=1):
            if number > last:
                return
            if number >= first:
                yield line


def _names_json(path: Path, first: int, last: int) -> bool:
    return any(
        _WRITING_JSON_RE.match(line.decode("utf-8", "replace").strip())
        for line in _run_lines(path, first, last)
    )


def _import_run(
    logs: LogSet,
    store: st.RunStore,
    repeat: int,
    parsed: ParsedNcclTests,
    events: list[Event],
    lines: tuple[int, int] | None,
    source: str,
) -> tuple[str, str]:
    if not parsed.is_nccl_tests and not events:
        return "", "no nccl-tests output and no NCCL/MPI event in it"
    spec = reconstruct_spec(logs, parsed, store.sweep, repeat, events, source)
    note = f" ({source.rsplit('#', 1)[1]})" if "#run" in source else ""
    outcome = decide(parsed, [(runformat.STDOUT, e) for e in events], env=spec.env)
    return _write_run(
        store, spec, _provenance(logs, parsed, events, note), logs, lines, events, outcome
    )


def _write_run(
    store: st.RunStore,
    spec: RunSpec,
    provenance: Provenance,
    logs: LogSet,
    lines: tuple[int, int] | None,
    events: list[Event],
    outcome: Outcome,
) -> tuple[str, str]:
    """One run folder: the run's lines of the text (all of it without `lines`), the JSON,
    the events and the outcome; nothing written for a run already complete."""
    if store.is_complete(spec.run_id):
        return spec.run_id, "already imported"
    folder = store.start(spec, provenance)
    if lines is not None and logs.text is not None:
        folder.write_stdout(b"".join(_run_lines(logs.text, *lines)))
    elif logs.text is not None:
        folder.copy_in(logs.text, runformat.STDOUT)
    if logs.json is not None:
        folder.copy_in(logs.json, runformat.RESULT_JSON)
    folder.write_events(events)
    folder.write_outcome(
        runmodel.RunEnd(outcome=outcome, started_at=_start_time(_json_doc(logs.json)))
    )
    folder.mark_complete()
    return spec.run_id, "imported"


# --------------------------------------------------------------------------- R-2CCL's artifact


def is_artifact(logs: LogSet) -> bool:
    """Whether a log set is one of R-2CCL's artifact logs (a text output of its harness
    scripts, `parse.r2ccl_artifact`), read by its scripts' own structure."""
    return logs.text is not None and logs.json is None and looks_like_artifact(logs.text)


def _import_artifact(
    logs: LogSet, store: st.RunStore, repeat: int, source: str
) -> list[tuple[str, str]]:
    """One run folder per run of an artifact log, with the settings its lines state; a run
    refused (`ArtifactError`) and each script table come back as skip reasons."""
    assert logs.text is not None
    log = read_artifact(logs.text, str(logs.text))
    with logs.text.open("rb") as handle:
        all_events = read_events(handle)
    runs = log.runs
    out = []
    for index, run in enumerate(runs):
        events = events_between(all_events, run.first_line, run.last_line)
        run_source = f"{source}#run{index + 1}" if len(runs) > 1 else source
        note = f" (run{index + 1})" if len(runs) > 1 else ""
        if isinstance(run, HotRepairRun):
            spec = _hot_repair_spec(run, store.sweep, repeat, run_source)
            parsed, outcome = run.as_parsed(), run.outcome(runformat.STDOUT)
        else:
            spec = _harness_spec(logs, run, store.sweep, repeat, events, run_source)
            parsed = run.parsed
            outcome = decide(parsed, [(runformat.STDOUT, e) for e in events], env=spec.env)
        provenance = _artifact_provenance(logs, log, run, parsed, events, note)
        lines = (run.first_line, run.last_line)
        out.append(_write_run(store, spec, provenance, logs, lines, events, outcome))
    out += [("", f"refused: {refusal}") for refusal in log.errors]
    out += [
        (
            "",
            f"lines {t.first_line}-{t.last_line}: the script's table '{t.title}' (a summary "
            "the script printed, not a run: never read as result rows)",
        )
        for t in log.tables
    ]
    if not runs and not log.errors and not log.tables:
        out.append(("", "an R-2CCL artifact log with no run in it"))
    return out


def _harness_spec(
    logs: LogSet,
    run: HarnessRun,
    sweep: str,
    repeat: int,
    events: list[Event],
    source: str,
) -> RunSpec:
    """The nccl-tests spec as the output tells it, with R-2CCL as the library, the settings
    the harness stated as its environment and scenario `none` (a declared failure is one of
    those settings: nothing was injected)."""
    spec = reconstruct_spec(logs, run.parsed, sweep, repeat, events, source)
    env = {k: v for k, v in run.settings.items() if _SPEC_ENV_RE.match(k)}
    sizes = [r.size_bytes for r in run.parsed.rows]
    version = run.parsed.library_version or nccl_version_text(run.parsed.nccl_library)
    return spec.model_copy(
        update={
            "library_label": "r2ccl",
            "library": ComponentRef(recipe="r2ccl", ref=_version_number(version)),
            "env": env,
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


def _artifact_provenance(
    logs: LogSet,
    log: ArtifactLog,
    run: HarnessRun | HotRepairRun,
    parsed: ParsedNcclTests,
    events: list[Event],
    note: str,
) -> Provenance:
    """The provenance of an artifact run: R-2CCL proven by the line that shows it, the
    settings the harness stated as the job's environment."""
    base = _provenance(logs, parsed, events, note)
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
            "library_basis": library_basis(log, run, events),
            "env": {**base.env, **settings},
            "launch_command": run.command if isinstance(run, HarnessRun) else None,
            "notes": [*base.notes, *extra],
        }
    )


def import_dir(directory: Path, results: Path, sweep: str | None = None) -> ImportReport:
    """Import every log of `directory` into `results/<sweep>` (sweep: the folder's name)."""
    store = st.RunStore(results, sweep or directory.resolve().name)
    report = ImportReport(store.sweep_dir)
    for logs in find_logs(directory):
        source = str(logs.sources[0])
        try:
            results_of = import_logs(logs, store)
        except (OSError, ValueError) as exc:
            if (
                isinstance(exc, OSError)
                and exc.filename
                and store.sweep_dir in Path(exc.filename).parents
            ):
                raise  # the results folder cannot be written: not the input's fault
            report.skipped.append((source, f"unreadable: {exc}"))
            continue
        if variant(logs.stem) != BASELINE_VARIANT and not is_artifact(logs):
            report.scenarios[source] = variant(logs.stem)
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
