"""The recovery metrics, as one registry that tables, report, compare and figures read.

Each entry says a metric's name (its column in the runs table), unit, which direction is
better, what it means, and the function that computes it from a run's `Inputs` (fault windows,
first reaction, completed measurements and baseline, all on the controller clock: see
`analysis.parsedrun` and `analysis.recovery`). docs/recovery.md says how each is computed.

Adding a metric is one `MetricDef` in `REGISTRY` plus its function: the runs table gets its
three columns (`<name>`, `<name>_reason`, `<name>_basis`), the report a column in its
recovery table (by unit), and `compare` gates it per series of faulted runs with
`compared=True` (its better direction, unit and default `min_effect` from the entry).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from itertools import pairwise
from statistics import median
from typing import Literal

from r2bench.analysis.parsedrun import ParsedRun, Sample
from r2bench.analysis.windows import FaultWindow
from r2bench.parse.models import OutcomeStatus
from r2bench.parse.verify import Verification

MIN_BASELINE = 3  # fewer samples of a size before the fault make no baseline
RECOVERED_FRACTION = 0.9  # recover_s: first sample at >= 90% of the degraded steady rate
UNDEFINED_OUTCOMES = {
    OutcomeStatus.CRASHED.value: "crashed",
    OutcomeStatus.TIMEOUT.value: "hung (timed out)",
    OutcomeStatus.INTERRUPTED.value: "interrupted",
    OutcomeStatus.LAUNCH_FAILED.value: "launch failed",
    OutcomeStatus.FAULT_NOT_INJECTED.value: "fault not injected (nothing to recover from)",
    OutcomeStatus.FAULT_WITHOUT_EFFECT.value: "the fault touched no traffic (nothing to recover "
    "from)",
    OutcomeStatus.FAULT_MISSED.value: "the fault missed a running collective",
    OutcomeStatus.WRONG_LIBRARY.value: "another NCCL than the library under test ran",
}
"""Outcomes that leave a metric undefined where the run did not get far enough, and why."""

Unit = Literal["s", "ratio", "flag"]


@dataclass(frozen=True)
class Metric:
    """One metric of one run: a value, or None with the reason; `basis`: clock and resolution."""

    value: float | bool | None
    reason: str = ""
    basis: str = ""

    @property
    def defined(self) -> bool:
        """Whether the metric has a value."""
        return self.value is not None


def undefined(reason: str) -> Metric:
    """A metric without a value, saying why (never 0 for "unknown")."""
    return Metric(None, reason=reason)


@dataclass(frozen=True)
class Reaction:
    """The first log line of the library's reaction, with the time used."""

    time: float
    kind: str
    text: str
    basis: str
    resolution_s: float


@dataclass(frozen=True)
class Inputs:
    """What every recovery metric of one run is computed from (`analysis.recovery` builds it)."""

    run: ParsedRun
    outcome: str | None
    windows: list[FaultWindow]
    samples: list[Sample] = field(default_factory=list)
    timing: str = ""
    """How the samples were timed (clock, resolution): part of every basis text."""
    run_end: float = float("inf")
    reaction: Reaction | None = None
    no_reaction: str = ""
    baseline: dict[int, float] = field(default_factory=dict)
    """size -> median busbw before the fault (the run's own, or its series' fault-free runs)."""
    baseline_note: str = ""
    thin: str = ""
    """Sizes with too few samples before the fault for a baseline, e.g. `2 of size 1048576`."""

    @property
    def failed(self) -> str | None:
        """Why the run stopped short (crashed, hung, ...), or None."""
        return UNDEFINED_OUTCOMES.get(self.outcome or "")

    @property
    def first(self) -> FaultWindow:
        """The first fault window."""
        return self.windows[0]

    @property
    def basis(self) -> str:
        """The samples' timing and the baseline they are measured against."""
        return f"{self.timing}; {self.baseline_note}"


