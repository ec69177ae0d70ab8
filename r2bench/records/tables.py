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
import os
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from r2bench.extras import require_report_extra
from r2bench.records import recovery, rowcache
from r2bench.records import store as st
from r2bench.records.counters import empty_counters, run_counters
from r2bench.records.provenance import nccl_version_text
from r2bench.records.ras import RAS_FILE, ras_verdict
from r2bench.records.run import (
    LAST_IN_SECOND,
    LINE_STAMP_RESOLUTION,
    RESULT_VALUES,
    ParsedNcclTests,
    ParsedRun,
    block_end_times,
    empty_run,
    parse_run,
)
from r2bench.safeio import JSON_RECORD_LIMIT, InputRefused, inside, read_text_bounded

# Tables need the `report` extra (pandas, pyarrow); a module that only parses a run imports
# records.run instead.
try:
    import numpy as np
    import pandas as pd
    import pyarrow as pa
    import pyarrow.csv as pa_csv
except ImportError:  # pragma: no cover - exercised in a subprocess test
    pass

TABLE_NAMES = ("results", "iterations", "events", "runs", "counters", "windows", "provenance")
BUILD_FILE = "BUILD"
"""In the tables folder, written last: what the tables were built from (their build key)."""
OPTIONAL_TABLES = frozenset({"counters", "windows", "provenance"})
"""Tables a tables folder written by an older r2bench may lack (read as empty)."""
MAX_WORKERS = 8
PARALLEL_MIN_RUNS = 64
INCOMPLETE = "incomplete"
INVALID = "invalid"
"""The outcome of a run whose record could not be read (a bad spec.json, result.json, ...)."""
# Per-run columns joined onto `results` (besides the env columns).
RUN_KEYS = ("experiment", "library", "collective", "scenario", "repeat", "outcome")
_RESULT_FIELDS = ("size_bytes", "count", "type", "redop", "root", "placement", "cycle")
_RESULT_VALUES = RESULT_VALUES
EVENT_COLUMNS = (
    *("run_id", "source", "line", "kind", "time", "host", "pid", "rank"),
    *("message", "fault", "nic", "ok", "details", "cycle"),
)
WINDOW_COLUMNS = ("run_id", "fault", "cycle", "kind", "node", "nic", "applied_at", "back_at")
"""One row per fault cycle applied, on the controller clock (`records.run.fault_windows`);
`back_at` empty when the link never came back during the run."""
PROVENANCE_COLUMNS = ("run_id", "field", "value")
"""One row per provenance.json field of a run (`env:NAME` for its job environment)."""
RAS_VERDICT = "ras_verdict"
"""Event kind of an NCCL RAS observer's verdict (`records.ras`): host = the observer's node."""
_FAULT_TIMES = ("planned_at", "requested_at", "applied_at", "verified_at", "clock_offset_s")


# --------------------------------------------------------------------------- accumulation


@dataclass
class _Cols:
    """Named column lists, filled row by row or block by block."""

    names: tuple[str, ...]
    data: dict[str, list[Any]] = field(default_factory=dict)
    _lists: rowcache.Prints | None = field(default_factory=list)
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


_COLUMN_TABLES = ("results", "events", "windows", "provenance")
_SCALARS = (str, int, float, bool, type(None))


def _fill(columns: dict[str, list[Any]], kept: Any) -> None:
    """Put kept column lists into `columns` (same names, equal lengths, scalars only)."""
    if not isinstance(kept, dict) or set(kept) != set(columns):
        raise ValueError("not the columns expected")
    lengths = set()
    for name, values in kept.items():
        if not isinstance(values, list) or not all(type(v) in _SCALARS for v in values):
            raise ValueError(f"column {name}: not a list of plain values")
        lengths.add(len(values))
        columns[name][:] = values
    if len(lengths) > 1 and set(columns) != {f.name for f in fields(_IterBlocks)}:
        raise ValueError("columns of different lengths")


def _checked_run_row(row: Any) -> dict[str, Any]:
    """A kept runs-table row: the keys of `_run_row`, plain values, `env` a flat mapping."""
    if not isinstance(row, dict) or set(row) != set(_RUN_ROW_KEYS) | {"env"}:
        raise ValueError("not a runs-table row")
    env = row["env"]
    if not isinstance(env, dict) or not all(type(v) in _SCALARS for v in env.values()):
        raise ValueError("env: not a flat mapping")
    if not all(type(v) in _SCALARS for k, v in row.items() if k != "env"):
        raise ValueError("not plain values")
    return row


