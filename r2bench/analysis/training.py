"""A training run judged: its outcome from its own log, and R-2CCL's artifact checks (test 09)
against its baseline run's log.

Per run (`training_outcome`, applied by `analysis.decision`): a run whose training log reached
its `#train-end` line has its results, as a collective run that printed its last row; one that
called a function a stub library stood in for failed ("the NCCL under test lacks
ncclCommShrink; PyTorch called it"); one whose ranks' parameter digests differed is
`wrong_results`.

Between runs (`check`): every run of an experiment with `training.baseline` (a library label)
is compared with `baseline_for` it, the fault-free run of that library with the same repeat
and training options:

- fault free: every update's loss and grad norm, and every parameter digest both logged, bit
  for bit (`Identity`: the first difference named);
- under a fault: the update the fault hit (`FaultHit`, from the update windows the failure
  evidence reads), the loss identical up to the update before it, the drift after it, and the
  hit update's step time against the median before it (`FaultCost`);
- every run: its median step time against the baseline's, and its throughput (`Speed`).

Each result carries one sentence a reader can check against the logs. Pure.
"""

from __future__ import annotations

import math
import statistics
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from r2bench.analysis.evidence import FaultEvidence, Iterations, IterationWindow, Verdict
from r2bench.analysis.windows import FaultWindow
from r2bench.parse.models import Event, EventKind, Outcome, OutcomeStatus
from r2bench.parse.training import TrainingLog, Updates
from r2bench.workloads.train_format import TrainResume

TORCH_WORKLOAD = "train_torch"
"""The PyTorch workload's name on its `#train-start` line: "PyTorch called it"."""
# The log events of a network error a job can survive (as `outcome.classify` counts them).
_NETWORK_KINDS = (
    EventKind.NET_IB_COMPLETION_ERROR,
    EventKind.SOCKET_ERROR,
    EventKind.NCCL_FATAL_ERROR,
)
# Outcomes that say nothing failed: a training failure found in the log replaces them.
_FINE = frozenset(
    {
        OutcomeStatus.OK,
        OutcomeStatus.INCOMPLETE,
        OutcomeStatus.NOT_NCCL_TESTS,
        OutcomeStatus.FAULT_WITHOUT_EFFECT,
        OutcomeStatus.FAULT_NOT_INJECTED,
    }
)
_NO_ROWS = (" 0 result rows", "0 result rows, to the end of the test")


# --------------------------------------------------------------------------- update windows


@dataclass(frozen=True)
class UpdateWindows(Iterations):
    """A training run's updates as exact iteration windows on the controller clock, each
    numbered by its update (the failure evidence then names the update a fault hit)."""

    numbers: Sequence[int] = ()

    def __getitem__(self, i: int) -> IterationWindow:  # type: ignore[override]
        if i < 0:
            i += len(self.starts)
        return IterationWindow(self.numbers[i], self.starts[i], self.ends[i], self.sizes[i], True)


def update_windows(log: TrainingLog, launch_offset: float) -> UpdateWindows:
    """The updates' windows: rank 0's wall clock less the launch node's offset, in time order
    (updates are logged in update order, which is time order)."""
    u = log.updates
    starts = [t - launch_offset for t in u.start]
    ends = [t - launch_offset for t in u.end]
    if any(a > b for a, b in pairwise(starts)):
        order = sorted(range(len(starts)), key=starts.__getitem__)
    else:
        order = list(range(len(starts)))
    return UpdateWindows(
        [starts[i] for i in order],
        [ends[i] for i in order],
        [u.allreduce_bytes[i] for i in order],
        True,
        [u.update[i] for i in order],
    )


# --------------------------------------------------------------------------- the outcome


def training_outcome(
    outcome: Outcome, log: TrainingLog | None, events: Sequence[Event] = ()
) -> Outcome:
    """The outcome once the training log is known (idempotent: a recorded outcome that has it
    already is returned as it is). Stubs called: the run failed, naming them; parameters that
    differed between ranks: `wrong_results`, naming the update; otherwise a log that reached
    its end makes an outcome that only missed nccl-tests' output `ok` (with the network
    errors the job survived), one cut short `incomplete`, and a failure's reason counts
    updates instead of result rows."""
    if log is None:
        return outcome
    if log.stubs:
        return _failed(outcome, stub_reason(log), OutcomeStatus.CRASHED)
    bad = log.disagreement
    if bad is not None:
        return _failed(outcome, disagreement_reason(bad), OutcomeStatus.WRONG_RESULTS)
    done = f"{len(log.updates)} training update(s)"
    if outcome.status in (OutcomeStatus.NOT_NCCL_TESTS, OutcomeStatus.INCOMPLETE):
        return _without_rows(outcome, log, events)
    if outcome.status is OutcomeStatus.OK and outcome.reason.startswith(_NO_ROWS[1]):
        reason = outcome.reason.replace(_NO_ROWS[1], _to_the_end(log), 1)
        return outcome.model_copy(update={"reason": reason})
    if _NO_ROWS[0] in outcome.reason:
        return outcome.model_copy(
            update={"reason": outcome.reason.replace(_NO_ROWS[0], f" {done}")}
        )
    return outcome


