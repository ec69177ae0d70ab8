"""The restart supervisor's decisions (when a restart run's job is launched again, and the
outcome it ends with) and its attempts.jsonl record."""

from __future__ import annotations

from pathlib import Path

import pytest

from r2bench.config.experiment import RecoveryStrategy
from r2bench.parse.models import Outcome, OutcomeStatus
from r2bench.plan.runspec import RunRecovery
from r2bench.runfolder.attempts import read_attempts
from r2bench.sweep.restarts import (
    Attempt,
    AttemptLog,
    restart_pause,
    supervised_outcome,
)

DEADLINE = 1000.0


def _recovery(strategy: str = "restart", limit: int = 3, delay: float = 2.0) -> RunRecovery:
    return RunRecovery(
        strategy=RecoveryStrategy(strategy), watchdog_s=5, checkpoint_every=10,
        restart_limit=limit, restart_delay_s=delay,
    )  # fmt: skip


def _attempts(*codes: int | None, timed_out: bool = False) -> list[Attempt]:
    return [
        Attempt(i + 1, 10.0 * i, 10.0 * i + 5, code, timed_out and i == len(codes) - 1)
        for i, code in enumerate(codes)
    ]


def test_a_failed_restart_job_is_launched_again_after_the_delay() -> None:
    assert restart_pause(_recovery(), _attempts(4), False, DEADLINE, 100.0) == 2.0
    assert restart_pause(_recovery(), _attempts(4, 4, 4), False, DEADLINE, 100.0) == 2.0


@pytest.mark.parametrize(
    ("recovery", "attempts", "interrupted", "now", "why"),
    [
        (_recovery(), _attempts(0), False, 100.0, "the job completed"),
        (_recovery(), _attempts(None, timed_out=True), False, 100.0, "killed at the deadline"),
        (_recovery(), _attempts(4, 4, 4, 4), False, 100.0, "three restarts spent"),
        (_recovery(limit=0), _attempts(4), False, 100.0, "no restart allowed"),
        (_recovery(), _attempts(4), True, 100.0, "interrupted"),
        (_recovery(), _attempts(4, 6), False, 100.0, "the restart was refused by the job"),
        (_recovery(), _attempts(4), False, DEADLINE - 2.5, "no room before the deadline"),
        (_recovery("shrink"), _attempts(4), False, 100.0, "not a restart run"),
        (_recovery("none"), _attempts(4), False, 100.0, "not a restart run"),
        (None, _attempts(4), False, 100.0, "no recovery at all"),
    ],
)
def test_no_restart_when(
    recovery: RunRecovery | None, attempts: list[Attempt], interrupted: bool, now: float, why: str
) -> None:
    assert restart_pause(recovery, attempts, interrupted, DEADLINE, now) is None, why


def _outcome(status: OutcomeStatus, reason: str = "exit 4: watchdog") -> Outcome:
    return Outcome(status=status, reason=reason)


def test_a_run_that_spent_its_restarts_gave_up() -> None:
    failed = supervised_outcome(_outcome(OutcomeStatus.CRASHED), _recovery(), _attempts(4, 4, 4, 4))
    assert failed.reason == "gave up after 3 restarts: exit 4: watchdog"
    assert failed.status is OutcomeStatus.CRASHED


def test_a_run_cut_short_names_its_restarts_and_ok_runs_are_left_alone() -> None:
    cut = supervised_outcome(
        _outcome(OutcomeStatus.TIMEOUT, "deadline"), _recovery(), _attempts(4, None, timed_out=True)
    )
    assert cut.reason == "after 1 restart: deadline"
    ok = _outcome(OutcomeStatus.OK, "completed")
    assert supervised_outcome(ok, _recovery(), _attempts(4, 0)) == ok
    first = _outcome(OutcomeStatus.CRASHED)
    assert supervised_outcome(first, _recovery(), _attempts(4)) == first
    assert supervised_outcome(first, None, _attempts(4, 4)) == first


def test_a_restart_the_job_refused_says_so_before_the_limit() -> None:
    refused = supervised_outcome(
        _outcome(OutcomeStatus.CRASHED, "checkpoint of update 10 is gone"), _recovery(),
        _attempts(4, 6),
    )  # fmt: skip
    assert refused.reason == "restart 1 was refused by the job: checkpoint of update 10 is gone"
    assert refused.status is OutcomeStatus.CRASHED


def test_attempts_jsonl_holds_each_launch_and_end(tmp_path: Path) -> None:
    path = tmp_path / "attempts.jsonl"
    assert read_attempts(path) == []
    log = AttemptLog(path)
    for attempt in _attempts(4, 0):
        log.launched(attempt.number, attempt.launched_at)
        log.ended(attempt)
    events = read_attempts(path)
    assert [(e.attempt, e.event, e.exit_code) for e in events] == [
        (1, "launch", None), (1, "end", 4), (2, "launch", None), (2, "end", 0),
    ]  # fmt: skip
    assert events[1].at == 5.0 and events[2].at == 10.0
    path.write_text(path.read_text() + "not json\n")
    with pytest.raises(ValueError, match=r"attempts.jsonl:5: not an attempt record"):
        read_attempts(path)
