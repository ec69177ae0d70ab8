"""Import a folder of existing nccl-tests outputs into a results sweep.

Each log becomes one run folder: text and `-J` JSON files with the same stem (`x.txt` +
`x.json`) are one run. The RunSpec is reconstructed from what the output says (collective,
sizes, iterations, devices and hosts, NCCL_* / R2CC_* variables of the JSON's environment);
the provenance says `imported from <path>`. Files that hold no nccl-tests output and no log
event are skipped with a reason. Importing the same folder again skips runs already complete.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from r2bench.config.experiment import NcclTestsOptions
from r2bench.plan.runspec import ComponentRef, RunSpec
from r2bench.records import store as st
from r2bench.records.events import parse_events
from r2bench.records.models import Event, ParsedNcclTests
from r2bench.records.nccltests import collective_from_binary
from r2bench.records.outcome import classify
from r2bench.records.provenance import Provenance, nccl_version_text, redact_env
from r2bench.records.tables import parse_outputs

TEXT_SUFFIXES = (".txt", ".log", ".out", ".err")
JSON_SUFFIXES = (".json",)
IMPORTED_TESTBED = "imported"
_HEADER_RE = re.compile(r"minBytes (\d+) maxBytes (\d+) step: (\d+)\((factor|bytes)\)")
_SPEC_ENV_RE = re.compile(r"^(NCCL_|R2CC_)")
_HEADER_BYTES = 65536


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


def find_logs(directory: Path) -> list[LogSet]:
    """Text and JSON files under `directory` (recursively), grouped by relative stem."""
    groups: dict[str, dict[str, Path]] = {}
    for path in sorted(directory.rglob("*")):
        if not path.is_file() or path.name.startswith("."):
            continue
        suffix = path.suffix.lower()
        kind = "json" if suffix in JSON_SUFFIXES else "text" if suffix in TEXT_SUFFIXES else None
        if kind is None:
            continue
        stem = str(path.relative_to(directory).with_suffix(""))
        groups.setdefault(stem, {}).setdefault(kind, path)
    return [LogSet(stem, g.get("text"), g.get("json")) for stem, g in sorted(groups.items())]


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


def _library(parsed: ParsedNcclTests, env: dict[str, str]) -> tuple[str, ComponentRef]:
    version = nccl_version_text(parsed.nccl_library or parsed.nccl_headers)
    is_r2 = any(name.startswith("R2CC_") for name in env)
    recipe = "r2ccl" if is_r2 else "nccl"
    return recipe, ComponentRef(recipe=recipe, ref=version)


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


def reconstruct_spec(logs: LogSet, parsed: ParsedNcclTests, sweep: str, repeat: int = 0) -> RunSpec:
    """The RunSpec of an imported output, as far as the output tells it."""
    doc = _json_doc(logs.json)
    env = {k: v for k, v in _json_env(doc).items() if _SPEC_ENV_RE.match(k)}
    label, library = _library(parsed, env)
    begin, end, factor = _size_args(logs.text, doc, parsed)
    hosts = sorted({d.host for d in parsed.devices}) or ["unknown"]
    collective = parsed.collective or _collective_from_name(logs.stem)
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
    )


def _collective_from_name(stem: str) -> str | None:
    """`all_reduce_perf.socket.c1` -> `all_reduce`; names without `_perf` tell nothing."""
    first = Path(stem).name.split(".")[0]
    return collective_from_binary(first) if "_perf" in first else None


def _provenance(logs: LogSet, parsed: ParsedNcclTests) -> Provenance:
    doc = _json_doc(logs.json)
    env, dropped = redact_env(_json_env(doc))
    return Provenance(
        imported_from=", ".join(str(p.resolve()) for p in logs.sources),
        nccl_version=nccl_version_text(parsed.nccl_library or parsed.nccl_headers),
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


def _events(text: Path | None) -> list[Event]:
    if text is None:
        return []
    with text.open("rb") as handle:
        return parse_events(handle)


def import_logs(logs: LogSet, store: st.RunStore, repeat: int = 0) -> tuple[str, str]:
    """Import one log set; returns (run id, "imported" | "already imported" | skip reason)."""
    parsed = parse_outputs(logs.text, logs.json)
    events = _events(logs.text)
    if not parsed.rows and not parsed.devices and not events:
        return "", "no nccl-tests output and no NCCL/MPI event in it"
    spec = reconstruct_spec(logs, parsed, store.sweep, repeat)
    if store.is_complete(spec.run_id):
        return spec.run_id, "already imported"
    folder = store.start(spec, _provenance(logs, parsed))
    if logs.text is not None:
        folder.copy_in(logs.text, st.STDOUT)
    if logs.json is not None:
        folder.copy_in(logs.json, st.RESULT_JSON)
    folder.write_events(events)
    outcome = classify(None, parsed=parsed, events=events, source=st.STDOUT)
    folder.write_outcome(st.RunEnd(outcome=outcome, started_at=_start_time(_json_doc(logs.json))))
    folder.mark_complete()
    return spec.run_id, "imported"


def import_dir(directory: Path, results: Path, sweep: str | None = None) -> ImportReport:
    """Import every log of `directory` into `results/<sweep>` (sweep: the folder's name)."""
    store = st.RunStore(results, sweep or directory.resolve().name)
    report = ImportReport(store.sweep_dir)
    seen: Counter[str] = Counter()
    for logs in find_logs(directory):
        source = str(logs.sources[0])
        try:
            key = _identity(logs)
            run_id, status = import_logs(logs, store, repeat=seen[key])
            seen[key] += 1
        except (OSError, ValueError) as exc:
            report.skipped.append((source, f"unreadable: {exc}"))
            continue
        if status == "imported":
            report.imported.append((run_id, source))
        elif status == "already imported":
            report.already.append((run_id, source))
        else:
            report.skipped.append((source, status))
    return report


def _identity(logs: LogSet) -> str:
    """Outputs whose names differ only by folder share a spec: number them as repeats."""
    return Path(logs.stem).name


def variant(stem: str) -> str:
    """The scenario of an imported run: what its file name adds to the test's name
    (`all_reduce_perf.socket.c1` -> `socket.c1`), or `none`."""
    parts = Path(stem).name.split(".", 1)
    return parts[1] if len(parts) == 2 and parts[1] else "none"