def stub_reason(log: TrainingLog) -> str:
    """`the NCCL under test lacks ncclCommShrink; PyTorch called it`."""
    who = "PyTorch" if log.start and log.start.workload == TORCH_WORKLOAD else "the job"
    them = "it" if len(log.stubs) == 1 else "them"
    return f"the NCCL under test lacks {', '.join(log.stubs)}; {who} called {them}"


def disagreement_reason(update: int) -> str:
    """`ranks' parameters differ after update N`."""
    return f"ranks' parameters differ after update {update}"


def _failed(outcome: Outcome, why: str, status: OutcomeStatus) -> Outcome:
    """A failure the log shows: it replaces an outcome that says nothing failed, and comes
    first in any other's reason."""
    if why in outcome.reason:
        return outcome
    if outcome.status in _FINE:
        return Outcome(status=status, reason=why, evidence=outcome.evidence)
    return outcome.model_copy(update={"reason": f"{why}; {outcome.reason}"})


def _without_rows(outcome: Outcome, log: TrainingLog, events: Sequence[Event]) -> Outcome:
    """An outcome that only missed nccl-tests' output, judged by the training log."""
    if log.complete and len(log.updates):
        return Outcome(
            status=OutcomeStatus.OK,
            reason=_to_the_end(log) + _survived(events),
            evidence=outcome.evidence,
        )
    if not len(log.updates):
        ended = "training started but logged no update"
    else:
        ended = f"training output ends after update {log.last_update} ({log.progress()})"
    return Outcome(
        status=OutcomeStatus.INCOMPLETE,
        reason=f"{ended}, without its {'#train-end'} line and without any sign of failure (cut "
        "short or still running?)",
        evidence=outcome.evidence,
    )


def _to_the_end(log: TrainingLog) -> str:
    final = log.end.final_loss if log.end else None
    loss = f" (final loss {final:.6g})" if final is not None else ""
    return f"{log.progress()}, to the end of training{loss}"


def _survived(events: Sequence[Event]) -> str:
    survived = [e for e in events if e.kind in _NETWORK_KINDS]
    if not survived:
        return ""
    return f"; survived {len(survived)} network error event(s), first: {survived[0].message}"


# --------------------------------------------------------------------------- the fault's update


@dataclass(frozen=True)
class FaultHit:
    """The update a run's first fault hit."""

    update: int | None
    """The update running when it was applied, else the first to start after it (None: it
    touched no traffic, or came after the last update)."""
    in_flight: bool
    """The update was running when the fault was applied (else it started after it)."""
    target: str
    """`node/nic` (`node` for a process fault)."""
    kind: str
    verdict: str | None
    """The failure evidence's verdict for a NIC fault (`analysis.evidence.Verdict`)."""

    def sentence(self) -> str:
        """`node1/nic3 link_down hit update 37 (running when it was applied)`."""
        head = f"{self.target} {self.kind}"
        if self.update is None:
            why = "touched no traffic" if self.verdict else "came after the last update"
            return f"{head} hit no update (it {why})"
        when = "running when it was applied" if self.in_flight else "the first after it"
        unknown = "; NIC counters unknown" if self.verdict == Verdict.UNKNOWN.value else ""
        return f"{head} hit update {self.update} ({when}{unknown})"

    def as_doc(self) -> dict[str, Any]:
        """Plain values (the tables keep them between builds)."""
        return dict(self.__dict__)


