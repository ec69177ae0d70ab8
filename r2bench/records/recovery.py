"""Recovery metrics of a faulted run, computed from its run folder alone (pure: reads files).

Per run (docs/recovery.md says exactly how each is computed and at what resolution):

- `detect_s`: fault applied -> first log line of the library's reaction;
- `stall_s`: the longest gap without a completed iteration around the fault;
- `recover_s`: fault applied -> first iteration back at >= 90% of the degraded steady rate;
- `degraded_ratio`: median busbw while the fault is active / median before it (same sizes);
- `failback_ratio`: median busbw after the link came back / median before the fault;
- `lossless`: #wrong stayed 0 in every result row (`-c 1`).

Every metric is a `Metric`: a value, or None with the reason (never 0 for "unknown"), and its
basis (clock and resolution). All times are put on the controller's clock: node times minus
the node's `clock_offset_s` from faults.jsonl.

Public API: `run_recovery(path_or_record) -> RunRecovery`, `recovery_columns(record, parsed)`
(the runs-table hook), `sweep_recovery(sweep_dir) -> DataFrame` (one row per run: what the
report uses; `compare` takes each run's own values from the runs table), `recovery_doc(file)`
(for `r2bench parse --json`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from statistics import median
from typing import TYPE_CHECKING, Any

import pandas as pd

from r2bench.config.r2ccl import failover_timeout
from r2bench.records import store as st
from r2bench.records.events import parse_events
from r2bench.records.models import EventKind, OutcomeStatus, ParsedNcclTests
from r2bench.records.nccltests import iter_lines

if TYPE_CHECKING:
    from r2bench.records.tables import ParsedRun

METRICS = ("detect_s", "stall_s", "recover_s", "degraded_ratio", "failback_ratio", "lossless")
MIN_BASELINE = 3  # fewer samples of a size before the fault make no baseline
RECOVERED_FRACTION = 0.9  # recover_s: first sample at >= 90% of the degraded steady rate
ARRIVAL_RESOLUTION_S = 1e-3  # a line stamped on arrival: pipe and mpirun forwarding, ~1 ms
STDERR_TIMES = "stderr.times"

# Lines that are the library reacting to a fault (whatever it prints first).
REACTION_KINDS = frozenset(
    {
        EventKind.R2CC_HOT_REPAIR_BROADCAST,
        EventKind.R2CC_HOT_REPAIR_RECEIVED,
        EventKind.R2CC_STEP_SYNC,
        EventKind.R2CC_HOT_REPAIR_DETECTED,
        EventKind.R2CC_GATHER_COMPLETE,
        EventKind.R2CC_BACKUP_SWITCH,
        EventKind.NET_IB_COMPLETION_ERROR,
        EventKind.SOCKET_ERROR,
        EventKind.NCCL_WARN,
        EventKind.TEST_NCCL_FAILURE,
    }
)
# NCCL >= 2.29.7 port failover / 2.30 failback INFO lines (p2p_resiliency*.cc).
_RESILIENCY_RE = re.compile(r"resilien|failover|failback|port recovery", re.IGNORECASE)
# Cheap prefilter before the event parser (a NCCL_DEBUG=INFO log has millions of lines).
_CANDIDATE_RE = re.compile(
    r"NCCL WARN|R2CC|OOB: |Got completion|Test NCCL failure|resilien|failover|failback",
    re.IGNORECASE,
)
_OWN_STAMP_RE = re.compile(r"^\[(?P<ts>[^\]]{1,64})\]")
_EPOCH_STAMP_RE = re.compile(r"^\d{9,11}(?:\.(?P<frac>\d+))?$")
_DATE_STAMP_RE = re.compile(r"^\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,](?P<frac>\d{1,9}))?")
# Recipes of R-2CCL and of its emulation: their runs have a failover timeout.
R2CCL_RECIPES = frozenset({"r2ccl", "emulated-lib"})
_UNDEFINED_OUTCOMES = {
    OutcomeStatus.CRASHED.value: "crashed",
    OutcomeStatus.TIMEOUT.value: "hung (timed out)",
    OutcomeStatus.INTERRUPTED.value: "interrupted",
    OutcomeStatus.LAUNCH_FAILED.value: "launch failed",
    OutcomeStatus.FAULT_NOT_INJECTED.value: "fault not injected (nothing to recover from)",
}


@dataclass(frozen=True)
class Metric:
    """One recovery metric: a value, or None with the reason; `basis`: clock and resolution."""

    value: float | bool | None
    reason: str = ""
    basis: str = ""

    @property
    def defined(self) -> bool:
        return self.value is not None


def _undefined(reason: str) -> Metric:
    return Metric(None, reason=reason)


@dataclass(frozen=True)
class Window:
    """One fault cycle, on the controller's clock: applied -> link back (None: never back)."""

    applied: float
    back: float | None
    node: str
    nic: str
    kind: str
    fault: int
    cycle: int