def _counters_frame(columns: Any) -> pd.DataFrame:
    """A kept counters frame, with the table's column types."""
    empty = empty_counters()
    if not isinstance(columns, dict) or set(columns) != set(empty.columns):
        raise ValueError("not the counters columns")
    return pd.DataFrame(columns, columns=list(empty.columns)).astype(empty.dtypes.to_dict())


class _Builder:
    """Accumulates the four tables over parsed runs."""

    def __init__(self, sweep_dir: Path) -> None:
        self.sweep_dir = sweep_dir
        self.results = _Cols(("run_id", *_RESULT_FIELDS, *_RESULT_VALUES, "timestamp"))
        self.events = _Cols(EVENT_COLUMNS)
        self.windows = _Cols(WINDOW_COLUMNS)
        self.provenance = _Cols(PROVENANCE_COLUMNS)
        self.iters = _IterBlocks()
        self.runs: list[dict[str, Any]] = []
        self.env_names: set[str] = set()
        self.counters: list[pd.DataFrame] = []
        self.warnings: list[str] = []
        self.thin: list[ParsedRun] = []
        """Faulted runs too short of samples before the fault for a baseline of their own."""
        self.cacheable = False
        """A complete run's rows, computed from its folder alone: worth keeping (rowcache)."""

    def merge(self, other: _Builder) -> None:
        """Append another builder's rows (built over other run folders)."""
        for mine, theirs in (
            (self.results, other.results),
            (self.events, other.events),
            (self.windows, other.windows),
            (self.provenance, other.provenance),
        ):
            for name in mine.names:
                mine.data[name].extend(theirs.data[name])
        for f in fields(_IterBlocks):
            getattr(self.iters, f.name).extend(getattr(other.iters, f.name))
        self.runs.extend(other.runs)
        self.env_names |= other.env_names
        self.counters.extend(other.counters)
        self.warnings.extend(other.warnings)
        self.thin.extend(other.thin)

    def parse_folder(self, path: Path) -> None:
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
        """Add a parsed run's rows to every table."""
        rec = run.record
        self._add_results(rec.run_id, run)
        resolution = LINE_STAMP_RESOLUTION if run.stdout_times else LAST_IN_SECOND
        self._add_iterations(rec.run_id, run, resolution)
        self._add_events(rec.run_id, run)
        self._add_faults(rec.run_id, rec.faults)
        self._add_observers(rec)
        for w in run.windows:
            self.windows.add(rec.run_id, w.fault, w.cycle, w.kind, w.node, w.nic, w.applied, w.back)
        self._add_provenance(rec)
        metrics = recovery.compute(run)
        if recovery.thin_baseline(metrics):
            self.thin.append(run)
        self.cacheable = rec.complete and not self.thin
        self.runs.append(_run_row(self.sweep_dir, run, metrics.columns()))
        self.env_names.update((rec.spec.get("env") or {}).keys())
        counters = run_counters(rec)
        if counters is not None:  # sampled on each node's clock
            offsets = counters["node"].map(lambda node: run.clock.offset(str(node)))
            counters["time"] = counters["time"] - offsets.astype("float64")
            self.counters.append(counters)

    def to_doc(self) -> dict[str, Any]:
        """The rows as plain JSON-able data (records.rowcache keeps them)."""
        return {
            "sweep": str(self.sweep_dir),
            **{name: getattr(self, name).data for name in _COLUMN_TABLES},
            "iters": {f.name: getattr(self.iters, f.name) for f in fields(_IterBlocks)},
            "runs": self.runs,
            "env_names": sorted(self.env_names),
            "counters": [frame.to_dict("list") for frame in self.counters],
            "warnings": self.warnings,
        }

    def merge_doc(self, doc: dict[str, Any]) -> bool:
        """Add rows kept by `to_doc`; False (nothing added) when they do not have its shape."""
        try:
            other = _Builder(self.sweep_dir)
            if doc.get("sweep") != str(self.sweep_dir):
                return False
            for name in _COLUMN_TABLES:
                _fill(getattr(other, name).data, doc[name])
            _fill(other.iters.__dict__, doc["iters"])
            other.runs = [_checked_run_row(row) for row in doc["runs"]]
            other.env_names = {str(n) for n in doc["env_names"]}
            other.counters = [_counters_frame(c) for c in doc["counters"]]
            other.warnings = [str(w) for w in doc["warnings"]]
        except (KeyError, TypeError, ValueError, AttributeError):
            return False
        self.merge(other)
        return True

    def add_incomplete(self, rec: st.RunRecord) -> None:
        run = empty_run(rec)
        self.runs.append(_run_row(self.sweep_dir, run, recovery.compute(run).columns()))
        self._add_provenance(rec)
        self.env_names.update((rec.spec.get("env") or {}).keys())

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
        blocks = self.iters
        ends = block_end_times(run, resolution)
        for p in run.parsed.per_iteration:
            key = (p.size_bytes, p.placement, p.cycle)
            blocks.times.extend(p.times_us)
            blocks.run_id.append(run_id)
            blocks.size_bytes.append(p.size_bytes)
            blocks.placement.append(p.placement)
            blocks.cycle.append(p.cycle)
            blocks.n.append(len(p.times_us))
            blocks.bus_factor.append(run.row_times.get(key, (np.nan, 1.0))[1])
            blocks.end_time.append(ends.get(key, np.nan))

    def _add_events(self, run_id: str, run: ParsedRun) -> None:
        """Add log events; a line's own stamp put on the controller clock."""
        add = self.events.add
        for source, ev in run.events:
            details = json.dumps(ev.details, sort_keys=True) if ev.details else ""
            when = run.clock.of_event(ev)
            time = when[0] if when else ev.time
            add(run_id, source, ev.line, ev.kind.value, time, ev.host, ev.pid, ev.rank)
            add(ev.message or ev.text, None, None, None, details, None)

    def _add_faults(self, run_id: str, faults: list[st.FaultEvent]) -> None:
        add = self.events.add
        for i, f in enumerate(faults, start=1):
            when = None if f.time is None else f.time - (f.clock_offset_s or 0.0)
            add(run_id, st.FAULTS, i, f"fault_{f.action}", when, f.node, None, None)
            extra = {"tag": f.tag, **{k: getattr(f, k) for k in _FAULT_TIMES}}
            details = json.dumps({k: v for k, v in extra.items() if v not in (None, "")})
            add(f"{f.kind} {f.detail}".strip(), f.fault, f.nic, f.ok, details, f.cycle)

    def _add_observers(self, rec: st.RunRecord) -> None:
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
            self.events.add(rec.run_id, source, None, RAS_VERDICT, verdict.first_problem_at)
            self.events.add(path.parent.name, None, None, verdict.summary, None, None, verdict.ok)
            self.events.add("", None)

    def _add_provenance(self, rec: st.RunRecord) -> None:
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

    def tables(self) -> Tables:
        runs = _runs_frame(self.runs, sorted(self.env_names))
        results = self.results.frame()
        iterations = _iterations_frame(self.iters)
        if self.thin:
            _series_baselines(runs, iterations, results, self.thin)
        results = _join_run_columns(results, runs, sorted(self.env_names))
        return Tables(
            results=results,
            iterations=iterations,
            events=_typed_events(self.events.frame()),
            runs=runs,
            counters=pd.concat(self.counters, ignore_index=True)
            if self.counters
            else empty_counters(),
            windows=_typed_windows(self.windows.frame()),
            provenance=self.provenance.frame(),
            warnings=list(self.warnings),
        )


