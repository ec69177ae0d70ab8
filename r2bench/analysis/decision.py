"""A run's outcome, decided in one place.

Every way a run gets its outcome goes through `decide`: the sweep when it records a run it
just finished (through `parsedrun.parse_run`, with what only it saw of the job: `JobFacts`),
`parse_run` for a complete run folder without outcome.json, `r2bench parse` and
`r2bench import` for logs. The steps, in order: the logs' verdict (`outcome.classify`); an
armed software fault that never fired (`software_fault_check`); a verifying workload's own
account (`verify.with_verification`); the sweep's faults that never fired or could not be
applied; the failure evidence of NIC faults (`evidence.apply_to_outcome`).

A recorded outcome (outcome.json) is not decided again: `revisit` applies to it the two
steps a folder alone can settle, the workload's account and the evidence. For a run this
r2bench recorded that changes nothing (the sweep decided with the same evidence); a run
recorded by an older r2bench gains what it did not know then.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from r2bench.analysis.evidence import FaultEvidence, apply_to_outcome
from r2bench.analysis.outcome import classify, software_fault_check
from r2bench.analysis.training import training_outcome
from r2bench.parse.library import other_file_loaded, other_library_loaded
from r2bench.parse.models import Event, Evidence, Outcome, OutcomeStatus, ParsedNcclTests
from r2bench.parse.training import TrainingLog
from r2bench.parse.verify import Verification, with_verification
from r2bench.runfolder import runformat


@dataclass(frozen=True)
class JobFacts:
    """What the sweep saw of a job that the run folder's files do not say."""

    ended_at: float
    """When the launcher returned (epoch s, controller clock)."""
    exit_code: int | None = None
    timed_out: bool = False
    interrupted: bool = False
    launched: bool = True
    never_fired: tuple[str, ...] = ()
    """Faults whose trigger never came."""
    first_result_seen: bool = False
    """Whether the job printed a result line the fault driver recognised."""
    fault_problems: tuple[str, ...] = ()
    """Faults that could not be armed or applied."""
    library_dir: str | None = None
    """The folder the run's library is to be loaded from (`PlannedRun.library_dir`)."""


def decide(
    parsed: ParsedNcclTests,
    events: Sequence[tuple[str, Event]],
    *,
    env: Mapping[str, object] | None = None,
    verification: Verification | None = None,
    evidence: Sequence[FaultEvidence] = (),
    job: JobFacts | None = None,
    source: str = runformat.STDOUT,
    training: TrainingLog | None = None,
) -> Outcome:
    """The outcome of one run from what its logs say (`events`: (source file, event)), its
    environment, the verifying workload's account, the NIC faults' evidence and, for a run
    the sweep just finished, what the sweep saw of its job. `source`: the file the results
    were read from, named in the evidence. `training`: a training workload's log, whose end
    line ends the job's output as nccl-tests' concluding line does (`analysis.training`)."""
    found = [event for _, event in events]
    outcome = classify(
        job.exit_code if job else None,
        timed_out=bool(job and job.timed_out),
        interrupted=bool(job and job.interrupted),
        parsed=_ended(parsed, training),
        events=found,
        source=source,
        event_sources=[source for source, _ in events],
    )
    outcome = training_outcome(outcome, training, found)
    if job is not None:  # a program r2bench built against the library under test
        outcome = served_library_check(outcome, parsed, source, job.library_dir)
    outcome = software_fault_check(outcome, {k: str(v) for k, v in (env or {}).items()}, found)
    outcome = with_verification(outcome, verification, source) or outcome
    if job is not None and job.never_fired:
        outcome = _unfired_outcome(outcome, job)
    if job is not None and (not job.launched or job.fault_problems):
        outcome = _harness_outcome(outcome, job)
    return apply_to_outcome(outcome, evidence) or outcome


_STOPPED = (
    OutcomeStatus.CRASHED, OutcomeStatus.TIMEOUT, OutcomeStatus.LAUNCH_FAILED,
    OutcomeStatus.INTERRUPTED, OutcomeStatus.BUILD_FAILED,
)  # fmt: skip


def served_library_check(
    outcome: Outcome, parsed: ParsedNcclTests, source: str, library_dir: str | None = None
) -> Outcome:
    """A run whose program loaded another NCCL than r2bench built it against (the versions
    differ), or a libnccl file from outside the library's folder `library_dir` (where the
    output names the file), is `wrong_library` (its results are that NCCL's); a run that
    stopped keeps its status, the finding first in its reason. Only for runs r2bench
    launched: someone else's log may pair other headers and library on purpose."""
    problem = other_library_loaded(parsed)
    text = f"nccl-headers={parsed.nccl_headers} nccl-library={parsed.nccl_library}"
    if problem is None:
        problem = other_file_loaded(parsed, library_dir)
        text = f"loaded {parsed.library_path}"
    if problem is None:
        return outcome
    if outcome.status in _STOPPED:
        return outcome.model_copy(update={"reason": f"{problem}; {outcome.reason}"})
    return Outcome(
        status=OutcomeStatus.WRONG_LIBRARY, reason=problem,
        evidence=[Evidence(text=text, source=source)],
    )  # fmt: skip


def revisit(
    recorded: Outcome,
    verification: Verification | None,
    evidence: Sequence[FaultEvidence],
    training: TrainingLog | None = None,
) -> Outcome:
    """A recorded outcome with the training log, the workload's account and the NIC faults'
    evidence applied (each leaves an outcome that already has it as it is)."""
    outcome = training_outcome(recorded, training)
    outcome = with_verification(outcome, verification) or outcome
    return apply_to_outcome(outcome, evidence) or outcome


def _ended(parsed: ParsedNcclTests, training: TrainingLog | None) -> ParsedNcclTests:
    """The results as the classifier is to read them: a training log that reached its end
    line ends the output complete (network errors before it were survived), as nccl-tests'
    `# Collective test concluded` does."""
    if training is None or not training.complete or parsed.concluded:
        return parsed
    return parsed.model_copy(update={"concluded": True})


def _unfired_outcome(outcome: Outcome, job: JobFacts) -> Outcome:
    """A planned fault whose trigger never came: an ok run measured no fault; any other outcome
    says so beside its own reason (e.g. no first result line was recognised)."""
    why = "the run ended before its trigger" + (
        "" if job.first_result_seen else " (no result line was seen)"
    )
    text = f"{', '.join(job.never_fired)} never fired: {why}"
    if outcome.status is OutcomeStatus.OK:
        return Outcome(
            status=OutcomeStatus.FAULT_NOT_INJECTED, reason=text, evidence=outcome.evidence
        )
    return outcome.model_copy(update={"reason": f"{outcome.reason}; {text}"})


def _harness_outcome(outcome: Outcome, job: JobFacts) -> Outcome:
    """The outcome when the harness itself had trouble (not launched, or a fault not armed or
    not applied)."""
    reason = "; ".join(job.fault_problems)
    if not job.launched:
        return Outcome(status=OutcomeStatus.LAUNCH_FAILED, reason=f"not launched: {reason}")
    return outcome.model_copy(update={"reason": f"{outcome.reason} (fault trouble: {reason})"})
