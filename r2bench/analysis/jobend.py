"""When a run's job ended, on the controller clock: where its fault windows stop.

The sweep records when the launcher returned (`outcome.json` `ended_at`). A job that crashed
can end well before that: its ranks die at the fault and mpirun takes seconds more to tear
down (the quickstart's stock NCCL run: the ranks' last line 3 s before mpirun's own help
lines and its return). A fault window drawn to the link's return after that shows a fault on
a job that no longer ran.

So a crashed run's job ends at the last sign of its ranks: the arrival of the last line they
printed on stdout (`stdout.times`), or the last NCCL log line with its own stamp, whichever is
later. A fault applied after that contradicts it (the job was there to be hit): then, as for
every other outcome (a hung job lives until it is killed), the job ends when the launcher
returned.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from r2bench.parse.models import OutcomeStatus

LAUNCHER_RETURNED = "the launcher returned (outcome.json ended_at)"
RANKS_LAST_SEEN = "the ranks' last line (the job crashed)"


@dataclass(frozen=True)
class JobEnd:
    """When the job ended (controller clock) and how that is known."""

    at: float
    basis: str


def job_end(
    ended_at: float | None,
    status: OutcomeStatus | None,
    ranks_last_seen: Iterable[float],
    faults_applied: Iterable[float],
) -> JobEnd | None:
    """The job's end: for a crashed run the last of `ranks_last_seen` (times its ranks were
    heard from, controller clock) when no fault came after it, else `ended_at`; None when
    neither is known."""
    launcher = JobEnd(ended_at, LAUNCHER_RETURNED) if ended_at is not None else None
    if status is not OutcomeStatus.CRASHED:
        return launcher
    last = max((t for t in ranks_last_seen if t == t), default=None)
    if last is None or any(applied > last for applied in faults_applied):
        return launcher
    if ended_at is not None and last >= ended_at:
        return launcher
    return JobEnd(last, RANKS_LAST_SEEN)