@dataclass(frozen=True)
class Sample:
    """One completed measurement (an iteration with -I 1, else a result row)."""

    start: float
    end: float
    size: int
    busbw: float


@dataclass(frozen=True)
class Reaction:
    """The first log line of the library's reaction, with the time used."""

    time: float
    kind: str
    text: str
    basis: str
    resolution_s: float


@dataclass
class RunRecovery:
    """The recovery metrics of one run plus what they are measured against."""

    run_id: str
    library: str | None = None
    r2cc_mode: str | None = None
    scenario: str | None = None
    repeat: int | None = None
    outcome: str | None = None
    failover_timeout_ms: float | None = None
    failover_timeout_from: str | None = None
    """`set` (NCCL_R2CC_FAILOVER_TIMEOUT_MS) or `derived` (R-2CCL's default from the IB retry
    settings); None for a library that has no failover (stock NCCL)."""
    windows: list[Window] = field(default_factory=list)
    reaction: Reaction | None = None
    metrics: dict[str, Metric] = field(default_factory=dict)

    def columns(self) -> dict[str, Any]:
        """Flat columns: per metric `<m>`, `<m>_reason`, `<m>_basis`; then the fault and the
        reaction (what the runs table and `parse --json` carry)."""
        out: dict[str, Any] = {}
        for name in METRICS:
            m = self.metrics.get(name) or _undefined("not computed")
            out[name] = m.value
            out[f"{name}_reason"] = m.reason or None
            out[f"{name}_basis"] = m.basis or None
        first = self.windows[0] if self.windows else None
        out["fault_node"] = first.node if first else None
        out["fault_nic"] = first.nic if first else None
        out["fault_applied_at"] = first.applied if first else None
        out["fault_back_at"] = self.windows[-1].back if self.windows else None
        out["fault_cycles"] = len(self.windows)
        out["reaction_kind"] = self.reaction.kind if self.reaction else None
        out["reaction_at"] = self.reaction.time if self.reaction else None
        out["reaction_line"] = self.reaction.text if self.reaction else None
        return out


COLUMNS = tuple(RunRecovery("").columns())


# --------------------------------------------------------------------------- inputs


def fault_windows(faults: Iterable[st.FaultEvent], run_end: float | None) -> list[Window]:
    """One window per (fault, cycle) that was applied, in time order, on the controller clock.

    Start: the inject's `applied_at` (else its `time`). End: when the link was seen back (the
    `verify` after the revert), else the revert's own time; None when no revert was recorded.
    """
    by_key: dict[tuple[int, int], dict[str, st.FaultEvent]] = {}
    for f in faults:
        if f.ok or f.action != "inject":
            by_key.setdefault((f.fault, f.cycle), {}).setdefault(f.action, f)
    out = []
    for (fault, cycle), steps in by_key.items():
        inject = steps.get("inject")
        if inject is None or not inject.ok:
            continue
        offset = inject.clock_offset_s or 0.0
        applied = inject.applied_at if inject.applied_at is not None else inject.time
        if applied is None:
            continue
        back = None
        for action in ("verify", "revert", "lease_expired", "heal"):
            step = steps.get(action)
            if step is not None:
                node_time = step.verified_at or step.applied_at or step.time
                if node_time is not None:
                    back = node_time - (step.clock_offset_s or offset)
                    break
        out.append(
            Window(applied - offset, back, inject.node, inject.nic, inject.kind, fault, cycle)
        )
    out.sort(key=lambda w: w.applied)
    if run_end is not None:
        out = [w for w in out if w.applied <= run_end]
    return out


def _read_times(record: st.RunRecord, name: str) -> list[float] | None:
    path = record.file(name)
    if path is None:
        return None
    try:
        return [float(x) for x in path.read_text().split()]
    except (OSError, ValueError):
        return None