# --------------------------------------------------------------------------- frames


def env_column(name: str) -> str:
    """The column holding an env var: its own name, unless that collides with a fixed column."""
    fixed = {"run_id", *RUN_KEYS, *_RESULT_FIELDS, *_RESULT_VALUES, "timestamp"}
    return f"env:{name}" if name in fixed else name


def _run_row(sweep_dir: Path, run: ParsedRun, metrics: dict[str, Any]) -> dict[str, Any]:
    rec, spec, end = run.record, run.record.spec, run.record.end
    times = [t for t, _ in run.row_times.values() if t == t]
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
    row.update(metrics)  # detect_s, stall_s, ... (records/metrics.py, docs/recovery.md)
    row["env"] = spec.get("env") or {}
    return row


def _series_baselines(
    runs: pd.DataFrame, iterations: pd.DataFrame, results: pd.DataFrame, thin: list[ParsedRun]
) -> None:
    """Measure each thin run's ratios against the fault-free runs of its series instead (the
    median of their samples per size), in place in `runs`; the basis says so."""
    pools = _fault_free_pools(runs, iterations, results)
    index = {run_id: i for i, run_id in enumerate(runs["run_id"])}
    for run in thin:
        pool = pools.get(recovery.series_key(run.record.spec))
        if not pool:
            continue
        columns = recovery.compute(run, pool, recovery.SERIES_NOTE).columns()
        row = index[run.record.run_id]
        for key, value in columns.items():
            runs.at[row, key] = value


