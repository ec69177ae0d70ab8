"""A restarted job's outcome is decided on its last start: the first start's failure (watchdog,
NCCL socket errors, mpirun's non-zero exit) is history. Checked on a real restart run captured on
the GPU machine (tests/data/gpu-recovery/README.md), which the sweep once judged `crashed`."""

from __future__ import annotations

import shutil
from pathlib import Path

from r2bench.analysis.attempts import last_attempt_events
from r2bench.analysis.parsedrun import parse_run
from r2bench.analysis.training import fault_cost
from r2bench.parse.models import Event, EventKind, OutcomeStatus
from r2bench.runfolder import runformat, runmodel
from tests.support import paths

RESTART_RUN = paths.REPO / "tests" / "data" / "gpu-recovery" / "restart-run"


def test_a_restart_that_trained_to_the_end_is_ok(tmp_path: Path) -> None:
    run_dir = tmp_path / RESTART_RUN.name
    shutil.copytree(RESTART_RUN, run_dir)
    recorded = runmodel.load_end(run_dir)
    assert recorded is not None and recorded.outcome.status is OutcomeStatus.CRASHED
    # Decide again as the sweep does: from the logs, each event with the file it came from
    # (events.jsonl keeps no file: a run decided from it keeps every start's events).
    (run_dir / runformat.OUTCOME).unlink()
    (run_dir / runformat.EVENTS).unlink()
    run = parse_run(runmodel.load_run(run_dir))
    assert run.outcome is not None
    assert run.outcome.status is OutcomeStatus.OK, run.outcome.reason
    assert run.training is not None and run.training.complete
    assert any(e.kind is EventKind.SOCKET_ERROR for _, e in run.events)  # the history is kept


def _event(line: int) -> Event:
    return Event(kind=EventKind.NCCL_WARN, line=line, text=f"line {line}")


def test_only_the_last_starts_lines_decide() -> None:
    events = [("stderr.txt", _event(n)) for n in (1, 2, 3, 4)] + [("other", _event(1))]
    arrivals: dict[str, list[float] | None] = {"stderr.txt": [1.0, 2.0, 5.0, 6.0]}
    kept = last_attempt_events(events, [0.5, 4.0], arrivals)
    assert [(s, e.line) for s, e in kept] == [("stderr.txt", 3), ("stderr.txt", 4), ("other", 1)]
    assert last_attempt_events(events, [0.5], arrivals) == events  # one start: all of them
    assert last_attempt_events(events, [0.5, 4.0], {"stderr.txt": None}) == events  # no times


def test_the_hit_updates_step_of_a_restarted_run_spans_the_restart(tmp_path: Path) -> None:
    """Update 11 was cut, the job aborted, restarted and resumed from update 10: the update
    took from update 10's end to its own (27.6 s on rank 0's clock), not the 0.917 s its
    second process timed."""
    run = parse_run(runmodel.load_run(RESTART_RUN))
    assert (
        run.training is not None and run.training_hit is not None and run.training_hit.update == 11
    )
    updates = run.training.updates
    at = updates.index_of(11)
    assert at is not None and updates.step_s[at] < 1.0  # what the resumed process timed
    cost = fault_cost(run.training, None, run.training_hit)
    assert cost.hit_step_s == updates.end[at] - updates.end[at - 1]
    assert 27.0 < cost.hit_step_s < 28.0
    assert "update 11 took 27.6 s" in cost.sentence
