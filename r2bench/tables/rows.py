"""Rows of the tables, run by run: what one run folder adds to each table.

`RunRows.parse_folder` reads a run folder (through `analysis.parsedrun` and `analysis.recovery`) into
plain column lists: its result rows, per-iteration blocks, events (log lines, fault steps,
RAS verdicts), fault windows, provenance fields, its `runs` row and its counter samples.
`RunRows` of many runs merge in folder order; `to_doc`/`from_doc` turn them into JSON-able
data and back (`tables.rowcache` keeps them between builds). `tables.build` makes the
frames.
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
from array import array
from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from itertools import accumulate
from pathlib import Path
from sys import intern
from typing import Any, NamedTuple

from r2bench.analysis import recovery
from r2bench.analysis.parsedrun import (
    LAST_IN_SECOND,
    LINE_STAMP_RESOLUTION,
    RESULT_VALUES,
    ParsedRun,
    RunOutputs,
    block_end_times,
    empty_run,
    key_of,
    parse_run,
)
from r2bench.analysis.trial import trial_columns
from r2bench.parse.library import nccl_version_text
from r2bench.parse.models import ParsedNcclTests, PerIteration
from r2bench.parse.nictraffic import COUNTER_COLUMNS, counter_rows
from r2bench.parse.ras import RAS_FILE, ras_verdict
from r2bench.runfolder import runformat, runmodel
from r2bench.safeio import JSON_RECORD_LIMIT, InputRefused, read_text_bounded
from r2bench.tables import rowcache, training

INCOMPLETE = "incomplete"
INVALID = "invalid"
"""The outcome of a run whose record could not be read (a bad spec.json, result.json, ...)."""
# Per-run columns joined onto `results` (besides the env columns).
RUN_KEYS = ("experiment", "library", "collective", "scenario", "repeat", "outcome", "verdict")
RESULT_FIELDS = ("size_bytes", "count", "type", "redop", "root", "placement", "cycle")


class EventRow(NamedTuple):
    """One row of the events table: a log event, a fault step or a RAS verdict."""

    run_id: str
    source: str
    line: int | None
    kind: str
    time: float | None
    host: str | None = None
    pid: int | None = None
    rank: int | None = None
    message: str | None = None
    fault: int | None = None
    nic: str | None = None
    ok: bool | None = None
    details: str = ""
    cycle: int | None = None


EVENT_COLUMNS = EventRow._fields
WINDOW_COLUMNS = (
    *("run_id", "fault", "cycle", "kind", "node", "nic", "applied_at", "back_at"),
    *("verdict", "before_bytes", "live_bytes", "after_bytes", "after_what", "iteration"),
    "evidence",
    *("link_back_at", "ended_by"),
)
"""One row per fault cycle applied, on the controller clock (`analysis.windows.fault_windows`).
`back_at` is where the window ends: the link's return, or the job's end when that came first
or the link never came back (`analysis.jobend`; empty when neither is known); `ended_by` says
which (`link_back`, `job_end`) and `link_back_at` when the link came back (empty: never,
during the run). The failure evidence of a NIC fault (`analysis.evidence`): the verdict, the
target NIC's bytes before, just before and after it, the iteration in flight and the evidence
line (empty for process faults)."""
LINK_BACK = "link_back"
JOB_END = "job_end"
TRAFFIC_COLUMNS = (
    *("run_id", "iteration", "size_bytes", "start", "end", "node", "nic"),
    *("tx_bytes", "rx_bytes", "completed"),
)
"""Of runs with a NIC fault: bytes each NIC moved in each measured collective (`completed`
false for the one a fault cut short, up to the run's end)."""
PROVENANCE_COLUMNS = ("run_id", "field", "value")
"""One row per provenance.json field of a run (`env:NAME` for its job environment)."""
RAS_VERDICT = "ras_verdict"
"""Event kind of an NCCL RAS observer's verdict (`parse.ras`): host = the observer's node."""
CPU, GPU = "CPU", "GPU"
"""The runs table's `device_kind` values (`device_kind`)."""
_CPU_DEVICE_RE = re.compile(r"\bCPU\b")
_FAULT_TIMES = ("planned_at", "requested_at", "applied_at", "verified_at", "clock_offset_s")


@dataclass
class Cols:
    """Named column lists, filled row by row or block by block."""

    names: tuple[str, ...]
    data: dict[str, list[Any]] = field(default_factory=dict)
    _lists: list[list[Any]] = field(default_factory=list)
    _next: int = 0

    def __post_init__(self) -> None:
        self.data = {n: [] for n in self.names}
        self._lists = [self.data[n] for n in self.names]
        self._next = 0

    def add(self, *values: Any) -> None:
        """Append values to the next columns; a row may be added in several calls."""
        start = self._next
        for column, value in zip(self._lists[start : start + len(values)], values, strict=True):
            column.append(value)
        self._next = (start + len(values)) % len(self._lists)


@dataclass
class IterBlocks:
    """Per-iteration times: one flat array of times plus per-block columns (repeated per iteration when the table is made).
    The times are the bulk of a sweep's data: kept as C doubles, not Python floats."""

    times: array[float] = field(default_factory=lambda: array("d"))
    run_id: list[str] = field(default_factory=list)
    size_bytes: list[int] = field(default_factory=list)
    placement: list[str] = field(default_factory=list)
    cycle: list[int] = field(default_factory=list)
    n: list[int] = field(default_factory=list)
    bus_factor: list[float] = field(default_factory=list)
    end_time: list[float] = field(default_factory=list)
    row_printed: list[bool] = field(default_factory=list)
    """Whether the block's size printed its result row (false: a crash cut it short, and its
    iterations come from the workload's `#iter` lines)."""

    def select(self, blocks: Iterable[int]) -> IterBlocks:
        """The blocks at these indices (in order), with their times."""
        wanted = list(blocks)
        starts = list(accumulate(self.n, initial=0))
        out = IterBlocks()
        for i in wanted:
            out.times.extend(self.times[starts[i] : starts[i] + self.n[i]])
        for f in fields(IterBlocks):
            if f.name != "times":
                column = getattr(self, f.name)
                getattr(out, f.name).extend(column[i] for i in wanted)
        return out


def _shared(values: list[Any]) -> list[Any]:
    """The values with equal strings made one object: a sweep's rows repeat the same few
    strings (run ids, placements, types) millions of times."""
    return [intern(v) if type(v) is str else v for v in values]


_COLUMN_TABLES = ("results", "events", "windows", "provenance", "traffic", "counters", "training")
_SCALARS = (str, int, float, bool, type(None))


def _fill(columns: dict[str, list[Any]], kept: Any) -> None:
    """Put kept column lists into `columns` (same names, equal lengths, scalars only)."""
    if not isinstance(kept, dict) or set(kept) != set(columns):
        raise ValueError("not the columns expected")
    lengths = set()
    for name, values in kept.items():
        if not isinstance(values, list):
            raise ValueError(f"column {name}: not a list")
        if isinstance(columns[name], array):
            columns[name][:] = array("d", values)  # numbers only, or TypeError
        elif all(type(v) in _SCALARS for v in values):
            columns[name][:] = values
        else:
            raise ValueError(f"column {name}: not a list of plain values")
        lengths.add(len(values))
    if len(lengths) > 1 and set(columns) != {f.name for f in fields(IterBlocks)}:
        raise ValueError("columns of different lengths")


def _checked_run_row(row: Any) -> dict[str, Any]:
    """A kept runs-table row: the keys of `_run_row`, plain values, `env` a flat mapping."""
    if not isinstance(row, dict) or set(row) != set(run_row_keys()) | {"env"}:
        raise ValueError("not a runs-table row")
    env = row["env"]
    if not isinstance(env, dict) or not all(type(v) in _SCALARS for v in env.values()):
        raise ValueError("env: not a flat mapping")
    if not all(type(v) in _SCALARS for k, v in row.items() if k != "env"):
        raise ValueError("not plain values")
    return row


class RunRows:
    """Rows of every table, of one run folder or of many (merged in folder order)."""

    def __init__(self, sweep_dir: Path) -> None:
        self.sweep_dir = sweep_dir
        self.results = Cols(("run_id", *RESULT_FIELDS, *RESULT_VALUES, "timestamp"))
        self.events = Cols(EVENT_COLUMNS)
        self.windows = Cols(WINDOW_COLUMNS)
        self.provenance = Cols(PROVENANCE_COLUMNS)
        self.traffic = Cols(TRAFFIC_COLUMNS)
        self.iters = IterBlocks()
        self.runs: list[dict[str, Any]] = []
        self.env_names: set[str] = set()
        self.counters = Cols(COUNTER_COLUMNS)
        self.training = Cols(training.TRAINING_COLUMNS)
        """A row per update of each training run (`tables.training`)."""
        self.training_runs: list[dict[str, Any]] = []
        """Per training run, what its checks read besides its updates (`training.summary`)."""
        self.warnings: list[str] = []
        self.thin: list[ParsedRun] = []
        """Faulted runs too short of samples before the fault for a baseline of their own."""
        self.cacheable = False
        """A complete run's rows, computed from its folder alone: worth keeping (rowcache)."""
        self.spec_run_id: str | None = None
        """Of one folder's rows: the run id its spec.json names (a copied folder names its
        original's: the build counts it once)."""

    def merge(self, other: RunRows) -> None:
        """Append another builder's rows (built over other run folders)."""
        for mine, theirs in (
            (self.results, other.results),
            (self.events, other.events),
            (self.windows, other.windows),
            (self.provenance, other.provenance),
            (self.traffic, other.traffic),
            (self.counters, other.counters),
            (self.training, other.training),
        ):
            for name in mine.names:
                mine.data[name].extend(_shared(theirs.data[name]))
        for f in fields(IterBlocks):
            column = getattr(other.iters, f.name)
            getattr(self.iters, f.name).extend(_shared(column) if f.name != "times" else column)
        self.runs.extend(other.runs)
        self.training_runs.extend(other.training_runs)
        self.env_names |= other.env_names
        self.warnings.extend(other.warnings)
        self.thin.extend(other.thin)

    def parse_folder(self, path: Path, outputs: RunOutputs | None = None) -> None:
        """Parse and add one run folder (an incomplete one only gets its `runs` row, a bad
        record an `invalid` one: the rest of the sweep goes on). `outputs`: what its output
        files say, when they were read already (`analysis.parsedrun.parse_run`)."""
        record = runmodel.load_run(path)
        self.spec_run_id = record.spec_run_id
        if record.problems:
            self.add_invalid(record, record.problems)
        elif record.complete:
            try:
                run = parse_run(record, outputs)
            except runmodel.RecordError as exc:
                self.add_invalid(record, (str(exc),))
                return
            self.add(run)
        else:
            self.add_incomplete(record)

    def add_invalid(self, rec: runmodel.RunRecord, problems: Iterable[str]) -> None:
        """A run whose record cannot be used: an `invalid` row in `runs` saying why, a warning
        per problem, and nothing in the other tables."""
        problems = list(problems)
        self.warnings += [f"{problem}; run skipped" for problem in problems]
        self.add_incomplete(rec)
        self.runs[-1].update(complete=False, outcome=INVALID, reason="; ".join(problems))

    def add(self, run: ParsedRun) -> None:
        """Add a parsed run's rows to every table."""
        rec = run.record
        self._add_results(rec.run_id, run)
        resolution = LINE_STAMP_RESOLUTION if run.stdout_times else LAST_IN_SECOND
        self._add_iterations(rec.run_id, run, resolution)
        self._add_events(rec.run_id, run)
        self._add_faults(rec.run_id, rec.faults)
        self._add_observers(rec)
        self._add_windows(rec.run_id, run)
        for t in run.traffic:
            self.traffic.add(
                rec.run_id, t.iteration, t.size, t.start, t.end, t.node, t.nic, t.tx_bytes,
                t.rx_bytes, t.completed,
            )  # fmt: skip
        self._add_provenance(rec)
        self._add_training(run)
        metrics = recovery.compute(run)
        if recovery.thin_baseline(metrics):
            self.thin.append(run)
        self.cacheable = rec.complete and not self.thin
        self.runs.append(_run_row(self.sweep_dir, run, metrics.columns()))
        self.env_names.update(rec.spec.env.keys())
        for row in counter_rows(run.counter_lines, run.clock.offset):  # controller clock
            self.counters.add(rec.run_id, *row)

    def to_doc(self) -> dict[str, Any]:
        """The rows as plain JSON-able data (tables.rowcache keeps them)."""
        return {
            "sweep": str(self.sweep_dir),
            **{name: getattr(self, name).data for name in _COLUMN_TABLES},
            "iters": {f.name: list(getattr(self.iters, f.name)) for f in fields(IterBlocks)},
            "runs": self.runs,
            "training_runs": self.training_runs,
            "env_names": sorted(self.env_names),
            "warnings": self.warnings,
            "spec_run_id": self.spec_run_id,
        }

    @classmethod
    def from_doc(cls, sweep_dir: Path, doc: dict[str, Any]) -> RunRows | None:
        """Rows kept by `to_doc`; None when the document does not have its shape."""
        try:
            rows = cls(sweep_dir)
            if doc.get("sweep") != str(sweep_dir):
                return None
            for name in _COLUMN_TABLES:
                _fill(getattr(rows, name).data, doc[name])
            _fill(rows.iters.__dict__, doc["iters"])
            rows.runs = [_checked_run_row(row) for row in doc["runs"]]
            rows.training_runs = [training.checked_summary(s) for s in doc["training_runs"]]
            rows.env_names = {str(n) for n in doc["env_names"]}
            rows.warnings = [str(w) for w in doc["warnings"]]
            run_id = doc["spec_run_id"]
        except (KeyError, TypeError, ValueError, AttributeError):
            return None
        if run_id is not None and not (isinstance(run_id, str) and run_id):
            return None
        rows.spec_run_id = run_id
        return rows

    def add_incomplete(self, rec: runmodel.RunRecord) -> None:
        run = empty_run(rec)
        self.runs.append(_run_row(self.sweep_dir, run, recovery.compute(run).columns()))
        self._add_provenance(rec)
        self.env_names.update(rec.spec.env.keys())

    def _add_training(self, run: ParsedRun) -> None:
        """A training run's updates and summary (`tables.training`); its log's unreadable
        lines and repeated updates as warnings."""
        about = training.summary(run)
        if about is None:
            return
        training.add_updates(self.training.data, run)
        self.training_runs.append(about)
        log, where = run.training, self.sweep_dir / run.record.run_id
        if log is not None and log.unreadable:
            self.warnings.append(
                f"{where}: {log.unreadable} #train line(s) of stdout.txt unreadable (cut short, "
                "or a value of another type): left out"
            )
        if log is not None and log.repeated:
            self.warnings.append(
                f"{where}: {log.repeated} update(s) printed more than once in stdout.txt: "
                "each counted once, as first printed"
            )

    def _add_results(self, run_id: str, run: ParsedRun) -> None:
        """Add result rows, each with the time its line was written (controller clock)."""
        add = self.results.add
        for r in run.parsed.rows:
            add(run_id, r.size_bytes, r.count, r.type, r.redop, r.root, r.placement, r.cycle)
            ts = run.row_times[(r.size_bytes, r.placement, r.cycle)][0]
            add(r.time_us, r.algbw_gbps, r.busbw_gbps, r.wrong, ts)
        if run.refused_values:
            self.warnings.append(
                f"{self.sweep_dir / run_id}: {run.refused_values} result values not finite or "
                "negative (time, algbw, busbw or #wrong): left empty, never averaged"
            )

    def _add_iterations(self, run_id: str, run: ParsedRun, resolution: float) -> None:
        """Add the `-J` per-iteration blocks (ends estimated, `block_end_times`), then those
        only the workload's `#iter` lines hold (ends as it logged them)."""
        ends = block_end_times(run, resolution)
        for p in run.parsed.per_iteration:
            self._add_block(run_id, run, p, ends.get(key_of(p), math.nan))
        for logged in run.logged:
            self._add_block(run_id, run, logged.times, logged.end)

    def _add_block(self, run_id: str, run: ParsedRun, p: PerIteration, end: float) -> None:
        blocks, key = self.iters, key_of(p)
        printed = run.row_times.get(key)
        factor = printed[1] if printed else run.bus_factor
        blocks.times.extend(p.times_us)
        blocks.run_id.append(run_id)
        blocks.size_bytes.append(p.size_bytes)
        blocks.placement.append(p.placement)
        blocks.cycle.append(p.cycle)
        blocks.n.append(len(p.times_us))
        blocks.bus_factor.append(math.nan if factor is None else factor)
        blocks.end_time.append(end)
        blocks.row_printed.append(printed is not None)

    def _add_events(self, run_id: str, run: ParsedRun) -> None:
        """Add log events; a line's own stamp put on the controller clock."""
        add = self.events.add
        for source, ev in run.events:
            details = json.dumps(ev.details, sort_keys=True) if ev.details else ""
            when = run.clock.of_event(ev)
            time = when[0] if when else ev.time
            add(
                *EventRow(
                    run_id, source, ev.line, ev.kind.value, time, ev.host, ev.pid, ev.rank,
                    message=ev.message or ev.text, details=details,
                )
            )  # fmt: skip

    def _add_windows(self, run_id: str, run: ParsedRun) -> None:
        evidence = {(e.window.fault, e.window.cycle): e for e in run.evidence}
        job = run.job_end.at if run.job_end else None
        for w in run.windows:
            end, ended_by = w.back, LINK_BACK if w.back is not None else None
            if job is not None and (end is None or job < end):
                end, ended_by = max(job, w.applied), JOB_END
            ev = evidence.get((w.fault, w.cycle))
            facts: tuple[Any, ...] = (None,) * 7
            if ev is not None:
                it = ev.iteration.number if ev.iteration else None
                facts = (
                    ev.verdict.value, ev.before_bytes, ev.live_bytes, ev.after_bytes,
                    ev.after_what, it, ev.line,
                )  # fmt: skip
            self.windows.add(
                run_id, w.fault, w.cycle, w.kind, w.node, w.nic, w.applied, end, *facts,
                w.back, ended_by,
            )  # fmt: skip

    def _add_faults(self, run_id: str, faults: list[runmodel.FaultEvent]) -> None:
        add = self.events.add
        for i, f in enumerate(faults, start=1):
            when = f.on_controller_clock(f.time)
            extra = {"tag": f.tag, **{k: getattr(f, k) for k in _FAULT_TIMES}}
            details = json.dumps({k: v for k, v in extra.items() if v not in (None, "")})
            add(
                *EventRow(
                    run_id, runformat.FAULTS, i, f"fault_{f.action}", when, f.node,
                    message=f"{f.kind} {f.detail}".strip(), fault=f.fault, nic=f.nic, ok=f.ok,
                    details=details, cycle=f.cycle,
                )
            )  # fmt: skip

    def _add_observers(self, rec: runmodel.RunRecord) -> None:
        """An events row per NCCL RAS record of the run: the observer's verdict."""
        for path in rec.node_files():
            if path.name != RAS_FILE:
                continue
            try:
                verdict = ras_verdict(read_text_bounded(path, JSON_RECORD_LIMIT, path.name))
            except (OSError, InputRefused) as exc:
                self.warnings.append(f"{path}: not read ({exc})")
                continue
            source = path.relative_to(rec.path).as_posix()
            self.events.add(
                *EventRow(
                    rec.run_id, source, None, RAS_VERDICT, verdict.first_problem_at,
                    host=path.parent.name, message=verdict.summary, ok=verdict.ok,
                )
            )  # fmt: skip

    def _add_provenance(self, rec: runmodel.RunRecord) -> None:
        """A row per provenance field (dicts and lists as compact JSON), then per variable of
        the job's environment (`env:NAME`); empty values left out."""
        add = self.provenance.add
        for name, value in rec.provenance.items():
            if name == "env" and isinstance(value, dict):
                for var, text in value.items():
                    add(rec.run_id, f"env:{var}", str(text))
            elif value not in (None, "", [], {}):
                text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
                add(rec.run_id, str(name), text)


# --------------------------------------------------------------------------- the runs row


def folder_rows(
    sweep_dir: Path,
    run_dir: Path,
    prints: rowcache.Prints | None,
    keep: bool,
    outputs: RunOutputs | None = None,
) -> RunRows:
    """One run folder's rows, parsed (from `outputs` when its output files were read already),
    and with `keep` kept for the next build (tables.rowcache) when the run is complete and
    its folder still has the fingerprint `prints` it had before."""
    rows = RunRows(sweep_dir)
    rows.parse_folder(run_dir, outputs)
    if keep and rows.cacheable and rowcache.fingerprint(run_dir) == prints:
        rowcache.save(sweep_dir, run_dir, rows.to_doc(), prints)
    return rows


def env_column(name: str) -> str:
    """The column holding an env var: its own name, unless that collides with a fixed column."""
    fixed = {"run_id", *RUN_KEYS, *RESULT_FIELDS, *RESULT_VALUES, "timestamp"}
    return f"env:{name}" if name in fixed else name


def _run_row(sweep_dir: Path, run: ParsedRun, metrics: dict[str, Any]) -> dict[str, Any]:
    rec, spec, end = run.record, run.record.spec, run.record.end
    times = [t for t, _ in run.row_times.values() if t == t]
    outcome = run.outcome
    kind = device_kind(run.parsed)
    row: dict[str, Any] = {
        "run_id": rec.run_id,
        "experiment": spec.experiment,
        "library": spec.library_label,
        "library_ref": spec.library.ref if spec.library else None,
        "library_recipe": spec.library.recipe if spec.library else None,
        "collective": spec.collective or run.parsed.collective,
        "scenario": spec.scenario,
        # the recovery strategy a training run was run with (`recovery:`), None for others
        "recovery": spec.recovery_strategy,
        "repeat": spec.repeat,
        "nodes": ",".join(spec.nodes),
        # MPI ranks (processes): one process driving 8 GPUs (`-g 8`) is 1 rank x 8 GPUs.
        "ranks": run.parsed.processes or run.parsed.ranks,
        "gpus_per_rank": _gpus_per_process(run.parsed) if kind == GPU else None,
        "gpu": "+".join(sorted({d.name for d in run.parsed.devices if d.name})) or None,
        "device_kind": kind,
        "n_nodes": len({d.host for d in run.parsed.devices}) or len(spec.nodes) or None,
        "transport": run.transport,
        "complete": rec.complete,
        "outcome": outcome.status.value if outcome else INCOMPLETE,
        "reason": outcome.reason if outcome else "no COMPLETE marker: the run did not finish",
        "failed_rank": outcome.failed_rank if outcome else None,
        "failed_host": outcome.failed_host if outcome else None,
        "exit_code": end.exit_code if end else None,
        "started_at": end.started_at if end else None,
        "ended_at": end.ended_at if end else None,
        "duration_s": _duration(end),
        "first_result_at": min(times, default=None),
        "last_result_at": max(times, default=None),
        "n_rows": len(run.parsed.rows),
        "avg_busbw_gbps": run.parsed.avg_busbw_gbps,
        "n_faults": len({f.fault for f in rec.faults if f.action == "inject"}),
        "nccl_tests_version": run.parsed.nccl_tests_version,
        "nccl_library": nccl_version_text(run.parsed.nccl_library),
        "library_version": nccl_version_text(run.parsed.nccl_library)
        or (spec.library.ref if spec.library else None),
        "n_warnings": len(run.parsed.warnings),
        "evidence_verdict": ",".join(e.verdict.value for e in run.evidence) or None,
        "evidence": " | ".join(e.line for e in run.evidence) or None,
        "imported_from": rec.provenance.get("imported_from"),
        "library_basis": rec.provenance.get("library_basis"),
        "path": os.path.relpath(rec.path, sweep_dir),
    }
    row.update(metrics)  # detect_s, stall_s, ... (analysis/metrics.py, docs/recovery.md)
    row.update(trial_columns(run, metrics))  # verdict, armed, told, bounds (docs/campaigns.md)
    row["env"] = spec.env
    return row


def device_kind(parsed: ParsedNcclTests) -> str | None:
    """`CPU` when every device the output lists is a CPU (the emulator's `emulated CPU (TCP
    NICs ...)`), `GPU` when it lists others (nccl-tests' and rccl-tests' devices are GPUs),
    None when it lists none."""
    names = [d.name for d in parsed.devices if d.name]
    if not names:
        return None
    return CPU if all(_CPU_DEVICE_RE.search(name) for name in names) else GPU


def _gpus_per_process(parsed: ParsedNcclTests) -> int | None:
    """GPUs one process drives (nccl-tests `-t` threads x `-g` GPUs), from its header."""
    if parsed.n_gpus is None:
        return None
    return (parsed.n_threads or 1) * parsed.n_gpus


def _duration(end: runmodel.RunEnd | None) -> float | None:
    if end is None or end.started_at is None or end.ended_at is None:
        return None
    return end.ended_at - end.started_at


@functools.cache
def run_row_keys() -> tuple[str, ...]:
    """The columns of a runs row (besides the run's env mapping): those of an empty run's row,
    worked out on first use rather than when this module is imported."""
    empty = empty_run(runmodel.RunRecord("", Path(), False, runmodel.SpecFields(), {}, None, []))
    row = _run_row(Path(), empty, recovery.compute(empty).columns())
    return tuple(k for k in row if k != "env")


def __getattr__(name: str) -> Any:
    """`RUN_ROW_KEYS` is `run_row_keys()`, read when first asked for."""
    if name == "RUN_ROW_KEYS":
        return run_row_keys()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