def _fault_free_pools(
    runs: pd.DataFrame, iterations: pd.DataFrame, results: pd.DataFrame
) -> dict[tuple[Any, Any], dict[int, float]]:
    """(library, R2CC_MODE) -> size -> median busbw over the fault-free runs' iterations (or
    result rows, for runs without per-iteration times)."""
    clean = runs[(runs["scenario"] == "none") & (runs["n_faults"] == 0) & runs["complete"]]
    if clean.empty:
        return {}
    ids = set(clean["run_id"])
    its = iterations[iterations["run_id"].isin(ids)]
    with_iters = set(its["run_id"].astype(str))
    rows = results[results["run_id"].isin(ids - with_iters) & (results["placement"] != "")]
    samples = pd.concat(
        [
            its[["run_id", "size_bytes", "busbw_gbps"]].astype({"run_id": str}),
            rows[["run_id", "size_bytes", "busbw_gbps"]],
        ]
    )
    mode = clean["R2CC_MODE"] if "R2CC_MODE" in clean else pd.Series(None, index=clean.index)
    series = clean[["run_id", "library"]].assign(mode=mode.astype("string").fillna("-"))
    keyed = samples.merge(series, on="run_id")
    out: dict[tuple[Any, Any], dict[int, float]] = {}
    for (lib, mode, size), values in keyed.groupby(["library", "mode", "size_bytes"], dropna=False)[
        "busbw_gbps"
    ]:
        values = values.dropna()
        if len(values) >= recovery.MIN_BASELINE:
            key = (lib, None if mode == "-" else str(mode))
            out.setdefault(key, {})[int(size)] = float(values.median())
    return out


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
    empty = empty_run(st.RunRecord("", Path(), False, {}, {}, None, []))
    return list(_run_row(Path(), empty, recovery.compute(empty).columns()))


_RUN_ROW_KEYS = tuple(k for k in _run_row_keys() if k != "env")


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


def _typed_windows(frame: pd.DataFrame) -> pd.DataFrame:
    for name in ("fault", "cycle"):
        frame[name] = frame[name].astype("int64")
    for name in ("applied_at", "back_at"):
        frame[name] = frame[name].astype("float64")
    return frame


def empty_windows() -> pd.DataFrame:
    """The windows table of a sweep without faults (or of tables written before it existed)."""
    return _typed_windows(pd.DataFrame({name: [] for name in WINDOW_COLUMNS}))


def empty_provenance() -> pd.DataFrame:
    """The provenance table with no rows."""
    return pd.DataFrame({name: pd.Series([], dtype=object) for name in PROVENANCE_COLUMNS})


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
    windows: pd.DataFrame = field(default_factory=empty_windows)
    provenance: pd.DataFrame = field(default_factory=empty_provenance)
    warnings: list[str] = field(default_factory=list)
    """Runs skipped or counted once, values left out: one line each, naming file and field."""
    build_key: str = ""
    """What the tables were built from (records.rowcache.build_key); empty when unknown."""

    def items(self) -> list[tuple[str, pd.DataFrame]]:
        """(name, frame) pairs in TABLE_NAMES order."""
        return [(name, getattr(self, name)) for name in TABLE_NAMES]


