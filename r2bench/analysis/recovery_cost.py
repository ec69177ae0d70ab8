"""What one fault cost a training job, per recovery strategy (docs/recovery.md, "Recovery
strategies"): each metric a number with its basis, or None with "unknown: why".

Every time is on the controller clock: the fault's `applied` time is, the workload's lines are
rank 0's wall clock less the launch node's offset, and a restart run's `attempts.jsonl` is
already. `F` is the frontier before the fault: the highest update completed by then; `m` the
median step time of the updates completed before the fault.

- detect_s: the fault -> the first sign the job or library reacted: a `#train-abort`, a
  `#train-shrink`, an R-2CCL failover event, or a job attempt's failed exit (whichever first);
- progress_s: the fault -> the first update completed after the recovery step (the resume of a
  restart, the shrink, the failover; with none, after the fault itself);
- back_s: the fault -> the completion of an update beyond F;
- updates_lost: F - the checkpoint's update a restart resumed from; 1 for a shrink (it redoes the
  failed update); 0 in the library; recomputed: update numbers completed more than once;
- lost_gpu_s: ranks x (back_s - (B - F) x m), B the update of back_s (the time a fault-free job
  needs for the updates in that span); a shrink adds its dropped ranks x (the run's end - the
  shrink): those GPUs did no work for the job from then on;
- goodput: updates beyond the running frontier per second over [fault - W x m, the run's end],
  against the fault-free rate 1/m over the same window (W: `window_steps`, default 10);
- loss_delta: the loss at the last update both this run and its fault-free baseline logged,
  minus the baseline's; final_loss_delta: the `#train-end` final losses' difference.

Pure: `parse_attempts` reads text the caller read.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from r2bench.parse.training import TrainingLog, Updates
from r2bench.runfolder.attempts import attempt_events
from r2bench.workloads.train_format import TrainAbort, TrainResume, TrainShrink

STRATEGIES = ("none", "in_library", "restart", "shrink")
WINDOW_STEPS = 10
"""W: the goodput window starts this many pre-fault median steps before the fault."""
UNKNOWN = "unknown: "


@dataclass(frozen=True)
class Measure:
    """One cost metric: its value, and how it was found (or why it is unknown)."""

    value: float | None
    basis: str

    @classmethod
    def unknown(cls, why: str) -> Measure:
        """No value: `unknown: why`."""
        return cls(None, UNKNOWN + why)


@dataclass(frozen=True)
class Attempt:
    """One line of a restart run's `attempts.jsonl` (controller clock)."""

    attempt: int
    launched_at: float
    ended_at: float | None
    exit_code: int | None


@dataclass(frozen=True)
class RecoveryInputs:
    """What the cost of one run is computed from."""

    strategy: str
    log: TrainingLog
    fault_at: float | None
    """The fault applied (controller clock); None: no fault was applied."""
    offset: float = 0.0
    """Rank 0's clock less the controller's."""
    attempts: Sequence[Attempt] = ()
    failover_at: float | None = None
    """The first R-2CCL failover event after the fault (controller clock)."""
    baseline: TrainingLog | None = None
    window_steps: int = WINDOW_STEPS
    failed_exit_at: float | None = None
    """When a job that failed ended (controller clock), for a run without `attempts.jsonl`."""


@dataclass(frozen=True)
class RecoveryCost:
    """Every cost metric of one run."""

    strategy: str
    frontier: int | None
    step_s: float | None
    """m: the median step before the fault."""
    detect_s: Measure
    progress_s: Measure
    back_s: Measure
    updates_lost: Measure
    recomputed: Measure
    lost_gpu_s: Measure
    goodput: Measure
    goodput_fault_free: Measure
    loss_delta: Measure
    final_loss_delta: Measure
    steps: tuple[tuple[str, float], ...] = field(default=())
    """The recovery steps (`abort`, `exit`, `restart`, `resume`, `shrink`, `failover`) after the
    fault, each with its time (controller clock), in time order: the timeline's marks."""

    def row(self) -> dict[str, Any]:
        """The `recovery_cost` table's values: each metric and its `<name>_basis`."""
        out: dict[str, Any] = {"strategy": self.strategy, "frontier": self.frontier}
        out["step_s"] = self.step_s
        for name in METRICS:
            measure: Measure = getattr(self, name)
            out[name], out[f"{name}_basis"] = measure.value, measure.basis
        return out


METRICS = (
    *("detect_s", "progress_s", "back_s", "updates_lost", "recomputed", "lost_gpu_s"),
    *("goodput", "goodput_fault_free", "loss_delta", "final_loss_delta"),
)
"""The cost metrics, in the table's order."""


# --------------------------------------------------------------------------- reading