def _node_offsets(record: st.RunRecord) -> dict[str, float]:
    return {f.node: f.clock_offset_s for f in record.faults if f.clock_offset_s is not None}


def _launch_node(record: st.RunRecord) -> str | None:
    nodes = record.spec.get("nodes") or []
    return str(nodes[0]) if nodes else None


def _stamp_resolution(text: str) -> tuple[bool, float] | None:
    """(epoch form, resolution in s) of a line's own `[...]` stamp, or None."""
    m = _OWN_STAMP_RE.match(text)
    if m is None:
        return None
    ts = m.group("ts").strip()
    for rx, epoch in ((_EPOCH_STAMP_RE, True), (_DATE_STAMP_RE, False)):
        if (mm := rx.match(ts)) is not None:
            frac = mm.group("frac")
            return epoch, 10.0 ** -len(frac) if frac else 1.0
    return None


def first_reaction(record: st.RunRecord, after: float) -> tuple[Reaction | None, str]:
    """The first reaction line at or after `after` (controller clock) in stdout and stderr.

    A line's time is its own stamp when that is finer than 1 ms (R-2CCL emulator `[epoch.us]`,
    NCCL with `NCCL_DEBUG_TIMESTAMP_FORMAT` `%6f`), else its arrival on the launch node
    (`stderr.times`/`stdout.times`), else its own coarser stamp (NCCL WARN `[%F %T]`, 1 s).
    Returns (reaction, why none)."""
    offsets = _node_offsets(record)
    launch = _launch_node(record)
    launch_offset = offsets.get(launch or "", 0.0)
    utc_offset = float(record.provenance.get("node_utc_offset_s") or 0.0)
    best: Reaction | None = None
    untimed = 0
    for name, times_name in ((st.STDERR, STDERR_TIMES), (st.STDOUT, st.STDOUT_TIMES)):
        path = record.file(name)
        if path is None:
            continue
        times = _read_times(record, times_name)
        with path.open("rb") as handle:
            for lineno, line in enumerate(iter_lines(handle), start=1):
                if not _CANDIDATE_RE.search(line):
                    continue
                arrival = (
                    times[lineno - 1] - launch_offset if times and lineno <= len(times) else None
                )
                if arrival is not None and arrival < after:
                    continue
                for ev in parse_events([line], include_info=True):
                    if ev.kind not in REACTION_KINDS and not (
                        ev.kind is EventKind.NCCL_INFO and _RESILIENCY_RE.search(ev.message)
                    ):
                        continue
                    stamp = _stamp_resolution(ev.text)
                    own = None
                    if ev.time is not None and stamp is not None:
                        epoch, res = stamp
                        node_offset = offsets.get(ev.host or "", launch_offset)
                        own = (ev.time - (0.0 if epoch else utc_offset) - node_offset, res)
                    if own is not None and own[1] < ARRIVAL_RESOLUTION_S:
                        t, basis, res = own[0], f"the line's own stamp on {ev.host}", own[1]
                    elif arrival is not None:
                        t, res = arrival, ARRIVAL_RESOLUTION_S
                        basis = f"arrival on the launch node {launch} ({times_name})"
                    elif own is not None:
                        t, basis, res = own[0], f"the line's own stamp on {ev.host}", own[1]
                    else:
                        untimed += 1
                        continue
                    if t < after:
                        continue
                    if best is None or t < best.time:
                        best = Reaction(t, ev.kind.value, ev.text, basis, res)
    if best is not None:
        return best, ""
    if untimed:
        return None, (
            f"{untimed} reaction line(s) carry no time (no stderr.times/stdout.times and no "
            "own stamp: not a sweep run)"
        )
    return None, "no reaction logged after the fault (R2CC, NET/IB, socket, WARN or resiliency)"