@dataclass(frozen=True)
class MetricDef:
    """A registry entry: one recovery metric."""

    name: str
    unit: Unit
    higher_is_better: bool
    summary: str
    compute: Callable[[Inputs], Metric] = field(repr=False)
    needs_fault: bool = True
    """False for a metric that holds without a fault (`lossless`)."""
    needs_samples: bool = True
    """False for a metric read from the logs alone (`detect_s`)."""
    compared: bool = False
    """Gated by `compare` by default (one sample per faulted run)."""
    min_effect: float | None = None
    """`compare`'s default smallest relative change that counts (None: the policy's)."""


# --------------------------------------------------------------------------- the metrics


def detect(inp: Inputs) -> Metric:
    """Fault applied -> first log line of the library's reaction."""
    reaction, first = inp.reaction, inp.first
    if reaction is None:
        return undefined(inp.no_reaction)
    return Metric(
        reaction.time - first.applied,
        basis=f"{reaction.basis}, resolution {reaction.resolution_s:g} s; fault applied_at "
        f"on {first.node} (node clock, us)",
    )


def stall(inp: Inputs) -> Metric:
    """The longest gap without a completed measurement around the fault."""
    first_on, last_back = inp.first.applied, inp.windows[-1].back
    before = [s for s in inp.samples if s.end <= first_on]
    after = [s for s in inp.samples if s.end > first_on]
    period_end = last_back if last_back is not None else inp.run_end
    if inp.failed and (not after or after[-1].end < period_end):
        return undefined(inp.failed)
    if not before:
        return undefined("fault before the first result: no completion before it to measure from")
    if not after:
        return undefined("no measurement completed after the fault")
    ends = [before[-1].end, *(s.end for s in after)]
    gaps = [b - a for a, b in pairwise(ends) if a < period_end]
    return Metric(max(gaps), basis=f"longest gap between completions; {inp.timing}")


def recover(inp: Inputs) -> Metric:
    """Fault applied -> first sample back at >= 90% of the degraded steady rate."""
    first = inp.first
    first_end = first.back if first.back is not None else inp.run_end
    inside_first = (s for s in inp.samples if s.start >= first.applied and s.end <= first_end)
    degraded = {size: median(v) for size, v in by_size(inside_first).items()}
    recovered = next(
        (
            s
            for s in inp.samples
            if s.start >= first.applied
            and s.size in degraded
            and s.busbw >= RECOVERED_FRACTION * degraded[s.size]
        ),
        None,
    )
    if recovered is not None:
        return Metric(
            recovered.end - first.applied,
            basis=f"first sample started after the fault at >= {RECOVERED_FRACTION:.0%} of "
            f"the degraded median of its size; {inp.basis}",
        )
    if inp.failed:
        return undefined(inp.failed)
    return undefined(
        "no measurement completed inside the fault window (outage shorter than the stall)"
    )


def degraded_ratio(inp: Inputs) -> Metric:
    """Median busbw while the fault is active / the baseline (same sizes)."""
    during = [s for s in inp.samples if _inside(s, inp.windows, inp.run_end)]
    if not during and inp.failed:
        return undefined(inp.failed)
    return _ratio(inp, during, "while the fault was active")


def failback_ratio(inp: Inputs) -> Metric:
    """Median busbw after the link came back / the baseline (same sizes)."""
    last_back = inp.windows[-1].back
    if last_back is None:
        return undefined(
            inp.failed or "no revert recorded: the link did not come back during the run"
        )
    after = [s for s in inp.samples if s.start >= last_back]
    if not after and inp.failed:
        return undefined(inp.failed)
    return _ratio(inp, after, "after the link came back")


def lossless(inp: Inputs) -> Metric:
    """No element lost or wrong, and what that rests on.

    The verification workload checks every element of every timed iteration on every rank:
    its count is the answer. nccl-tests' `-c 1` checks one extra collective per size outside
    the timed iterations, so under a fault (which lands in the timed ones) it proves nothing:
    unknown, with that reason; without a fault it stands for what it checked."""
    if inp.run.verification is not None and inp.run.verification.checked:
        return _verified(inp, inp.run.verification)
    parsed, spec = inp.run.parsed, inp.run.record.spec
    checked = [r for r in parsed.rows if r.wrong is not None]
    if any(r.wrong for r in checked):
        bad = sum(1 for r in checked if r.wrong)
        return Metric(False, basis=f"#wrong > 0 in {bad} of {len(checked)} result rows")
    if (spec.options is not None and spec.options.check is False) or (parsed.rows and not checked):
        return undefined("results not checked (-c 0: #wrong is N/A)")
    if inp.failed:
        return undefined(f"{inp.failed}: the collectives cut short were never checked")
    if not checked:
        return undefined("no result rows")
    if inp.windows:
        return undefined(
            "nccl-tests -c checks one extra collective per size outside the timed iterations; "
            "the collectives the fault hit were not checked (use the verification workload)"
        )
    return Metric(
        True,
        basis=f"#wrong = 0 in all {len(checked)} result rows (-c 1: one checked collective per "
        "size, outside the timed iterations)",
    )