def fault_hit(
    windows: Sequence[FaultWindow],
    evidence: Sequence[FaultEvidence],
    updates: Iterations,
    complete: bool,
) -> FaultHit | None:
    """The update the run's first fault hit: the one running when it was applied, else the
    first to start after it, else (the job died in it) the one after the last logged. A NIC
    fault the evidence says touched no traffic hit none. `updates`: the update windows
    (`update_windows`); `complete`: the log reached its end."""
    if not windows:
        return None
    w = windows[0]
    ev = next((e for e in evidence if (e.window.fault, e.window.cycle) == (w.fault, w.cycle)), None)
    target = f"{w.node}/{w.nic}" if w.nic else w.node
    verdict = ev.verdict.value if ev else None
    if ev is not None and ev.verdict.without_effect:
        return FaultHit(None, False, target, w.kind, verdict)
    k = bisect_right(updates.starts, w.applied)
    if k and w.applied <= updates.ends[k - 1]:
        return FaultHit(updates[k - 1].number, True, target, w.kind, verdict)
    if k < len(updates):
        return FaultHit(updates[k].number, False, target, w.kind, verdict)
    if complete or not len(updates):
        return FaultHit(None, False, target, w.kind, verdict)
    return FaultHit(updates[-1].number + 1, True, target, w.kind, verdict)


# --------------------------------------------------------------------------- runs and baselines


@dataclass(frozen=True)
class TrainingRun:
    """What the checks read of one training run."""

    run_id: str
    library: str
    scenario: str
    repeat: int | None
    options: str
    """The run's `training:` options as canonical JSON (runs compare on them)."""
    baseline: str | None
    """The library label whose fault-free run this one is checked against."""
    faulted: bool
    """The run was dealt a fault (its spec names one, or one was injected)."""
    log: TrainingLog
    hit: FaultHit | None = None
    experiment: str = ""


def baseline_for(run: TrainingRun, runs: Sequence[TrainingRun]) -> TrainingRun | None:
    """The run `run` is checked against: of its `baseline` library, fault free, the same
    experiment, repeat and training options; never the run itself. None when absent."""
    if not run.baseline:
        return None
    for other in runs:
        if (
            other.run_id != run.run_id
            and other.library == run.baseline
            and not other.faulted
            and (other.experiment, other.repeat, other.options)
            == (run.experiment, run.repeat, run.options)
        ):
            return other
    return None


# --------------------------------------------------------------------------- the checks


@dataclass(frozen=True)
class Identity:
    """Bit identity of two logs' updates (all of them, or those before an update)."""

    identical: bool
    compared: int
    """Updates compared."""
    digests: int
    """Digests compared (both runs logged one at the update)."""
    first_update: int | None
    first: str | None
    """The first difference: `loss at update 37 differs: 4.1234 vs 4.1236`."""
    sentence: str


@dataclass(frozen=True)
class FaultCost:
    """What the fault cost a run against its baseline (test 09's numbers)."""

    hit: FaultHit
    hit_step_s: float | None
    step_s_median_before: float | None
    equal_before: Identity | None
    max_abs_dloss_after: float | None
    final_loss_delta: float | None
    eval_ppl_delta_pct: float | None
    sentence: str


@dataclass(frozen=True)
class Speed:
    """A run's step time against its baseline's, and its throughput."""

    step_s_median: float | None
    baseline_step_s_median: float | None
    overhead_pct: float | None
    tokens_per_s: float | None
    sentence: str


@dataclass(frozen=True)
class TrainingChecks:
    """Every check of one training run."""

    run: TrainingRun
    baseline: TrainingRun | None
    identity: Identity | None
    """Fault free: every update; under a fault: the updates before the one it hit."""
    fault: FaultCost | None
    speed: Speed
    sentence: str

    def row(self) -> dict[str, Any]:
        """The `training_checks` table's row."""
        ident, fault, speed = self.identity, self.fault, self.speed
        return {
            "run_id": self.run.run_id,
            "library": self.run.library,
            "scenario": self.run.scenario,
            "repeat": self.run.repeat,
            "baseline_run_id": self.baseline.run_id if self.baseline else None,
            "identical": ident.identical if ident else None,
            "first_difference_update": ident.first_update if ident else None,
            "first_difference": ident.first if ident else None,
            "hit_update": fault.hit.update if fault else None,
            "hit_step_s": fault.hit_step_s if fault else None,
            "step_s_median_before": fault.step_s_median_before if fault else None,
            "step_s_median": speed.step_s_median,
            "overhead_pct": speed.overhead_pct,
            "max_abs_dloss_after": fault.max_abs_dloss_after if fault else None,
            "final_loss_delta": fault.final_loss_delta if fault else None,
            "eval_ppl_delta_pct": fault.eval_ppl_delta_pct if fault else None,
            "tokens_per_s": speed.tokens_per_s,
            "sentence": self.sentence,
        }


CHECK_COLUMNS = (
    *("run_id", "library", "scenario", "repeat", "baseline_run_id", "identical"),
    *("first_difference_update", "first_difference", "hit_update", "hit_step_s"),
    *("step_s_median_before", "step_s_median", "overhead_pct", "max_abs_dloss_after"),
    *("final_loss_delta", "eval_ppl_delta_pct", "tokens_per_s", "sentence"),
)
"""The `training_checks` table's columns (`TrainingChecks.row`)."""