def measurement_samples(
    record: st.RunRecord, parsed: ParsedNcclTests
) -> tuple[list[Sample], str, float]:
    """Completed measurements on the controller clock, the basis text and the resolution.

    With -I 1: one sample per iteration (its end estimated as the runs table estimates
    iteration timestamps); otherwise one per result row (start = end - iterations x time)."""
    from r2bench.records import tables  # tables imports this module for its runs-table hook

    offsets = _node_offsets(record)
    launch_offset = offsets.get(_launch_node(record) or "", 0.0)
    utc_offset = float(record.provenance.get("node_utc_offset_s") or 0.0)
    stamps = _read_times(record, st.STDOUT_TIMES)
    row_times: dict[tuple[int, str, int], tuple[float, float]] = {}
    rows = []
    for r in parsed.rows:
        if stamps and r.line and r.line <= len(stamps):
            ts = stamps[r.line - 1]
        else:
            ts = tables._epoch(r.timestamp, utc_offset)
        factor = (r.busbw_gbps / r.algbw_gbps) if r.busbw_gbps and r.algbw_gbps else 1.0
        row_times[(r.size_bytes, r.placement, r.cycle)] = (ts, factor)
        rows.append((r, ts))
    clock = "stdout.times (line arrival, ~1 ms)" if stamps else "-S 1 stamps (1 s)"
    resolution = ARRIVAL_RESOLUTION_S if stamps else 1.0
    out: list[Sample] = []
    if parsed.per_iteration and stamps:
        out = _spread_iterations(parsed, row_times, launch_offset)
        basis = (
            "per iteration (-I 1); iteration ends placed between row prints (stdout.times, "
            "~1 ms) with each row's untimed time spread evenly over its iterations"
        )
    elif parsed.per_iteration:
        end = record.end
        span = (end.started_at, end.ended_at) if end else (None, None)
        ends = tables._block_end_times(parsed, row_times, span, tables.LAST_IN_SECOND)
        for p in parsed.per_iteration:
            key = (p.size_bytes, p.placement, p.cycle)
            block_end = ends.get(key)
            if block_end is None or block_end != block_end:
                continue
            factor = row_times.get(key, (0.0, 1.0))[1]
            t_end = block_end - launch_offset - sum(p.times_us) / 1e6
            for t_us in p.times_us:
                start, t_end = t_end, t_end + t_us / 1e6
                if t_us > 0:
                    out.append(
                        Sample(start, t_end, p.size_bytes, _busbw(p.size_bytes, t_us, factor))
                    )
        basis = f"per iteration (-I 1), ends estimated from {clock} and the iteration times"
    else:
        iters = parsed.iters or (record.spec.get("options") or {}).get("iterations") or 1
        for r, ts in rows:
            if ts == ts and r.time_us and r.busbw_gbps is not None:
                end_t = ts - launch_offset
                out.append(
                    Sample(end_t - iters * r.time_us / 1e6, end_t, r.size_bytes, r.busbw_gbps)
                )
        basis = f"per result row (no -I: the mean of {iters} iterations), row ends from {clock}"
    out.sort(key=lambda s: s.end)
    return out, basis, resolution


def _busbw(size: int, t_us: float, factor: float) -> float:
    return size / t_us / 1e3 * factor


def _spread_iterations(
    parsed: ParsedNcclTests,
    row_times: dict[tuple[int, str, int], tuple[float, float]],
    offset: float,
) -> list[Sample]:
    """Iterations placed between the print of the previous row and their own row's print.

    A row's iterations (out-of-place, then in-place) ran between the two prints; the time
    there that no iteration accounts for (warm-up, buffer fill, check, the print) is spread
    evenly before each iteration. The first row has no previous print: its iterations are
    packed back to back before its own print."""
    blocks: dict[tuple[int, int], dict[str, tuple[float, ...]]] = {}
    for p in parsed.per_iteration:
        blocks.setdefault((p.size_bytes, p.cycle), {})[p.placement] = p.times_us
    rows = sorted(
        {
            (row_times[(size, pl, cy)][0], size, cy)
            for size, pl, cy in row_times
            if (size, cy) in blocks
        }
    )
    out: list[Sample] = []
    previous: float | None = None
    for printed, size, cycle in rows:
        if printed != printed:
            continue
        block = blocks[(size, cycle)]
        times = [(pl, t) for pl in ("out_of_place", "in_place") for t in block.get(pl, ()) if t > 0]
        total = sum(t for _, t in times) / 1e6
        span = printed - previous if previous is not None else total
        slack = max(0.0, span - total) / len(times) if times else 0.0
        cursor = printed - max(span, total)
        for pl, t_us in times:
            start = cursor + slack
            cursor = start + t_us / 1e6
            factor = row_times[(size, pl, cycle)][1]
            out.append(Sample(start - offset, cursor - offset, size, _busbw(size, t_us, factor)))
        previous = printed
    return out