def build_tables(sweep_dir: Path, workers: int | None = None, keep: bool = False) -> Tables:
    """The tables of a sweep: each run folder's rows, kept from an earlier build while the
    folder is unchanged (records.rowcache), else parsed (and, with `keep`, kept for the next
    build: `rebuild` keeps them beside the tables it writes).

    Many runs to parse are parsed by `workers` processes (default: one per CPU, at most 8);
    rows keep folder order.
    """
    require_report_extra("tables")
    sweep_dir = Path(sweep_dir)
    store = st.RunStore.at(sweep_dir)
    paths, warnings = distinct_runs(list(store.run_dirs()))
    notes = [*store.links_out(), *warnings]
    prints = {path: rowcache.fingerprint(path) for path in paths}
    kept = {path: rowcache.load(sweep_dir, path, prints[path]) for path in paths}
    missing = [path for path in paths if kept[path] is None]
    jobs = [(path, prints[path]) for path in missing]
    parsed = dict(zip(missing, _parse_all(sweep_dir, jobs, workers, keep), strict=True))
    builder = _Builder(sweep_dir)
    builder.warnings += notes
    for path in paths:
        doc = kept[path]
        if doc is None or not builder.merge_doc(doc):
            builder.merge(parsed.get(path) or _parse_one(sweep_dir, (path, None), False))
    tables = builder.tables()
    tables.build_key = rowcache.build_key(sweep_dir, prints, notes)
    return tables


def _parse_one(
    sweep_dir: Path, job: tuple[Path, rowcache.Prints | None], keep: bool
) -> _Builder:
    """One run folder's rows, parsed (and, with `keep`, kept when the run is complete and
    did not change while it was parsed)."""
    path, prints = job
    one = _Builder(sweep_dir)
    one.parse_folder(path)
    if keep and one.cacheable and rowcache.fingerprint(path) == prints:
        rowcache.save(sweep_dir, path, one.to_doc(), prints)
    return one


def _parse_all(
    sweep_dir: Path,
    jobs: list[tuple[Path, rowcache.Prints | None]],
    workers: int | None,
    keep: bool,
) -> list[_Builder]:
    workers = min(workers or os.cpu_count() or 1, MAX_WORKERS)
    if workers < 2 or len(jobs) < PARALLEL_MIN_RUNS:
        return [_parse_one(sweep_dir, job, keep) for job in jobs]
    chunk = max(1, len(jobs) // (workers * 4))
    n = len(jobs)
    with ProcessPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(_parse_one, [sweep_dir] * n, jobs, [keep] * n, chunksize=chunk))


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
    paths = [out_dir / f"{name}.{ext}" for name in TABLE_NAMES for ext in ("parquet", "csv")]
    if tables.build_key and _written_from(out_dir, tables.build_key, paths):
        return paths  # the same runs and code as last time: the same tables are there
    build = out_dir / BUILD_FILE
    if build.is_file() and not build.is_symlink():
        build.unlink()  # a build cut short never looks complete
    for name, frame in tables.items():
        arrow = pa.Table.from_pandas(frame, preserve_index=False)
        _write_atomic(out_dir / f"{name}.parquet", arrow, "parquet", root)
        _write_atomic(out_dir / f"{name}.csv", arrow, "csv", root)
    if tables.build_key:
        files = {p.name: _stamp(p) for p in paths}
        st.atomic_write(build, json.dumps({"key": tables.build_key, "files": files}), root)
    return paths


def _stamp(path: Path) -> list[int]:
    info = path.stat()
    return [info.st_size, info.st_mtime_ns]


def _written_from(out_dir: Path, key: str, paths: list[Path]) -> bool:
    """Whether `out_dir` holds tables built from `key`, every file as it was written."""
    build = out_dir / BUILD_FILE
    try:
        if build.is_symlink():
            return False
        doc = json.loads(read_text_bounded(build, JSON_RECORD_LIMIT, BUILD_FILE))
        files = doc["files"]
        return doc["key"] == key and all(
            not p.is_symlink() and files.get(p.name) == _stamp(p) for p in paths
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError, InputRefused):
        return False


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
        if (out_dir / f"{name}.parquet").exists() or name not in OPTIONAL_TABLES
    }
    return Tables(**frames)


def rebuild(sweep_dir: Path) -> Tables:
    """Build the tables of a sweep and write them under `<sweep>/tables/`."""
    tables = build_tables(sweep_dir, keep=True)
    write_tables(tables, Path(sweep_dir) / st.TABLES_DIR, Path(sweep_dir))
    return tables
