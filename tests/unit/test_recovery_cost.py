"""The cost of one fault per recovery strategy (`analysis.recovery_cost`), on synthetic logs
written with `train_format`'s own records: each metric's definition checked by its number."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from r2bench.analysis.recovery_cost import (
    WINDOW_STEPS,
    Attempt,
    RecoveryInputs,
    parse_attempts,
    recovery_cost,
)
from r2bench.parse.training import parse_training
from r2bench.runfolder.runmodel import SpecFields
from r2bench.sweep.restarts import Attempt as SupervisedAttempt
from r2bench.sweep.restarts import AttemptLog
from r2bench.workloads.train_format import (
    TrainAbort,
    TrainCheckpoint,
    TrainEnd,
    TrainResume,
    TrainShrink,
    TrainStart,
    UpdateLine,
)

STEP = 0.1
OFFSET = 5.0
"""Rank 0's clock is 5 s ahead of the controller's."""
T0 = 1000.0
"""Controller time when update 1 starts."""
RANKS = 4


def start(updates: int = 40) -> str:
    return TrainStart(
        workload="train_emulated", model="tiny", parameters=10, ranks=RANKS, seed=1,
        updates=updates, batch=1, seq_len=1, allreduce_bytes=40, library="emulated-lib",
    ).text()  # fmt: skip


def update(n: int, end: float, loss: float | None = None) -> str:
    """Update `n` ending at controller time `end`."""
    value = 1.0 / n if loss is None else loss
    t = end + OFFSET
    return UpdateLine(n, t - STEP, t, STEP, value, 1.0, 1.0, 40).text()


def rank0(t: float) -> float:
    return t + OFFSET


def baseline_text(updates: int = 40) -> str:
    lines = [start(updates)]
    lines += [update(n, T0 + n * STEP) for n in range(1, updates + 1)]
    lines.append(TrainEnd(updates, 0.5).text())
    return "\n".join(lines) + "\n"


FAULT = T0 + 25 * STEP + 0.05
"""Applied half way through update 26: the frontier is 25."""


def restart_text() -> tuple[str, list[Attempt]]:
    """Checkpoints at 10 and 20; the watchdog aborts 2 s after the fault; the supervisor
    relaunches 1 s later; the job resumes from 20 at +4 s and redoes 21..25."""
    lines = [start()]
    for n in range(1, 26):
        lines.append(update(n, T0 + n * STEP))
        if n % 10 == 0:
            lines.append(TrainCheckpoint(n, rank0(T0 + n * STEP + 0.01), 0.01).text())
    lines.append(TrainAbort(26, rank0(FAULT + 2.0), 2.0).text())
    lines.append(TrainResume(20, rank0(FAULT + 4.0), 2).text())
    t = FAULT + 4.0
    for n in range(21, 41):
        t += STEP
        lines.append(update(n, t, loss=1.0 / n + (0.01 if n == 40 else 0.0)))
    lines.append(TrainEnd(40, 0.52).text())
    attempts = [
        Attempt(1, T0 - 1.0, FAULT + 2.1, 4),
        Attempt(2, FAULT + 3.1, t + 0.5, 0),
    ]
    return "\n".join(lines) + "\n", attempts


def cost(text: str, strategy: str, **kwargs: object):  # type: ignore[no-untyped-def]
    log = parse_training(text)
    assert log is not None
    base = parse_training(baseline_text())
    return recovery_cost(
        RecoveryInputs(strategy, log, FAULT, OFFSET, baseline=base, **kwargs)  # type: ignore[arg-type]
    )


def test_the_parser_reads_the_recovery_records_and_keeps_repeats_as_printed() -> None:
    text, _ = restart_text()
    log = parse_training(text)
    assert log is not None
    kinds = [type(r).__name__ for r in log.recovery]
    assert kinds == ["TrainCheckpoint", "TrainCheckpoint", "TrainAbort", "TrainResume"]
    assert log.unreadable == 0
    assert log.repeated == 5  # 21..25 redone
    assert len(log.as_printed) == 45 and len(log.updates) == 40
    assert list(log.as_printed.update[25:27]) == [21, 22]


def test_restart_cost_each_metric() -> None:
    text, attempts = restart_text()
    c = cost(text, "restart", attempts=attempts)
    assert c.frontier == 25 and c.step_s == pytest.approx(STEP)
    assert c.detect_s.value == pytest.approx(2.0)
    assert "abort" in c.detect_s.basis
    assert c.progress_s.value == pytest.approx(4.1)  # update 21 after the resume
    assert c.back_s.value == pytest.approx(4.0 + 6 * STEP)  # update 26
    assert c.updates_lost.value == 5 and "checkpoint" in c.updates_lost.basis
    assert c.recomputed.value == 5
    assert c.lost_gpu_s.value == pytest.approx(RANKS * (4.6 - 1 * STEP))
    names = [name for name, _ in c.steps]
    assert names == ["abort", "exit", "restart", "resume"]
    assert c.loss_delta.value == pytest.approx(0.01)  # update 40 against the baseline's
    assert c.final_loss_delta.value == pytest.approx(0.02)


def test_goodput_counts_only_new_frontier_updates_in_the_window() -> None:
    text, attempts = restart_text()
    c = cost(text, "restart", attempts=attempts)
    # window [fault - 10 x 0.1, the last update's end]: updates 16..25 before the fault
    # (their ends lie after fault - 1 s: 16 ends at T0+1.6 = fault-0.95), then 26..40.
    end = FAULT + 4.0 + 20 * STEP
    expected = (10 + 15) / (end - (FAULT - 1.0))
    assert c.goodput.value == pytest.approx(expected)
    assert c.goodput_fault_free.value == pytest.approx(1 / STEP)


def test_in_library_loses_only_the_stall() -> None:
    lines = [start()]
    lines += [update(n, T0 + n * STEP) for n in range(1, 26)]
    stall = 1.5
    lines += [update(n, T0 + n * STEP + stall) for n in range(26, 41)]
    lines.append(TrainEnd(40, 0.5).text())
    c = cost("\n".join(lines), "in_library", failover_at=FAULT + 0.7)
    assert c.detect_s.value == pytest.approx(0.7) and "failover" in c.detect_s.basis
    back = T0 + 26 * STEP + stall - FAULT
    assert c.progress_s.value == pytest.approx(back)
    assert c.back_s.value == pytest.approx(back)
    assert c.updates_lost.value == 0 and c.recomputed.value == 0
    assert c.lost_gpu_s.value == pytest.approx(RANKS * (back - STEP))
    assert c.final_loss_delta.value == pytest.approx(0.0)


def test_shrink_redoes_one_update_and_charges_the_dropped_ranks() -> None:
    lines = [start()]
    lines += [update(n, T0 + n * STEP) for n in range(1, 26)]
    lines.append(TrainShrink(26, rank0(FAULT + 3.0), "2,3", 2, 3.0).text())
    t = FAULT + 3.0
    for n in range(26, 41):
        t += STEP
        lines.append(update(n, t))
    c = cost("\n".join(lines), "shrink")
    assert c.detect_s.value == pytest.approx(3.0) and "shrink" in c.detect_s.basis
    assert c.progress_s.value == pytest.approx(3.1)
    assert c.updates_lost.value == 1
    rest = t - (FAULT + 3.0)
    assert c.lost_gpu_s.value == pytest.approx(RANKS * (3.1 - STEP) + 2 * rest)
    assert "dropped" in c.lost_gpu_s.basis
    assert "no final loss" in c.final_loss_delta.basis  # the shrunk job printed no end line


def test_a_job_that_never_recovers_is_unknown_with_why() -> None:
    lines = [start()] + [update(n, T0 + n * STEP) for n in range(1, 26)]
    c = cost("\n".join(lines), "none", attempts=[Attempt(1, T0 - 1, FAULT + 9.0, 1)])
    assert c.detect_s.value == pytest.approx(9.0) and "exit" in c.detect_s.basis
    for measure in (c.progress_s, c.back_s, c.lost_gpu_s, c.updates_lost):
        assert measure.value is None and measure.basis.startswith("unknown: ")
    assert "frontier 25" in c.back_s.basis


def test_no_fault_applied_makes_every_metric_unknown() -> None:
    log = parse_training(baseline_text())
    assert log is not None
    c = recovery_cost(RecoveryInputs("restart", log, None))
    row = c.row()
    assert row["detect_s"] is None
    assert row["back_s_basis"] == "unknown: no fault was applied to this run"


def test_attempts_are_read_as_the_sweep_writes_them_and_bad_lines_skipped(
    tmp_path: Path,
) -> None:
    path = tmp_path / "attempts.jsonl"
    log = AttemptLog(path)  # the sweep's own writer: the reader must take what it writes
    log.launched(1, 1.0)
    log.ended(SupervisedAttempt(1, 1.0, 2.5, 4, False))
    log.launched(2, 3.0)
    text = path.read_text() + '{"attempt": 2, "event": "end", "at": 9.'  # cut short
    assert parse_attempts(text) == [Attempt(1, 1.0, 2.5, 4), Attempt(2, 3.0, None, None)]
    shrink = SpecFields.model_validate({"recovery": {"strategy": "shrink", "watchdog_s": 10}})
    assert shrink.recovery_strategy == "shrink"
    assert SpecFields.model_validate({"recovery": None}).recovery_strategy is None
    assert SpecFields.model_validate({}).recovery_strategy is None


def test_row_has_a_basis_for_every_metric() -> None:
    text, attempts = restart_text()
    row = cost(text, "restart", attempts=attempts).row()
    bases = [k for k in row if k.endswith("_basis")]
    assert len(bases) == 10
    assert all(isinstance(row[k], str) and row[k] for k in bases)
    assert not any(isinstance(v, float) and math.isnan(v) for v in row.values())


def test_a_failed_job_without_attempts_detects_at_its_exit() -> None:
    lines = [start()] + [update(n, T0 + n * STEP) for n in range(1, 26)]
    c = cost("\n".join(lines), "none", failed_exit_at=FAULT + 7.0)
    assert c.detect_s.value == pytest.approx(7.0) and "exit" in c.detect_s.basis
    with_attempts = cost(
        "\n".join(lines), "restart", failed_exit_at=FAULT + 7.0,
        attempts=[Attempt(1, T0 - 1, FAULT + 9.0, 4)],
    )  # fmt: skip
    assert with_attempts.detect_s.value == pytest.approx(9.0)  # the sweep's record wins


def test_a_job_that_died_after_the_fault_has_its_goodput_over_the_time_to_its_death() -> None:
    lines = [start()] + [update(n, T0 + n * STEP) for n in range(1, 26)]
    c = cost("\n".join(lines), "none", failed_exit_at=FAULT + 30.0)
    assert c.goodput.value is not None
    window = FAULT + 30.0 - (FAULT - WINDOW_STEPS * STEP)
    assert c.goodput.value == pytest.approx(WINDOW_STEPS / window, rel=0.05)  # not 1 / STEP
    assert c.goodput.value < 0.1 * c.goodput_fault_free.value  # type: ignore[operator]


def test_a_job_without_recovery_that_went_on_lost_no_update() -> None:
    lines = [start()] + [update(n, T0 + n * STEP + (1.0 if n > 25 else 0.0)) for n in range(1, 41)]
    c = cost("\n".join(lines), "none")
    assert c.updates_lost.value == 0 and "went on" in c.updates_lost.basis
    assert c.back_s.value == pytest.approx(T0 + 2.6 + 1.0 - FAULT)