# --------------------------------------------------------------------------- metrics


def _outcome(record: st.RunRecord) -> str | None:
    end = record.end
    if end is None or end.outcome is None:
        return None
    return end.outcome.status.value


def _stall(
    samples: list[Sample], windows: list[Window], outcome: str | None, basis: str, run_end: float
) -> Metric:
    first_on = windows[0].applied
    last_back = windows[-1].back
    before = [s for s in samples if s.end <= first_on]
    after = [s for s in samples if s.end > first_on]
    failed = _UNDEFINED_OUTCOMES.get(outcome or "")
    period_end = last_back if last_back is not None else run_end
    if failed and (not after or after[-1].end < period_end):
        return _undefined(failed)
    if not before:
        return _undefined("fault before the first result: no completion before it to measure from")
    if not after:
        return _undefined("no measurement completed after the fault")
    ends = [before[-1].end, *(s.end for s in after)]
    gaps = [b - a for a, b in pairwise(ends) if a < period_end]
    return Metric(max(gaps), basis=f"longest gap between completions; {basis}")


def _by_size(samples: Iterable[Sample]) -> dict[int, list[float]]:
    out: dict[int, list[float]] = {}
    for s in samples:
        out.setdefault(s.size, []).append(s.busbw)
    return out


def _inside(s: Sample, windows: list[Window], run_end: float) -> bool:
    return any(
        s.start >= w.applied and s.end <= (w.back if w.back is not None else run_end)
        for w in windows
    )


def _ratio(
    samples: list[Sample], baseline: dict[int, float], what: str, basis: str, thin: str
) -> Metric:
    usable = [s for s in samples if s.size in baseline]
    if not samples:
        return _undefined(f"no measurement completed {what}")
    if not usable:
        if thin:
            return _undefined(
                f"too few measurements of the same size before the fault ({thin}; "
                f"need {MIN_BASELINE})"
            )
        return _undefined(f"no measurement of the same size before the fault ({what})")
    ratio = median(s.busbw / baseline[s.size] for s in usable)
    sizes = ",".join(str(x) for x in sorted({s.size for s in usable}))
    return Metric(ratio, basis=f"median of {len(usable)} samples {what}, sizes {sizes}; {basis}")


def _has_failover(spec: dict[str, Any]) -> bool:
    """Whether the run's library is R-2CCL (or its emulation): it reads R2CC_* variables."""
    library = spec.get("library") or {}
    recipe = str(library.get("recipe", "")) if isinstance(library, dict) else ""
    env = spec.get("env") or {}
    return recipe in R2CCL_RECIPES or "R2CC_MODE" in env


def compute(
    record: st.RunRecord,
    parsed: ParsedNcclTests,
    outcome: str | None = None,
    fallback: dict[int, float] | None = None,
    fallback_note: str = "",
) -> RunRecovery:
    """The recovery metrics of one parsed run (pure: reads only the run folder).

    `fallback` (size -> busbw) stands in for the run's own pre-fault baseline at the sizes
    where the run has fewer than MIN_BASELINE samples before the fault (`sweep_recovery`
    passes the fault-free runs of the same series); `fallback_note` says what it is."""
    spec = record.spec
    env = spec.get("env") or {}
    timeout = failover_timeout(env) if _has_failover(spec) else None
    outcome = outcome or _outcome(record)
    rec = RunRecovery(
        run_id=record.run_id,
        library=spec.get("library_label"),
        r2cc_mode=None if env.get("R2CC_MODE") is None else str(env["R2CC_MODE"]),
        scenario=spec.get("scenario"),
        repeat=spec.get("repeat"),
        outcome=outcome if record.complete else "incomplete",
        failover_timeout_ms=timeout.ms if timeout else None,
        failover_timeout_from=timeout.source if timeout else None,
    )
    if record.complete:
        rec.metrics["lossless"] = _lossless(parsed, outcome, spec)
    end = record.end
    run_end = end.ended_at if end and end.ended_at else float("inf")
    rec.windows = fault_windows(record.faults, end.ended_at if end else None)
    if not record.complete:
        return _all_undefined(rec, "incomplete run (no COMPLETE marker)")
    if not rec.windows:
        reason = "fault not applied" if record.faults else "no fault injected"
        return _all_undefined(rec, reason)
    first = rec.windows[0]
    reaction, why = first_reaction(record, first.applied)
    rec.reaction = reaction
    if reaction is not None:
        rec.metrics["detect_s"] = Metric(
            reaction.time - first.applied,
            basis=f"{reaction.basis}, resolution {reaction.resolution_s:g} s; fault applied_at "
            f"on {first.node} (node clock, us)",
        )
    else:
        rec.metrics["detect_s"] = _undefined(why)
    samples, basis, _ = measurement_samples(record, parsed)
    if not samples:
        for name in ("stall_s", "recover_s", "degraded_ratio", "failback_ratio"):
            rec.metrics[name] = _undefined(
                _UNDEFINED_OUTCOMES.get(outcome or "") or "no result rows"
            )
        return rec
    rec.metrics["stall_s"] = _stall(samples, rec.windows, outcome, basis, run_end)
    _rates(rec, samples, basis, run_end, outcome, fallback, fallback_note)
    return rec


