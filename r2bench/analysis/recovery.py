"""Recovery metrics of a faulted run: their inputs gathered once, then the registry applied.

Per run (docs/recovery.md says exactly how each is computed and at what resolution), every
metric of `analysis.metrics.REGISTRY`: `detect_s`, `stall_s`, `recover_s`, `degraded_ratio`,
`failback_ratio`, `lossless`. Every metric is a `Metric`: a value, or None with the reason
(never 0 for "unknown"), and its basis (clock and resolution). All times are on the
controller's clock (`analysis.parsedrun.RunClock` applies each node's offset, once).

Public API: `compute(parsed_run, fallback)` -> `RunRecovery`; `run_recovery(path_or_record)`;
`recovery_doc(file)` (for `r2bench parse --json`). A thin run's ratios against the fault-free
runs of its series (`series_key`, pooled by `tables.build`) are in the runs table.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median
from typing import Any

from r2bench.analysis.metrics import (
    METRICS,
    MIN_BASELINE,
    REGISTRY,
    Inputs,
    Metric,
    MetricDef,
    Reaction,
    by_size,
    undefined,
)
from r2bench.analysis.parsedrun import (
    ARRIVAL_RESOLUTION_S,
    STDERR_TIMES,
    ParsedRun,
    Sample,
    measurement_samples,
    parse_run,
    read_times,
)
from r2bench.analysis.windows import FaultWindow
from r2bench.config.r2ccl import failover_timeout_at
from r2bench.parse.events import parse_events
from r2bench.parse.library import r2cc_mode
from r2bench.parse.models import EventKind, OutcomeStatus
from r2bench.parse.nccltests.lines import iter_lines
from r2bench.runfolder import runformat, runmodel

NOTHING_TO_RECOVER = frozenset(
    {OutcomeStatus.FAULT_WITHOUT_EFFECT.value, OutcomeStatus.FAULT_NOT_INJECTED.value}
)
"""Outcomes of runs whose fault touched nothing: a recovery metric would measure noise."""
SERIES_NOTE = "the fault-free runs of the same series"
"""The baseline note of a run measured against its series (its own samples were too few)."""
THIN = "too few measurements"
"""How a ratio's reason begins when the run's own baseline was too thin."""

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
# Recipes of R-2CCL and of its emulation: their runs have a failover timeout.
R2CCL_RECIPES = frozenset({"r2ccl", "emulated-lib"})


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
    windows: list[FaultWindow] = field(default_factory=list)
    reaction: Reaction | None = None
    metrics: dict[str, Metric] = field(default_factory=dict)

    def columns(self) -> dict[str, Any]:
        """Flat columns: per metric `<m>`, `<m>_reason`, `<m>_basis`; then the fault and the
        reaction (what the runs table and `parse --json` carry)."""
        out: dict[str, Any] = {}
        for name in METRICS:
            m = self.metrics.get(name) or undefined("not computed")
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


# --------------------------------------------------------------------------- inputs


def first_reaction(run: ParsedRun, after: float) -> tuple[Reaction | None, str]:
    """The first reaction line at or after `after` (controller clock) in stdout and stderr.

    A line's time is its own stamp when that is finer than 1 ms (R-2CCL emulator `[epoch.us]`,
    NCCL with `NCCL_DEBUG_TIMESTAMP_FORMAT` `%6f`), else its arrival on the launch node
    (`stderr.times`/`stdout.times`), else its own coarser stamp (NCCL WARN `[%F %T]`, 1 s).
    Returns (reaction, why none)."""
    record, clock = run.record, run.clock
    best: Reaction | None = None
    untimed = 0
    for name, times_name in (
        (runformat.STDERR, STDERR_TIMES),
        (runformat.STDOUT, runformat.STDOUT_TIMES),
    ):
        path = record.file(name)
        if path is None:
            continue
        times = read_times(record, times_name)
        with path.open("rb") as handle:
            for lineno, line in enumerate(iter_lines(handle), start=1):
                if not _CANDIDATE_RE.search(line):
                    continue
                arrival = (
                    times[lineno - 1] - clock.launch_offset
                    if times and lineno <= len(times)
                    else None
                )
                if arrival is not None and arrival < after:
                    continue
                for ev in parse_events([line], include_info=True):
                    if ev.kind not in REACTION_KINDS and not (
                        ev.kind is EventKind.NCCL_INFO and _RESILIENCY_RE.search(ev.message)
                    ):
                        continue
                    own = clock.of_event(ev)
                    if own is not None and own[1] < ARRIVAL_RESOLUTION_S:
                        t, basis, res = own[0], f"the line's own stamp on {ev.host}", own[1]
                    elif arrival is not None:
                        t, res = arrival, ARRIVAL_RESOLUTION_S
                        basis = f"arrival on the launch node {clock.launch_node} ({times_name})"
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


# --------------------------------------------------------------------------- metrics


def _has_failover(spec: runmodel.SpecFields) -> bool:
    """Whether the run's library is R-2CCL (or its emulation): it reads R2CC_* variables."""
    recipe = spec.library.recipe if spec.library else None
    return recipe in R2CCL_RECIPES or "R2CC_MODE" in spec.env