def check_all(runs: Sequence[TrainingRun]) -> list[TrainingChecks]:
    """The checks of every run, each against its baseline (`baseline_for`)."""
    return [check(run, baseline_for(run, runs)) for run in runs]


def check(run: TrainingRun, baseline: TrainingRun | None) -> TrainingChecks:
    """Every check of `run` against `baseline` (None: only its own numbers)."""
    base_log = baseline.log if baseline else None
    fault = fault_cost(run.log, base_log, run.hit) if run.faulted and run.hit else None
    if fault is not None and fault.hit.update is not None:
        identity = fault.equal_before
    else:  # fault free, or a fault that hit no update: the whole run is compared
        identity = identical(run.log, base_log) if base_log is not None else None
    speed = speed_of(run.log, base_log)
    parts = [_baseline_words(run, baseline)]
    if fault is not None:  # it says how the updates before the hit compare
        parts.append(fault.sentence)
    if identity is not None and (fault is None or fault.hit.update is None):
        parts.append(identity.sentence)
    parts.append(speed.sentence)
    return TrainingChecks(run, baseline, identity, fault, speed, "; ".join(p for p in parts if p))


def _baseline_words(run: TrainingRun, baseline: TrainingRun | None) -> str:
    if baseline is not None:
        return f"against {baseline.run_id} ({baseline.library}, fault free)"
    if run.baseline and run.library == run.baseline and not run.faulted:
        return "the baseline run"
    if run.baseline:
        return f"no fault-free {run.baseline} run with the same repeat and options to compare with"
    return "no baseline named (training.baseline)"


def identical(log: TrainingLog, base: TrainingLog, before: int | None = None) -> Identity:
    """Whether `log` is bit-identical to `base`: every update's loss and grad norm (float
    equality, a null only equal to a null) and every digest both logged; with `before`, only
    the updates numbered below it; without, also the evaluation loss both logged."""
    ours, theirs = log.updates, base.updates
    n_ours = _count_below(ours, before)
    n_theirs = _count_below(theirs, before)
    compared = digests = 0
    for i in range(max(n_ours, n_theirs)):
        if i >= n_ours or i >= n_theirs or ours.update[i] != theirs.update[i]:
            return _differs(_missing(ours, theirs, i, n_ours, n_theirs), compared, digests)
        first = _first_value_difference(ours, theirs, i)
        if first is not None:
            return _differs((ours.update[i], first), compared, digests)
        if ours.digest[i] is not None and theirs.digest[i] is not None:
            digests += 1
        compared += 1
    if before is None and log.end and base.end:
        a, b = log.end.eval_loss, base.end.eval_loss
        if a is not None and b is not None and a != b:
            return _differs((None, f"eval loss differs: {a!r} vs {b!r}"), compared, digests)
    scope = "every update" if before is None else f"every update before update {before}"
    what = "loss and grad norm" + (f", {digests} parameter digest(s)" if digests else "")
    tail = " and the eval loss" if before is None and _both_eval(log, base) else ""
    text = f"bit-identical at {scope} ({compared}: {what}){tail}"
    return Identity(True, compared, digests, None, None, text)


def _count_below(u: Updates, before: int | None) -> int:
    if before is None:
        return len(u)
    return bisect_right(u.update, before - 1)


def _both_eval(log: TrainingLog, base: TrainingLog) -> bool:
    return bool(
        log.end and base.end and log.end.eval_loss is not None and base.end.eval_loss is not None
    )


def _missing(ours: Updates, theirs: Updates, i: int, n_ours: int, n_theirs: int) -> tuple[int, str]:
    """The first update one log has and the other lacks, at position `i`."""
    mine = ours.update[i] if i < n_ours else None
    base = theirs.update[i] if i < n_theirs else None
    if mine is None or (base is not None and base < mine):
        assert base is not None
        return base, f"update {base} missing (this run logged {n_ours} update(s))"
    return mine, f"update {mine} not in the baseline (it logged {n_theirs} update(s))"


def _first_value_difference(ours: Updates, theirs: Updates, i: int) -> str | None:
    n = ours.update[i]
    for name in ("loss", "grad_norm"):
        a, b = getattr(ours, name)[i], getattr(theirs, name)[i]
        if not (a == b or (a != a and b != b)):  # NaN: a null both logged
            shown = name.replace("_", " ")
            return f"{shown} at update {n} differs: {_shown(a)} vs {_shown(b)}"
    da, db = ours.digest[i], theirs.digest[i]
    if da is not None and db is not None and da != db:
        return f"parameter digest at update {n} differs: {da[:12]} vs {db[:12]}"
    return None


