"""The restart supervisor's decisions and its record (pure: no processes, no clock of its own).

A `restart` run whose job exits non-zero before the harness deadline is launched again with the
same command, after the experiment's `restart_delay_s`, up to `restart_limit` times, while the
run's deadline leaves room. An attempt that the job itself refused (the workloads' usage exit:
bad settings, or a checkpoint that an earlier start wrote and that is gone) is not restarted: the
next start would be refused the same way. Every attempt's launch and end go to the run folder's
attempts.jsonl (controller clock), one JSON object a line, as they happen.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from r2bench.config.experiment import MIN_DEADLINE_S, RecoveryStrategy
from r2bench.parse.models import Outcome, OutcomeStatus
from r2bench.plan.runspec import RunRecovery
from r2bench.runfolder.attempts import AttemptEvent
from r2bench.workloads.train_options import EXIT_USAGE


@dataclass(frozen=True)
class Attempt:
    """One start of a run's job, ended."""

    number: int
    launched_at: float
    ended_at: float
    exit_code: int | None
    timed_out: bool

    @property
    def failed(self) -> bool:
        """The job exited by itself with a non-zero code (not killed at the deadline)."""
        return not self.timed_out and self.exit_code not in (None, 0)

    @property
    def refused(self) -> bool:
        """The job refused to start (its usage exit): restarting cannot help."""
        return not self.timed_out and self.exit_code == EXIT_USAGE


def restart_pause(
    recovery: RunRecovery | None,
    attempts: list[Attempt],
    interrupted: bool,
    deadline_at: float,
    now: float,
) -> float | None:
    """Seconds to wait before launching the job again, or None when it is not restarted: not a
    restart run, interrupted, the last attempt did not fail by itself, the restarts are spent,
    or the deadline leaves less than the delay plus the shortest run."""
    if recovery is None or recovery.strategy is not RecoveryStrategy.RESTART:
        return None
    if interrupted or not attempts or not attempts[-1].failed or attempts[-1].refused:
        return None
    if len(attempts) - 1 >= recovery.restart_limit:
        return None
    if now + recovery.restart_delay_s + MIN_DEADLINE_S > deadline_at:
        return None
    return recovery.restart_delay_s


def supervised_outcome(
    outcome: Outcome, recovery: RunRecovery | None, attempts: list[Attempt]
) -> Outcome:
    """The run's outcome with its restarts said: a failed restart run that spent its restarts
    "gave up after N restarts"; one the deadline cut short names the restarts it had."""
    restarts = len(attempts) - 1
    if recovery is None or restarts < 1 or outcome.status is OutcomeStatus.OK:
        return outcome
    plural = "s" if restarts != 1 else ""
    if attempts[-1].refused:
        reason = f"restart {restarts} was refused by the job: {outcome.reason}"
    elif restarts >= recovery.restart_limit and attempts[-1].failed:
        reason = f"gave up after {restarts} restart{plural}: {outcome.reason}"
    else:
        reason = f"after {restarts} restart{plural}: {outcome.reason}"
    return outcome.model_copy(update={"reason": reason})


class AttemptLog:
    """attempts.jsonl of one run folder, appended to as attempts start and end."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def launched(self, attempt: int, at: float) -> None:
        """An attempt started."""
        self._append(AttemptEvent(attempt=attempt, event="launch", at=at))

    def ended(self, attempt: Attempt) -> None:
        """An attempt ended."""
        self._append(
            AttemptEvent(
                attempt=attempt.number,
                event="end",
                at=attempt.ended_at,
                exit_code=attempt.exit_code,
                timed_out=attempt.timed_out,
            )
        )

    def _append(self, event: AttemptEvent) -> None:
        with self.path.open("a", encoding="utf-8") as out:
            out.write(event.model_dump_json() + "\n")