def _r2ccl_ref(spec: runmodel.SpecFields) -> str | None:
    """The R-2CCL revision a run used (its timer's default depends on it); None for the
    emulation and for runs that do not say (the pinned commit's semantics)."""
    library = spec.library
    if library is None or library.recipe != "r2ccl":
        return None
    return library.ref or None


def _recovery_of(run: ParsedRun) -> RunRecovery:
    """The run's identity and failover timeout, no metric yet."""
    record, spec = run.record, run.record.spec
    env = spec.env
    timeout = failover_timeout_at(env, _r2ccl_ref(spec)) if _has_failover(spec) else None
    outcome = run.outcome_status
    return RunRecovery(
        run_id=record.run_id,
        library=spec.library_label,
        r2cc_mode=r2cc_mode(env),
        scenario=spec.scenario,
        repeat=spec.repeat,
        outcome=outcome if record.complete else "incomplete",
        failover_timeout_ms=timeout.ms if timeout else None,
        failover_timeout_from=timeout.source if timeout else None,
        windows=run.windows,
    )


def inputs_of(
    run: ParsedRun,
    outcome: str | None,
    fallback: dict[int, float] | None = None,
    fallback_note: str = "",
) -> Inputs:
    """Everything the metrics of one run are computed from, gathered once.

    `fallback` (size -> busbw) stands in for the run's own pre-fault baseline at the sizes
    where the run has fewer than MIN_BASELINE samples before the fault; `fallback_note` says
    what it is."""
    end = run.record.end
    run_end = end.ended_at if end and end.ended_at else float("inf")
    if not run.windows:
        return Inputs(run, outcome, [], run_end=run_end)
    reaction, why = first_reaction(run, run.windows[0].applied)
    samples, timing, _ = measurement_samples(run)
    baseline, thin, note = _baseline(samples, run.windows[0], fallback, fallback_note)
    return Inputs(
        run, outcome, run.windows, samples, timing, run_end, reaction, why, baseline, note, thin
    )


def _baseline(
    samples: list[Sample], first: FaultWindow, fallback: dict[int, float] | None, fallback_note: str
) -> tuple[dict[int, float], str, str]:
    """(size -> median busbw before the fault, the sizes too thin for one, what it is)."""
    before = by_size(s for s in samples if s.end <= first.applied)
    baseline = {size: median(v) for size, v in before.items() if len(v) >= MIN_BASELINE}
    thin = {size: len(v) for size, v in before.items() if len(v) < MIN_BASELINE}
    note = f"baseline: the run's own samples before the fault (>= {MIN_BASELINE} per size)"
    if fallback:
        extra = {size: v for size, v in fallback.items() if size not in baseline}
        if extra:
            baseline.update(extra)
            note = f"baseline: {fallback_note} for sizes {','.join(map(str, sorted(extra)))}"
    thin_note = ", ".join(f"{n} of size {size}" for size, n in sorted(thin.items()))
    return baseline, thin_note, note


def _why_not(m: MetricDef, inp: Inputs) -> str | None:
    """Why metric `m` cannot be computed on `inp` (None: it can)."""
    if m.needs_fault and not inp.windows:
        return "fault not applied" if inp.run.record.faults else "no fault injected"
    if m.needs_fault and inp.outcome in NOTHING_TO_RECOVER:
        return inp.failed
    if m.needs_samples and not inp.samples:
        return inp.failed or "no result rows"
    return None


def compute(
    run: ParsedRun, fallback: dict[int, float] | None = None, fallback_note: str = ""
) -> RunRecovery:
    """The recovery metrics of one parsed run: every entry of the registry, or why not."""
    rec = _recovery_of(run)
    if not run.record.complete:
        for m in REGISTRY:
            rec.metrics[m.name] = undefined("incomplete run (no COMPLETE marker)")
        return rec
    inp = inputs_of(run, rec.outcome, fallback, fallback_note)
    rec.reaction = inp.reaction
    for m in REGISTRY:
        why = _why_not(m, inp)
        rec.metrics[m.name] = undefined(why) if why is not None else m.compute(inp)
    return rec


def thin_baseline(rec: RunRecovery) -> bool:
    """Whether a ratio of the run was left undefined for want of its own baseline."""
    return any(
        THIN in (rec.metrics.get(m.name) or undefined("")).reason
        for m in REGISTRY
        if m.unit == "ratio"
    )


# --------------------------------------------------------------------------- entry points


def run_recovery(run: Path | runmodel.RunRecord) -> RunRecovery:
    """The recovery metrics of one run folder (parsed here)."""
    record = runmodel.load_run(Path(run)) if isinstance(run, (str, Path)) else run
    return compute(parse_run(record))


def series_key(spec: runmodel.SpecFields) -> tuple[str | None, str | None]:
    """The series a run's fault-free baseline is pooled over: (library label, R2CC_MODE)."""
    return spec.library_label, r2cc_mode(spec.env)


def recovery_doc(path: Path) -> dict[str, Any]:
    """For `r2bench parse --json`: the metrics of the run folder holding `path`, or why none."""
    folder = Path(path).resolve().parent
    if str(path) == "-" or not (folder / runformat.SPEC).is_file():
        return {"undefined": "not in a run folder (no spec.json/faults.jsonl beside it)"}
    return run_recovery(folder).columns()