def _verified(inp: Inputs, v: Verification) -> Metric:
    """`lossless` from the verification workload's own count."""
    where = (
        f"every element of every iteration on every rank ({v.iterations} iterations x "
        f"{v.ranks} ranks)"
    )
    if v.wrong:
        its = ", ".join(str(i) for i in v.wrong_iterations[:10])
        return Metric(False, basis=f"{v.wrong} wrong elements in iterations {its}; {where}")
    if not v.complete:
        why = inp.failed or "the workload printed no verification summary"
        return undefined(f"{why}: {v.iterations} iterations checked, the rest never were")
    return Metric(True, basis=f"0 wrong: {where}")


def by_size(samples: Iterable[Sample]) -> dict[int, list[float]]:
    """busbw of the samples, per message size."""
    out: dict[int, list[float]] = {}
    for s in samples:
        out.setdefault(s.size, []).append(s.busbw)
    return out


def _inside(s: Sample, windows: list[FaultWindow], run_end: float) -> bool:
    return any(
        s.start >= w.applied and s.end <= (w.back if w.back is not None else run_end)
        for w in windows
    )


def _ratio(inp: Inputs, samples: list[Sample], what: str) -> Metric:
    usable = [s for s in samples if s.size in inp.baseline]
    if not samples:
        return undefined(f"no measurement completed {what}")
    if not usable:
        if inp.thin:
            return undefined(
                f"too few measurements of the same size before the fault ({inp.thin}; "
                f"need {MIN_BASELINE})"
            )
        return undefined(f"no measurement of the same size before the fault ({what})")
    ratio = median(s.busbw / inp.baseline[s.size] for s in usable)
    sizes = ",".join(str(x) for x in sorted({s.size for s in usable}))
    return Metric(
        ratio, basis=f"median of {len(usable)} samples {what}, sizes {sizes}; {inp.basis}"
    )


# --------------------------------------------------------------------------- the registry


REGISTRY: tuple[MetricDef, ...] = (
    MetricDef("detect_s", "s", False, "fault applied -> first reaction line", detect,
              needs_samples=False, compared=True, min_effect=0.10),
    MetricDef("stall_s", "s", False, "longest gap without a completion around the fault",
              stall, compared=True, min_effect=0.10),
    MetricDef("recover_s", "s", False, "fault applied -> back at 90% of the degraded rate",
              recover),
    MetricDef("degraded_ratio", "ratio", True, "busbw during the fault / before it",
              degraded_ratio),
    MetricDef("failback_ratio", "ratio", True, "busbw after the link came back / before",
              failback_ratio, compared=True),
    MetricDef("lossless", "flag", True, "no wrong element in what was checked", lossless,
              needs_fault=False, needs_samples=False),
)  # fmt: skip
"""Every recovery metric, in the order of the runs table's columns."""

METRICS: tuple[str, ...] = tuple(m.name for m in REGISTRY)


def metric(name: str) -> MetricDef:
    """The registry entry of a metric (KeyError naming the known ones otherwise)."""
    for m in REGISTRY:
        if m.name == name:
            return m
    raise KeyError(f"no recovery metric {name!r}; known: {', '.join(METRICS)}")


def of_unit(unit: Unit) -> tuple[str, ...]:
    """Names of the metrics measured in `unit` (`s`, `ratio`, `flag`)."""
    return tuple(m.name for m in REGISTRY if m.unit == unit)