def _rates(
    rec: RunRecovery,
    samples: list[Sample],
    basis: str,
    run_end: float,
    outcome: str | None,
    fallback: dict[int, float] | None = None,
    fallback_note: str = "",
) -> None:
    windows = rec.windows
    first = windows[0]
    failed = _UNDEFINED_OUTCOMES.get(outcome or "")
    before = _by_size(s for s in samples if s.end <= first.applied)
    baseline = {size: median(v) for size, v in before.items() if len(v) >= MIN_BASELINE}
    thin = {size: len(v) for size, v in before.items() if len(v) < MIN_BASELINE}
    ref = f"baseline: the run's own samples before the fault (>= {MIN_BASELINE} per size)"
    if fallback:
        extra = {size: v for size, v in fallback.items() if size not in baseline}
        if extra:
            baseline.update(extra)
            ref = f"baseline: {fallback_note} for sizes {','.join(map(str, sorted(extra)))}"
    basis = f"{basis}; {ref}"
    thin_note = ", ".join(f"{n} of size {size}" for size, n in sorted(thin.items()))
    during = [s for s in samples if _inside(s, windows, run_end)]
    if not during and failed:
        rec.metrics["degraded_ratio"] = _undefined(failed)
    else:
        rec.metrics["degraded_ratio"] = _ratio(
            during, baseline, "while the fault was active", basis, thin_note
        )
    first_end = first.back if first.back is not None else run_end
    degraded = {
        size: median(v)
        for size, v in _by_size(
            s for s in samples if s.start >= first.applied and s.end <= first_end
        ).items()
    }
    recovered = next(
        (
            s
            for s in samples
            if s.start >= first.applied
            and s.size in degraded
            and s.busbw >= RECOVERED_FRACTION * degraded[s.size]
        ),
        None,
    )
    if recovered is not None:
        rec.metrics["recover_s"] = Metric(
            recovered.end - first.applied,
            basis=f"first sample started after the fault at >= {RECOVERED_FRACTION:.0%} of "
            f"the degraded median of its size; {basis}",
        )
    elif failed:
        rec.metrics["recover_s"] = _undefined(failed)
    else:
        rec.metrics["recover_s"] = _undefined(
            "no measurement completed inside the fault window (outage shorter than the stall)"
        )
    last_back = windows[-1].back
    if last_back is None:
        rec.metrics["failback_ratio"] = _undefined(
            failed or "no revert recorded: the link did not come back during the run"
        )
        return
    after = [s for s in samples if s.start >= last_back]
    if not after and failed:
        rec.metrics["failback_ratio"] = _undefined(failed)
        return
    rec.metrics["failback_ratio"] = _ratio(
        after, baseline, "after the link came back", basis, thin_note
    )


def _lossless(parsed: ParsedNcclTests, outcome: str | None, spec: dict[str, Any]) -> Metric:
    checked = [r for r in parsed.rows if r.wrong is not None]
    if any(r.wrong for r in checked):
        bad = sum(1 for r in checked if r.wrong)
        return Metric(False, basis=f"#wrong > 0 in {bad} of {len(checked)} result rows")
    if (spec.get("options") or {}).get("check") is False or (parsed.rows and not checked):
        return _undefined("results not checked (-c 0: #wrong is N/A)")
    failed = _UNDEFINED_OUTCOMES.get(outcome or "")
    if failed:
        return _undefined(f"{failed}: the collectives cut short were never checked")
    if not checked:
        return _undefined("no result rows")
    return Metric(True, basis=f"#wrong = 0 in all {len(checked)} result rows (-c 1)")


