"""Tidy tables derived from run folders (and only from them: rebuild them at any time).

- `results`: one row per run x size x placement x cycle (nccl-tests result lines)
- `iterations`: one row per timed iteration (`-I 1` per-iteration times from `-J`), with an
  estimated epoch timestamp when the run printed `-S 1` timestamps
- `events`: one row per log event and per fault event (inject/revert/...)
- `runs`: one row per run folder (complete or not): outcome, reason, failed rank/host, times
- `counters`: one row per node x NIC x counter sample (`records.counters`)

`build_tables(sweep_dir)` parses every run once, accumulates plain column lists and makes one
DataFrame per table at the end; per-run settings (experiment, library, env columns such as
R2CC_MODE, scenario, repeat, outcome) are joined onto `results` from `runs` in one merge.
`write_tables` stores each table as Parquet and CSV under `results/<sweep>/tables/`.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, fields
from datetime import timezone
from pathlib import Path
from typing import Any

from r2bench.extras import require_report_extra
from r2bench.records import store as st
from r2bench.records.counters import empty_counters, run_counters
from r2bench.records.events import parse_events
from r2bench.records.models import Event, Outcome, ParsedNcclTests, ResultRow
from r2bench.records.nccltests import combine, parse_json, parse_text
from r2bench.records.outcome import classify, software_fault_check
from r2bench.records.provenance import nccl_version_text
from r2bench.safeio import JSON_RECORD_LIMIT, InputRefused, inside, read_text_bounded

# Tables need the `report` extra (pandas, pyarrow); parsing a run (parse_outputs, log_events,
# parse_run) does not, so the sweep imports this module on a node without them.
try:
    import numpy as np
    import pandas as pd
    import pyarrow as pa
    import pyarrow.csv as pa_csv
except ImportError:  # pragma: no cover - exercised in a subprocess test
    pass

TABLE_NAMES = ("results", "iterations", "events", "runs", "counters")
MAX_WORKERS = 8
PARALLEL_MIN_RUNS = 64
LAST_IN_SECOND = 0.999  # a row stamped ts ended before ts + 1
LINE_STAMP_RESOLUTION = 0.001  # a row stamped when its line was written ended just before
INCOMPLETE = "incomplete"
INVALID = "invalid"
"""The outcome of a run whose record could not be read (a bad spec.json, result.json, ...)."""
# Per-run columns joined onto `results` (besides the env columns).
RUN_KEYS = ("experiment", "library", "collective", "scenario", "repeat", "outcome")
_RESULT_FIELDS = ("size_bytes", "count", "type", "redop", "root", "placement", "cycle")
_RESULT_VALUES = ("time_us", "algbw_gbps", "busbw_gbps", "wrong")
EVENT_COLUMNS = (
    *("run_id", "source", "line", "kind", "time", "host", "pid", "rank"),
    *("message", "fault", "nic", "ok", "details", "cycle"),
)
# `via NET/Socket/0`, `via P2P/CUMEM`, `via SHM/direct/direct`: NCCL INFO channel set-up lines.
_VIA_RE = re.compile(rb"\] via ([A-Za-z][A-Za-z0-9_]*(?:/[A-Za-z][A-Za-z0-9_]*)?)")
_FAULT_TIMES = ("planned_at", "requested_at", "applied_at", "verified_at", "clock_offset_s")


# --------------------------------------------------------------------------- parsing a run


def parse_outputs(
    text_path: Path | None, json_path: Path | None, collective: str | None = None
) -> ParsedNcclTests:
    """nccl-tests results of a run from its text output and/or -J JSON (either may be None)."""
    text = _parse_text_file(text_path, collective) if text_path else None
    js = _parse_json_file(json_path) if json_path else None
    if text is not None and js is not None:
        return combine(text, js)
    return text or js or ParsedNcclTests()


def _parse_json_file(path: Path) -> ParsedNcclTests:
    """A `-J` file, size-capped; too deep a nesting is a RecordError naming the file (a file
    cut short is no error: its complete results are salvaged)."""
    try:
        text = read_text_bounded(path, JSON_RECORD_LIMIT, path.name)
    except InputRefused as exc:
        raise st.RecordError(str(exc)) from None
    try:
        return parse_json(text)
    except RecursionError:
        raise st.RecordError(f"{path}: nested too deeply to read") from None
    except (ValueError, TypeError, OverflowError, KeyError, IndexError) as exc:
        # a value of a type or size the file cannot mean: this run only, never the sweep
        raise st.RecordError(f"{path}: a value it cannot hold ({exc})") from None


def _parse_text_file(path: Path, collective: str | None) -> ParsedNcclTests:
    binary = f"{collective}_perf" if collective else None
    with path.open("rb") as handle:
        return parse_text(handle, binary_name=binary)


def log_events(paths: Iterable[Path]) -> list[tuple[str, Event]]:
    """(source file name, event) of every log, streamed line by line."""
    out: list[tuple[str, Event]] = []
    for path in paths:
        with path.open("rb") as handle:
            out.extend((path.name, ev) for ev in parse_events(handle))
    return out


def transport_of(paths: Iterable[Path]) -> str:
    """The transports NCCL said it set up (`... via NET/Socket/0`, `via P2P/CUMEM`), as
    `NET/Socket`, `NET/IB`, `P2P`, `SHM` joined by `+`; empty when no such line was logged
    (NCCL_DEBUG=INFO prints them)."""
    found: set[str] = set()
    for path in paths:
        with path.open("rb") as handle:
            for line in handle:
                if b"] via " not in line:
                    continue
                for match in _VIA_RE.finditer(line):
                    name = match.group(1).decode("ascii", "replace")
                    head, _, sub = name.partition("/")
                    found.add(f"{head}/{sub}" if head == "NET" and sub else head)
    return "+".join(sorted(found))


@dataclass
class ParsedRun:
    """One run folder, parsed once: results, events, outcome and transport."""

    record: st.RunRecord
    parsed: ParsedNcclTests
    events: list[tuple[str, Event]]
    outcome: Outcome | None
    transport: str = ""


def parse_run(record: st.RunRecord) -> ParsedRun:
    """Parse a run folder's outputs; the outcome is classified again when outcome.json is
    missing (an incomplete run keeps None)."""
    collective = record.spec.get("collective")
    parsed = parse_outputs(record.file(st.STDOUT), record.file(st.RESULT_JSON), collective)
    if record.file(st.EVENTS):
        events = [(st.EVENTS, ev) for ev in record.events()]
    else:
        events = log_events(p for p in (record.file(st.STDOUT), record.file(st.STDERR)) if p)
    outcome = record.end.outcome if record.end else None
    if outcome is None and record.complete:
        found = [e for _, e in events]
        env = {k: str(v) for k, v in (record.spec.get("env") or {}).items()}
        outcome = software_fault_check(classify(None, parsed=parsed, events=found), env, found)
    logs = [p for p in (record.file(st.STDOUT), record.file(st.STDERR)) if p]
    return ParsedRun(record, parsed, events, outcome, transport_of(logs))


# --------------------------------------------------------------------------- accumulation


@dataclass
class _Cols:
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

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame(self.data, columns=list(self.names))


@dataclass
class _IterBlocks:
    """Per-iteration times: one flat list of times plus per-block columns (np.repeat later)."""

    times: list[float] = field(default_factory=list)
    run_id: list[str] = field(default_factory=list)
    size_bytes: list[int] = field(default_factory=list)
    placement: list[str] = field(default_factory=list)
    cycle: list[int] = field(default_factory=list)
    n: list[int] = field(default_factory=list)
    bus_factor: list[float] = field(default_factory=list)
    end_time: list[float] = field(default_factory=list)


def _block_end_times(
    parsed: ParsedNcclTests,
    row_times: dict[tuple[int, str, int], tuple[float, float]],
    span: tuple[float | None, float | None],
    resolution: float = LAST_IN_SECOND,
) -> dict[tuple[int, str, int], float]:
    """Estimated epoch end of each per-iteration block.

    `-S 1` stamps have one-second resolution and are printed when a row (out-of-place, then
    in-place iterations) ends, so a row ends in [ts, ts + 1). Summed iteration times bound it
    further: a forward pass from the launch gives the earliest possible end of every row, a
    backward pass from the job's end the latest; the estimate is the middle of the two.
    """
    totals: dict[tuple[int, str, int], float] = {
        (p.size_bytes, p.placement, p.cycle): sum(p.times_us) / 1e6 for p in parsed.per_iteration
    }
    rows = []  # (in-place key, row time, in-place time, printed second)
    for r in parsed.rows:
        ts = row_times[(r.size_bytes, r.placement, r.cycle)][0]
        if r.placement == "in_place" and ts == ts:
            oop, inp = (r.size_bytes, "out_of_place", r.cycle), (r.size_bytes, "in_place", r.cycle)
            rows.append(
                (inp, totals.get(oop, 0.0) + totals.get(inp, 0.0), totals.get(inp, 0.0), ts)
            )
    earliest, latest = _row_bounds(rows, span, resolution)
    ends: dict[tuple[int, str, int], float] = {}
    for (inp, _, t_in, _), lo, hi in zip(rows, earliest, latest, strict=True):
        end = (lo + hi) / 2 if lo <= hi else lo
        ends[inp] = end
        ends[(inp[0], "out_of_place", inp[2])] = end - t_in
    return ends


def _row_bounds(
    rows: list[tuple[Any, float, float, float]],
    span: tuple[float | None, float | None],
    resolution: float,
) -> tuple[list[float], list[float]]:
    """Earliest and latest end of each row, from its stamp (a row ends in [ts, ts + resolution])
    and the rows around it."""
    earliest, latest = [], []
    clock = -np.inf if span[0] is None else span[0]
    for _, total, _, ts in rows:
        clock = min(max(clock + total, ts), ts + resolution)
        earliest.append(clock)
    clock = np.inf if span[1] is None else span[1]
    next_total = 0.0
    for _, total, _, ts in reversed(rows):
        clock = max(min(clock - next_total, ts + resolution), ts)
        latest.append(clock)
        next_total = total
    return earliest, latest[::-1]


def line_times(record: st.RunRecord) -> list[float] | None:
    """The node time of every stdout line (a sweep's `stdout.times`), or None."""
    path = record.file(st.STDOUT_TIMES)
    if path is None:
        return None
    try:
        return [float(x) for x in path.read_text().split()]
    except (OSError, ValueError):
        return None


def _checked_row(row: ResultRow) -> tuple[ResultRow, int]:
    """The row with values no measurement can have (NaN, infinite, negative) emptied, and how
    many there were: a figure or a comparison must not average them."""
    bad = {
        name: None
        for name in (*_RESULT_VALUES, "iter_min_us", "iter_max_us", "iter_p99_us")
        if (value := getattr(row, name, None)) is not None
        and not (math.isfinite(value) and value >= 0)
    }
    return (row.model_copy(update=bad), len(bad)) if bad else (row, 0)


def _epoch(row_ts: Any, offset_s: float) -> float:
    if row_ts is None:
        return float("nan")
    return float(row_ts.replace(tzinfo=timezone.utc).timestamp() - offset_s)


class _Builder:
    """Accumulates the four tables over parsed runs."""

    def __init__(self, sweep_dir: Path) -> None:
        self.sweep_dir = sweep_dir
        self.results = _Cols(("run_id", *_RESULT_FIELDS, *_RESULT_VALUES, "timestamp"))
        self.events = _Cols(EVENT_COLUMNS)
        self.iters = _IterBlocks()
        self.runs: list[dict[str, Any]] = []
        self.env_names: set[str] = set()
        self.counters: list[pd.DataFrame] = []
        self.warnings: list[str] = []

    def merge(self, other: _Builder) -> None:
        """Append another builder's rows (built over other run folders)."""
        for mine, theirs in ((self.results, other.results), (self.events, other.events)):
            for name in mine.names:
                mine.data[name].extend(theirs.data[name])
        for f in fields(_IterBlocks):
            getattr(self.iters, f.name).extend(getattr(other.iters, f.name))
        self.runs.extend(other.runs)
        self.env_names |= other.env_names
        self.counters.extend(other.counters)
        self.warnings.extend(other.warnings)

    def add_folder(self, path: Path) -> None:
        """Parse and add one run folder (an incomplete one only gets its `runs` row, a bad
        record an `invalid` one: the rest of the sweep goes on)."""
        record = st.load_run(path)
        if record.problems:
            self.add_invalid(record, record.problems)
        elif record.complete:
            try:
                run = parse_run(record)
            except st.RecordError as exc:
                self.add_invalid(record, (str(exc),))
                return
            self.add(run)
        else:
            self.add_incomplete(record)

    def add_invalid(self, rec: st.RunRecord, problems: Iterable[str]) -> None:
        """A run whose record cannot be used: an `invalid` row in `runs` saying why, a warning
        per problem, and nothing in the other tables."""
        problems = list(problems)
        self.warnings += [f"{problem}; run skipped" for problem in problems]
        self.add_incomplete(rec)
        self.runs[-1].update(complete=False, outcome=INVALID, reason="; ".join(problems))

    def add(self, run: ParsedRun) -> None:
        rec = run.record
        offset = float(rec.provenance.get("node_utc_offset_s") or 0.0)
        stamps = line_times(rec)
        row_times = self._add_results(rec.run_id, run.parsed, offset, stamps)
        span = (rec.end.started_at, rec.end.ended_at) if rec.end else (None, None)
        resolution = LINE_STAMP_RESOLUTION if stamps else LAST_IN_SECOND
        self._add_iterations(rec.run_id, run.parsed, row_times, span, resolution)
        self._add_events(rec.run_id, run.events)
        self._add_faults(rec.run_id, rec.faults)
        self.runs.append(_run_row(self.sweep_dir, run, row_times))
        self.env_names.update((rec.spec.get("env") or {}).keys())
        self.counters.extend(c for c in [run_counters(rec)] if c is not None)

    def add_incomplete(self, rec: st.RunRecord) -> None:
        run = ParsedRun(rec, ParsedNcclTests(), [], None)
        self.runs.append(_run_row(self.sweep_dir, run, {}))
        self.env_names.update((rec.spec.get("env") or {}).keys())

    def _add_results(
        self, run_id: str, parsed: ParsedNcclTests, offset: float, stamps: list[float] | None
    ) -> dict[tuple[int, str, int], tuple[float, float]]:
        """Add result rows; returns (size, placement, cycle) -> (epoch time, bus factor).

        A row's time is when its line was written (a sweep's `stdout.times`), else its `-S`
        stamp."""
        row_times: dict[tuple[int, str, int], tuple[float, float]] = {}
        add = self.results.add
        refused = 0
        for r in parsed.rows:
            r, bad = _checked_row(r)
            refused += bad
            if stamps and r.line and r.line <= len(stamps):
                ts = stamps[r.line - 1]
            else:
                ts = _epoch(r.timestamp, offset)
            add(run_id, r.size_bytes, r.count, r.type, r.redop, r.root, r.placement, r.cycle)
            add(r.time_us, r.algbw_gbps, r.busbw_gbps, r.wrong, ts)
            factor = (r.busbw_gbps / r.algbw_gbps) if r.busbw_gbps and r.algbw_gbps else 1.0
            row_times[(r.size_bytes, r.placement, r.cycle)] = (ts, factor)
        if refused:
            self.warnings.append(
                f"{self.sweep_dir / run_id}: {refused} result values not finite or negative "
                "(time, algbw, busbw or #wrong): left empty, never averaged"
            )
        return row_times

    def _add_iterations(
        self,
        run_id: str,
        parsed: ParsedNcclTests,
        row_times: dict[tuple[int, str, int], tuple[float, float]],
        span: tuple[float | None, float | None],
        resolution: float,
    ) -> None:
        blocks = self.iters
        ends = _block_end_times(parsed, row_times, span, resolution)
        for p in parsed.per_iteration:
            key = (p.size_bytes, p.placement, p.cycle)
            blocks.times.extend(p.times_us)
            blocks.run_id.append(run_id)
            blocks.size_bytes.append(p.size_bytes)
            blocks.placement.append(p.placement)
            blocks.cycle.append(p.cycle)
            blocks.n.append(len(p.times_us))
            blocks.bus_factor.append(row_times.get(key, (np.nan, 1.0))[1])
            blocks.end_time.append(ends.get(key, np.nan))

    def _add_events(self, run_id: str, events: list[tuple[str, Event]]) -> None:
        add = self.events.add
        for source, ev in events:
            details = json.dumps(ev.details, sort_keys=True) if ev.details else ""
            add(run_id, source, ev.line, ev.kind.value, ev.time, ev.host, ev.pid, ev.rank)
            add(ev.message or ev.text, None, None, None, details, None)

    def _add_faults(self, run_id: str, faults: list[st.FaultEvent]) -> None:
        add = self.events.add
        for i, f in enumerate(faults, start=1):
            add(run_id, st.FAULTS, i, f"fault_{f.action}", f.time, f.node, None, None)
            extra = {"tag": f.tag, **{k: getattr(f, k) for k in _FAULT_TIMES}}
            details = json.dumps({k: v for k, v in extra.items() if v not in (None, "")})
            add(f"{f.kind} {f.detail}".strip(), f.fault, f.nic, f.ok, details, f.cycle)

    def tables(self) -> Tables:
        runs = _runs_frame(self.runs, sorted(self.env_names))
        results = self.results.frame()
        results = _join_run_columns(results, runs, sorted(self.env_names))
        return Tables(
            results=results,
            iterations=_iterations_frame(self.iters),
            events=_typed_events(self.events.frame()),
            runs=runs,
            counters=pd.concat(self.counters, ignore_index=True)
            if self.counters
            else empty_counters(),
            warnings=list(self.warnings),
        )


# --------------------------------------------------------------------------- frames


def env_column(name: str) -> str:
    """The column holding an env var: its own name, unless that collides with a fixed column."""
    fixed = {"run_id", *RUN_KEYS, *_RESULT_FIELDS, *_RESULT_VALUES, "timestamp"}
    return f"env:{name}" if name in fixed else name


def _run_row(
    sweep_dir: Path, run: ParsedRun, row_times: dict[tuple[int, str, int], tuple[float, float]]
) -> dict[str, Any]:
    from r2bench.records.recovery import recovery_columns  # it imports this module

    rec, spec, end = run.record, run.record.spec, run.record.end
    times = [t for t, _ in row_times.values() if t == t]
    outcome = run.outcome
    row: dict[str, Any] = {
        "run_id": rec.run_id,
        "experiment": spec.get("experiment"),
        "library": spec.get("library_label"),
        "library_ref": (spec.get("library") or {}).get("ref"),
        "library_recipe": (spec.get("library") or {}).get("recipe"),
        "collective": spec.get("collective") or run.parsed.collective,
        "scenario": spec.get("scenario"),
        "repeat": spec.get("repeat"),
        "nodes": ",".join(spec.get("nodes") or []),
        # MPI ranks (processes): one process driving 8 GPUs (`-g 8`) is 1 rank x 8 GPUs.
        "ranks": run.parsed.processes or run.parsed.ranks,
        "gpus_per_rank": _gpus_per_process(run.parsed),
        "gpu": "+".join(sorted({d.name for d in run.parsed.devices if d.name})) or None,
        "n_nodes": len({d.host for d in run.parsed.devices})
        or len(spec.get("nodes") or [])
        or None,
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
        or (spec.get("library") or {}).get("ref"),
        "n_warnings": len(run.parsed.warnings),
        "imported_from": rec.provenance.get("imported_from"),
        "library_basis": rec.provenance.get("library_basis"),
        "path": os.path.relpath(rec.path, sweep_dir),
    }
    row.update(recovery_columns(run))  # detect_s, stall_s, ... (docs/recovery.md)
    row["env"] = spec.get("env") or {}
    return row


def _gpus_per_process(parsed: ParsedNcclTests) -> int | None:
    """GPUs one process drives (nccl-tests `-t` threads x `-g` GPUs), from its header."""
    if parsed.n_gpus is None:
        return None
    return (parsed.n_threads or 1) * parsed.n_gpus


def _duration(end: st.RunEnd | None) -> float | None:
    if end is None or end.started_at is None or end.ended_at is None:
        return None
    return end.ended_at - end.started_at


def _runs_frame(rows: list[dict[str, Any]], env_names: list[str]) -> pd.DataFrame:
    cols: dict[str, list[Any]] = {}
    keys = [k for k in (rows[0] if rows else _run_row_keys()) if k != "env"]
    for key in keys:
        cols[key] = [r[key] for r in rows]
    for name in env_names:
        cols[env_column(name)] = [r["env"].get(name) for r in rows]
    frame = pd.DataFrame(cols)
    for name in ("repeat", "ranks", "gpus_per_rank", "n_nodes", "failed_rank", "exit_code"):
        frame[name] = frame[name].astype("Int64")
    return frame


def _run_row_keys() -> list[str]:
    empty = ParsedRun(
        st.RunRecord("", Path(), False, {}, {}, None, []), ParsedNcclTests(), [], None
    )
    return list(_run_row(Path(), empty, {}))


def _join_run_columns(results: pd.DataFrame, runs: pd.DataFrame, env: list[str]) -> pd.DataFrame:
    """Put the per-run columns (experiment, library, env, scenario, ...) onto every result row."""
    keys = ["run_id", *RUN_KEYS[:3], *(env_column(n) for n in env), *RUN_KEYS[3:]]
    merged = results.merge(runs[keys], on="run_id", how="left", sort=False)
    order = [*keys, *(c for c in results.columns if c != "run_id")]
    merged = merged[order]
    merged["wrong"] = merged["wrong"].astype("Int64")
    return merged


def _iterations_frame(b: _IterBlocks) -> pd.DataFrame:
    n = np.asarray(b.n, dtype=np.int64)
    times = np.asarray(b.times, dtype=np.float64)
    size = np.repeat(np.asarray(b.size_bytes, dtype=np.int64), n)
    factor = np.repeat(np.asarray(b.bus_factor, dtype=np.float64), n)
    starts = np.cumsum(n) - n
    index = np.arange(len(times), dtype=np.int64) - np.repeat(starts, n)
    csum = np.cumsum(times)
    block_end = np.repeat(np.cumsum(n) - 1, n)
    after_us = csum[block_end] - csum if len(times) else csum
    with np.errstate(divide="ignore", invalid="ignore"):
        busbw = np.where(times > 0, size / (times * 1e3) * factor, np.nan)
    return pd.DataFrame(
        {
            "run_id": pd.Categorical(np.repeat(np.asarray(b.run_id, dtype=object), n)),
            "size_bytes": size,
            "placement": pd.Categorical(np.repeat(np.asarray(b.placement, dtype=object), n)),
            "cycle": np.repeat(np.asarray(b.cycle, dtype=np.int64), n),
            "iteration": index,
            "time_us": times,
            "busbw_gbps": busbw,
            "timestamp": np.repeat(np.asarray(b.end_time, dtype=np.float64), n) - after_us / 1e6,
        }
    )


def _typed_events(frame: pd.DataFrame) -> pd.DataFrame:
    for name in ("line", "pid", "rank", "fault", "cycle"):
        frame[name] = frame[name].astype("Int64")
    frame["time"] = frame["time"].astype("float64")
    frame["ok"] = frame["ok"].astype("boolean")
    return frame


# --------------------------------------------------------------------------- public API


@dataclass
class Tables:
    """The tidy tables of a sweep."""

    results: pd.DataFrame
    iterations: pd.DataFrame
    events: pd.DataFrame
    runs: pd.DataFrame
    counters: pd.DataFrame = field(default_factory=empty_counters)
    warnings: list[str] = field(default_factory=list)
    """Runs skipped or counted once, values left out: one line each, naming file and field."""

    def items(self) -> list[tuple[str, pd.DataFrame]]:
        """(name, frame) pairs in TABLE_NAMES order."""
        return [(name, getattr(self, name)) for name in TABLE_NAMES]


def _build_chunk(sweep_dir: Path, paths: list[Path]) -> _Builder:
    builder = _Builder(sweep_dir)
    for path in paths:
        builder.add_folder(path)
    return builder


def build_tables(sweep_dir: Path, workers: int | None = None) -> Tables:
    """Parse every run folder of a sweep once and build the four tables.

    Large sweeps are parsed by `workers` processes (default: one per CPU, at most 8), each
    returning plain column lists for its share of the folders; rows keep folder order.
    """
    require_report_extra("tables")
    sweep_dir = Path(sweep_dir)
    store = st.RunStore.at(sweep_dir)
    paths, warnings = distinct_runs(list(store.run_dirs()))
    warnings = [*store.links_out(), *warnings]
    workers = min(workers or os.cpu_count() or 1, MAX_WORKERS)
    if workers < 2 or len(paths) < PARALLEL_MIN_RUNS:
        builder = _build_chunk(sweep_dir, paths)
        builder.warnings[:0] = warnings
        return builder.tables()
    size = max(1, len(paths) // (workers * 4))
    chunks = [paths[i : i + size] for i in range(0, len(paths), size)]
    builder = _Builder(sweep_dir)
    builder.warnings += warnings
    with ProcessPoolExecutor(max_workers=workers) as pool:
        for part in pool.map(_build_chunk, [sweep_dir] * len(chunks), chunks):
            builder.merge(part)
    return builder.tables()


def distinct_runs(paths: list[Path]) -> tuple[list[Path], list[str]]:
    """The run folders with each run id once (a copied folder holds the same spec.json run id
    under another name), and a warning per folder left out. The attempts a resumed sweep moved
    aside share their run's id by design and are kept."""
    seen: dict[str, Path] = {}
    kept, warnings = [], []
    for path in paths:
        run_id = None if st.is_moved_aside(path.name) else st.spec_run_id(path)
        first = seen.setdefault(run_id, path) if run_id else path
        if first is path:
            kept.append(path)
        else:
            warnings.append(
                f"{path}: the same run id as {first.name} (spec.json run_id {run_id}); counted once"
            )
    return kept, warnings


def write_tables(tables: Tables, out_dir: Path, root: Path | None = None) -> list[Path]:
    """Write each table as `<name>.parquet` and `<name>.csv` (atomically); returns the paths.
    With `root` (the sweep folder), `out_dir` must stay under it once links are followed
    (OutsideFolder otherwise); a link at a table's path is replaced, never written through."""
    require_report_extra("tables")
    if root is not None:
        inside(root, out_dir)
    written = []
    for name, frame in tables.items():
        arrow = pa.Table.from_pandas(frame, preserve_index=False)
        written.append(_write_atomic(out_dir / f"{name}.parquet", arrow, "parquet", root))
        written.append(_write_atomic(out_dir / f"{name}.csv", arrow, "csv", root))
    return written


def _write_atomic(path: Path, table: pa.Table, fmt: str, root: Path | None) -> Path:
    buffer = pa.BufferOutputStream()
    if fmt == "parquet":
        import pyarrow.parquet as pq

        pq.write_table(table, buffer)
    else:
        pa_csv.write_csv(table, buffer)
    st.atomic_write(path, buffer.getvalue().to_pybytes(), root)
    return path


def read_tables(out_dir: Path) -> Tables:
    """Read tables written by `write_tables` (Parquet)."""
    require_report_extra("tables")
    frames = {
        name: pd.read_parquet(out_dir / f"{name}.parquet")
        for name in TABLE_NAMES
        if (out_dir / f"{name}.parquet").exists() or name != "counters"
    }
    return Tables(**frames)


def rebuild(sweep_dir: Path) -> Tables:
    """Build the tables of a sweep and write them under `<sweep>/tables/`."""
    tables = build_tables(sweep_dir)
    write_tables(tables, Path(sweep_dir) / st.TABLES_DIR, Path(sweep_dir))
    return tables