def parse_attempts(text: str) -> list[Attempt]:
    """The attempts of an attempts.jsonl text (`runfolder.attempts`), in attempt order; an
    attempt with no end line has none (it was cut short)."""
    launched: dict[int, float] = {}
    ended: dict[int, tuple[float | None, int | None]] = {}
    for event in attempt_events(text):
        if event.event == "launch":
            launched.setdefault(event.attempt, event.at)
        else:
            ended[event.attempt] = (event.at, event.exit_code)
    return [Attempt(n, launched[n], *ended.get(n, (None, None))) for n in sorted(launched)]


# --------------------------------------------------------------------------- the cost


@dataclass(frozen=True)
class _Clocked:
    """The printed updates on the controller clock, in print order."""

    numbers: list[int]
    ends: list[float]
    steps: list[float]


def _clocked(u: Updates, offset: float) -> _Clocked:
    return _Clocked(list(u.update), [t - offset for t in u.end], list(u.step_s))


def recovery_cost(inputs: RecoveryInputs) -> RecoveryCost:
    """The cost of the fault to one run (see the module docstring)."""
    log, fault = inputs.log, inputs.fault_at
    if fault is None:
        return _all_unknown(inputs.strategy, "no fault was applied to this run")
    printed = _clocked(log.as_printed, inputs.offset)
    before = [i for i, t in enumerate(printed.ends) if t <= fault]
    frontier = max((printed.numbers[i] for i in before), default=0)
    m = statistics.median(printed.steps[i] for i in before) if before else None
    steps = _steps(inputs, fault)
    recovered_at = _recovery_step(inputs.strategy, steps, fault)
    detect = _detect(steps, fault)
    progress = _progress(printed, fault, recovered_at, inputs.strategy)
    back, back_update = _back(printed, fault, frontier)
    lost, recomputed = _lost(inputs, frontier, fault, back), _recomputed(printed)
    ranks = log.start.ranks if log.start else None
    gpu = _lost_gpu(inputs, back, back_update, frontier, m, ranks, printed)
    goodput, free = _goodput(printed, fault, m, inputs.window_steps, steps)
    loss, final = quality(log, inputs.baseline)
    return RecoveryCost(
        inputs.strategy, frontier, m, detect, progress, back, lost, recomputed, gpu, goodput,
        free, loss, final, tuple(steps),
    )  # fmt: skip


def _all_unknown(strategy: str, why: str) -> RecoveryCost:
    none = Measure.unknown(why)
    return RecoveryCost(strategy, None, None, *([none] * len(METRICS)))  # type: ignore[arg-type]


def _steps(inputs: RecoveryInputs, fault: float) -> list[tuple[str, float]]:
    """The recovery steps after the fault, on the controller clock, in time order."""
    out: list[tuple[str, float]] = []
    for record in inputs.log.recovery:
        name = {TrainAbort: "abort", TrainResume: "resume", TrainShrink: "shrink"}.get(type(record))
        at = record.at - inputs.offset
        if name is not None and at >= fault:
            out.append((name, at))
    for a in inputs.attempts:
        if a.ended_at is not None and a.ended_at >= fault and a.exit_code != 0:
            out.append(("exit", a.ended_at))  # a job that completed reacted to nothing
        if a.attempt > 1 and a.launched_at >= fault:
            out.append(("restart", a.launched_at))
    if not inputs.attempts and inputs.failed_exit_at is not None and inputs.failed_exit_at >= fault:
        out.append(("exit", inputs.failed_exit_at))
    if inputs.failover_at is not None and inputs.failover_at >= fault:
        out.append(("failover", inputs.failover_at))
    return sorted(out, key=lambda s: s[1])


def _detect(steps: list[tuple[str, float]], fault: float) -> Measure:
    signs = [(n, t) for n, t in steps if n in ("abort", "shrink", "failover", "exit")]
    if not signs:
        return Measure.unknown("no abort, shrink, failover event or job exit after the fault")
    name, at = signs[0]
    return Measure(at - fault, f"the fault to the first {name} after it")


def _recovery_step(strategy: str, steps: list[tuple[str, float]], fault: float) -> float | None:
    """When the strategy's recovery step happened (None: it did not)."""
    wanted = {"restart": "resume", "shrink": "shrink", "in_library": "failover"}.get(strategy)
    if wanted is None:
        return fault  # nothing to wait for: any update after the fault is progress
    return next((t for n, t in steps if n == wanted), None)


def _progress(
    printed: _Clocked, fault: float, recovered_at: float | None, strategy: str
) -> Measure:
    if recovered_at is None and strategy == "in_library":
        recovered_at, step = fault, "the fault (no failover event)"
    elif recovered_at is None:
        return Measure.unknown(f"the {strategy} recovery step never happened after the fault")
    else:
        step = "the fault" if recovered_at == fault else "the recovery step"
    after = [t for t in printed.ends if t > recovered_at and t > fault]
    if not after:
        return Measure.unknown(f"no update completed after {step}")
    return Measure(min(after) - fault, f"the fault to the first update completed after {step}")


def _back(printed: _Clocked, fault: float, frontier: int) -> tuple[Measure, int | None]:
    for n, t in zip(printed.numbers, printed.ends, strict=True):
        if t > fault and n > frontier:
            return Measure(t - fault, f"the fault to update {n}, beyond the frontier {frontier}"), n
    return Measure.unknown(f"no update beyond the frontier {frontier} after the fault"), None