def _all_undefined(rec: RunRecovery, reason: str) -> RunRecovery:
    """Every metric but `lossless` (which holds without a fault) undefined for `reason`."""
    for name in METRICS[:-1]:
        rec.metrics[name] = _undefined(reason)
    rec.metrics.setdefault("lossless", _undefined(reason))
    return rec


# --------------------------------------------------------------------------- entry points


def run_recovery(run: Path | st.RunRecord) -> RunRecovery:
    """The recovery metrics of one run folder (parsed here)."""
    from r2bench.records import tables  # tables imports this module for its runs-table hook

    record = st.load_run(Path(run)) if isinstance(run, (str, Path)) else run
    parsed = tables.parse_run(record)
    return compute(record, parsed.parsed, parsed.outcome.status.value if parsed.outcome else None)


def recovery_columns(run: ParsedRun) -> dict[str, Any]:
    """The runs-table hook (`tables._run_row`): the flat columns of `compute` for a parsed run."""
    outcome = run.outcome.status.value if run.outcome else None
    return compute(run.record, run.parsed, outcome).columns()


def sweep_recovery(sweep_dir: Path) -> pd.DataFrame:
    """One row per run folder of a sweep: run_id, library, r2cc_mode, scenario, repeat,
    outcome, failover_timeout_ms and the flat metric columns (`RunRecovery.columns`).

    Unlike the runs table (each run alone), a faulted run with too few samples of a size
    before its fault gets its ratios against the fault-free runs (scenario `none`) of the same
    library and R2CC_MODE at that size (median of their samples); the basis says so."""
    from r2bench.records import tables

    parsed_runs = [
        tables.parse_run(st.load_run(p)) for p in st.RunStore.at(Path(sweep_dir)).run_dirs()
    ]
    pooled: dict[tuple[Any, Any], dict[int, list[float]]] = {}
    for run in parsed_runs:
        spec = run.record.spec
        if run.record.complete and spec.get("scenario") == "none" and not run.record.faults:
            samples, _, _ = measurement_samples(run.record, run.parsed)
            sizes = pooled.setdefault(_series(spec), {})
            for size, values in _by_size(samples).items():
                sizes.setdefault(size, []).extend(values)
    rows = []
    for run in parsed_runs:
        series = pooled.get(_series(run.record.spec), {})
        fallback = {size: median(v) for size, v in series.items() if len(v) >= MIN_BASELINE}
        outcome = run.outcome.status.value if run.outcome else None
        rec = compute(
            run.record, run.parsed, outcome, fallback, "the fault-free runs of the same series"
        )
        rows.append({**_identity(rec), **rec.columns()})
    return pd.DataFrame(rows, columns=[*_identity(RunRecovery("")), *COLUMNS])


def _series(spec: dict[str, Any]) -> tuple[Any, Any]:
    return spec.get("library_label"), (spec.get("env") or {}).get("R2CC_MODE")


def recovery_frame(runs: pd.DataFrame) -> pd.DataFrame:
    """The recovery columns of a runs table (`tables.runs`), with the run's identity."""
    keep = [
        c for c in ("run_id", "library", "R2CC_MODE", "scenario", "repeat", "outcome") if c in runs
    ]
    keep += [c for c in ("NCCL_R2CC_FAILOVER_TIMEOUT_MS", *COLUMNS) if c in runs]
    return runs[keep].copy()


def _identity(rec: RunRecovery) -> dict[str, Any]:
    return {
        "run_id": rec.run_id,
        "library": rec.library,
        "r2cc_mode": rec.r2cc_mode,
        "scenario": rec.scenario,
        "repeat": rec.repeat,
        "outcome": rec.outcome,
        "failover_timeout_ms": rec.failover_timeout_ms,
        "failover_timeout_from": rec.failover_timeout_from,
    }


def recovery_doc(path: Path) -> dict[str, Any]:
    """For `r2bench parse --json`: the metrics of the run folder holding `path`, or why none."""
    folder = Path(path).resolve().parent
    if str(path) == "-" or not (folder / st.SPEC).is_file():
        return {"undefined": "not in a run folder (no spec.json/faults.jsonl beside it)"}
    return run_recovery(folder).columns()