def _shown(value: float) -> str:
    """A value as it round-trips (every bit that differs shows), null for NaN."""
    return "null" if value != value else repr(value)


def _differs(first: tuple[int | None, str], compared: int, digests: int) -> Identity:
    update, text = first
    return Identity(False, compared, digests, update, text, f"not bit-identical: {text}")


def fault_cost(log: TrainingLog, base: TrainingLog | None, hit: FaultHit) -> FaultCost:
    """The fault's cost: the hit update's step time against the median before it, and with a
    baseline the loss identical before it and its drift after it."""
    u, n = log.updates, hit.update
    at = u.index_of(n) if n is not None else None
    hit_step = _hit_step(log, at)
    before = _median(u.step_s[: _count_below(u, n)]) if n is not None else None
    equal = drift = final = ppl = None
    if base is not None and n is not None:
        equal = identical(log, base, before=n)
        drift = _max_drift(u, base.updates, n)
        final = _delta(
            log.end.final_loss if log.end else None, base.end.final_loss if base.end else None
        )
        ev = _delta(
            log.end.eval_loss if log.end else None, base.end.eval_loss if base.end else None
        )
        ppl = math.expm1(ev) * 100 if ev is not None else None
    parts = [hit.sentence()]
    if equal is not None:
        parts.append(
            f"bit-identical to the baseline up to update {n - 1}"  # type: ignore[operator]
            if equal.identical
            else f"before it, {equal.first}"
        )
    if hit_step is not None and before is not None:
        parts.append(
            f"update {n} took {hit_step:.3g} s against a median of {before:.3g} s before it"
        )
    elif n is not None and at is None:
        parts.append(f"update {n} never completed")
    if drift is not None:
        parts.append(f"after it the loss differs from the baseline's by at most {drift:.3g}")
    if final is not None:
        parts.append(f"final loss {final:+.3g}")
    if ppl is not None:
        parts.append(f"eval perplexity {ppl:+.3g} %")
    return FaultCost(hit, hit_step, before, equal, drift, final, ppl, "; ".join(parts))


def _hit_step(log: TrainingLog, at: int | None) -> float | None:
    """The hit update's step time (`at`: its index): as the job timed it, or, when the job was
    restarted (it resumed from a checkpoint), from the end of the update before it to its own
    end on rank 0's clock: the process that finished it timed only its own last try."""
    if at is None:
        return None
    u = log.updates
    resumed = any(isinstance(record, TrainResume) for record in log.recovery)
    if resumed and at > 0 and u.update[at - 1] == u.update[at] - 1:
        return u.end[at] - u.end[at - 1]
    return u.step_s[at]


def _max_drift(ours: Updates, theirs: Updates, hit: int) -> float | None:
    """max |loss - baseline loss| over the updates from the hit on both logged."""
    worst: float | None = None
    j = _count_below(theirs, hit)
    for i in range(_count_below(ours, hit), len(ours)):
        n = ours.update[i]
        while j < len(theirs) and theirs.update[j] < n:
            j += 1
        if j < len(theirs) and theirs.update[j] == n:
            d = abs(ours.loss[i] - theirs.loss[j])
            if d == d:  # a null loss on either side: not compared
                worst = d if worst is None else max(worst, d)
    return worst


def _delta(a: float | None, b: float | None) -> float | None:
    return a - b if a is not None and b is not None else None


def _median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if len(values) else None


def speed_of(log: TrainingLog, base: TrainingLog | None) -> Speed:
    """Median step time (and against the baseline's, in %) and tokens/s over the whole run:
    the tokens of every update (its tokens/s x step time) over first start to last end."""
    u = log.updates
    median = _median(u.step_s)
    base_median = _median(base.updates.step_s) if base is not None else None
    overhead = (
        (median / base_median - 1) * 100
        if median is not None and base_median is not None and base_median > 0
        else None
    )
    span = (u.end[-1] - u.start[0]) if len(u) else 0.0
    tokens = sum(t * s for t, s in zip(u.tokens_per_s, u.step_s, strict=True))
    throughput = tokens / span if span > 0 else None
    parts = []
    if median is not None:
        parts.append(f"median step {median:.3g} s")
    if overhead is not None:
        parts.append(f"{overhead:+.3g} % against the baseline's {base_median:.3g} s")
    if throughput is not None:
        parts.append(f"{throughput:,.0f} tokens/s over {len(u)} updates")
    return Speed(median, base_median, overhead, throughput, ", ".join(parts))