def _lost(inputs: RecoveryInputs, frontier: int, fault: float, back: Measure) -> Measure:
    strategy = inputs.strategy
    if strategy == "in_library":
        return Measure(0, "in the library: no update is redone")
    if strategy == "shrink":
        if any(isinstance(r, TrainShrink) for r in inputs.log.recovery):
            return Measure(1, "a shrink redoes the failed update")
        return Measure.unknown("the job never shrank")
    if strategy == "restart":
        resumes = [
            r for r in inputs.log.recovery
            if isinstance(r, TrainResume) and r.at - inputs.offset >= fault
        ]  # fmt: skip
        if not resumes:
            return Measure.unknown("the job never resumed after the fault")
        ckpt = resumes[0].update
        return Measure(frontier - ckpt, f"the frontier {frontier} - the checkpoint's {ckpt}")
    if back.value is not None:
        return Measure(0, f"strategy {strategy!r}: the job went on through the fault")
    return Measure.unknown(f"strategy {strategy!r} redoes no update: the job does not recover")


def _recomputed(printed: _Clocked) -> Measure:
    counts: dict[int, int] = {}
    for n in printed.numbers:
        counts[n] = counts.get(n, 0) + 1
    twice = sum(1 for c in counts.values() if c > 1)
    return Measure(twice, "update numbers completed more than once")


def _lost_gpu(
    inputs: RecoveryInputs, back: Measure, back_update: int | None, frontier: int,
    m: float | None, ranks: int | None, printed: _Clocked,
) -> Measure:  # fmt: skip
    if ranks is None:
        return Measure.unknown("the job's ranks are not known (no #train-start line)")
    if back.value is None or back_update is None:
        return Measure.unknown("the job never got back beyond its frontier")
    if m is None:
        return Measure.unknown("no update completed before the fault (no median step)")
    value = ranks * (back.value - (back_update - frontier) * m)
    basis = f"{ranks} ranks x ({back.value:.3g} s - {back_update - frontier} x {m:.3g} s)"
    shrink = next((r for r in inputs.log.recovery if isinstance(r, TrainShrink)), None)
    if inputs.strategy == "shrink" and shrink is not None:
        dropped = len([d for d in shrink.dropped.split(",") if d.strip()])
        rest = max(0.0, printed.ends[-1] - (shrink.at - inputs.offset))
        value += dropped * rest
        basis += f" + {dropped} dropped ranks x {rest:.3g} s (the rest of the run)"
    return Measure(value, basis)


def _goodput(
    printed: _Clocked,
    fault: float,
    m: float | None,
    window_steps: int,
    steps: Sequence[tuple[str, float]],
) -> tuple[Measure, Measure]:
    """Goodput over [fault - W x m, the run's end]: its last update, or a later recovery step
    (a job that died or hung after the fault ran on without progress until it ended)."""
    if m is None or m <= 0:
        why = "no update completed before the fault (no median step)"
        return Measure.unknown(why), Measure.unknown(why)
    start, end = fault - window_steps * m, max([printed.ends[-1], *(t for _, t in steps)])
    if end <= start:
        why = "the run ended before the window"
        return Measure.unknown(why), Measure.unknown(why)
    frontier, new = 0, 0
    for n, t in zip(printed.numbers, printed.ends, strict=True):
        if n > frontier:
            frontier = n
            new += 1 if start <= t <= end else 0
    window = f"[fault - {window_steps} x {m:.3g} s, run end] ({end - start:.3g} s)"
    return (
        Measure(new / (end - start), f"{new} new-frontier updates over {window}"),
        Measure(1 / m, f"1 / the pre-fault median step {m:.3g} s"),
    )


def quality(log: TrainingLog, base: TrainingLog | None) -> tuple[Measure, Measure]:
    """`loss_delta` and `final_loss_delta` of a run against its fault-free baseline's log."""
    if base is None:
        why = "no fault-free baseline run"
        return Measure.unknown(why), Measure.unknown(why)
    last = _last_losses(log.as_printed)
    theirs = _last_losses(base.as_printed)
    common = sorted(set(last) & set(theirs))
    if common:
        n = common[-1]
        loss = Measure(last[n] - theirs[n], f"loss at update {n} minus the baseline's")
    else:
        loss = Measure.unknown("no update logged a loss in both this run and the baseline")
    a = log.end.final_loss if log.end else None
    b = base.end.final_loss if base.end else None
    if a is None or b is None:
        final = Measure.unknown("this run or the baseline logged no final loss")
    else:
        final = Measure(a - b, "final loss minus the baseline's")
    return loss, final


def _last_losses(u: Updates) -> dict[int, float]:
    """Each update's loss as last printed (a restart's redone update: its redone loss)."""
    return {n: x for n, x in zip(u.update, u.loss, strict=True) if x == x}
