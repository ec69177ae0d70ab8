"""The `recovery_cost` table from run folders: a restart run (its `#train-*` recovery records,
`attempts.jsonl` and spec.json's `recovery`) built around a real fault, and its baseline."""

from __future__ import annotations

import json

import pytest

from r2bench.sweep.restarts import Attempt, AttemptLog
from r2bench.tables import build as tb
from r2bench.tables.recovery_cost import RECOVERY_COLUMNS
from r2bench.workloads.train_format import (
    TrainAbort,
    TrainCheckpoint,
    TrainEnd,
    TrainResume,
    TrainStart,
    UpdateLine,
)
from tests.support.training_runs import (
    STEP_S,
    TrainingText,
    base_loss,
    base_norm,
    fault_applied,
    launch_offset,
    training_folder,
)

RESUME_AFTER = 4.0
"""Seconds from the fault to the resume."""


def restart_lines(fault: float, offset: float) -> list[str]:
    """Updates 1..25 done before the fault (controller clock), checkpoints every 10, the
    watchdog's abort 2 s after it, the resume from 20 at +4 s, then 21..100 and the end."""
    lines = [TrainStart(
        workload="train_emulated", model="tiny", parameters=1000, ranks=2, seed=42,
        updates=100, batch=8, seq_len=64, allreduce_bytes=4000, library="r2ccl",
    ).text()]  # fmt: skip

    def update(n: int, end: float) -> str:
        t = end + offset
        return UpdateLine(n, t - STEP_S, t, STEP_S, base_loss(n), 1.0, base_norm(n), 4000).text()

    for n in range(1, 26):
        lines.append(update(n, fault - 0.01 - (25 - n) * STEP_S))
        if n % 10 == 0:
            lines.append(TrainCheckpoint(n, fault + offset - (25 - n) * STEP_S, 0.001).text())
    lines.append(TrainAbort(26, fault + offset + 2.0, 2.0).text())
    lines.append(TrainResume(20, fault + offset + RESUME_AFTER, 2).text())
    for n in range(21, 101):
        lines.append(update(n, fault + RESUME_AFTER + (n - 20) * STEP_S))
    final = sum(base_loss(n) for n in range(91, 101)) / 10
    lines.append(TrainEnd(100, final, 2.5).text())
    return lines


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory) -> tb.Tables:
    sweep = tmp_path_factory.mktemp("recovery-sweep")
    training_folder(sweep, "a-base", TrainingText(), library="nccl")
    run = training_folder(sweep, "b-restart", TrainingText(), faulted=True)
    fault, offset = fault_applied(), launch_offset()
    (run / "stdout.txt").write_text("\n".join(restart_lines(fault, offset)) + "\n")
    spec = json.loads((run / "spec.json").read_text())
    spec["recovery"] = {"strategy": "restart", "watchdog_s": 2, "checkpoint_every": 10}
    (run / "spec.json").write_text(json.dumps(spec))
    log = AttemptLog(run / "attempts.jsonl")  # as the sweep writes it
    for number, launched, ended, code in (
        (1, fault - 5, fault + 2.2, 4),
        (2, fault + 3, fault + 9, 0),
    ):
        log.launched(number, launched)
        log.ended(Attempt(number, launched, ended, code, False))
    return tb.build_tables(sweep)


def test_a_row_per_run_with_a_strategy(tables: tb.Tables) -> None:
    frame = tables.recovery_cost
    assert list(frame.columns) == list(RECOVERY_COLUMNS)
    assert list(frame["run_id"]) == ["b-restart"]  # the baseline names no strategy


def test_the_restart_rows_metrics(tables: tb.Tables) -> None:
    row = tables.recovery_cost.iloc[0]
    assert row["strategy"] == "restart" and row["baseline_run_id"] == "a-base"
    assert row["frontier"] == 25
    assert row["detect_s"] == pytest.approx(2.0, abs=1e-4)
    assert row["progress_s"] == pytest.approx(RESUME_AFTER + STEP_S, abs=1e-4)
    assert row["back_s"] == pytest.approx(RESUME_AFTER + 6 * STEP_S, abs=1e-4)
    assert row["updates_lost"] == 5 and row["recomputed"] == 5
    assert row["loss_delta"] == pytest.approx(0.0) and "update 100" in row["loss_delta_basis"]
    steps = [name for name, _ in json.loads(row["steps"])]
    assert steps == ["abort", "exit", "restart", "resume"]


def test_the_table_is_written_and_read_back(tmp_path_factory: pytest.TempPathFactory) -> None:
    sweep = tmp_path_factory.mktemp("recovery-written")
    run = training_folder(sweep, "b-restart", TrainingText(), faulted=True)
    (run / "stdout.txt").write_text("\n".join(restart_lines(fault_applied(), launch_offset())))
    spec = json.loads((run / "spec.json").read_text())
    spec["recovery"] = {"strategy": "restart"}
    (run / "spec.json").write_text(json.dumps(spec))
    built = tb.rebuild(sweep)
    again = tb.build_tables(sweep)  # read back from the tables folder
    assert (sweep / "tables" / "recovery_cost.parquet").is_file()
    first, second = built.recovery_cost.iloc[0], again.recovery_cost.iloc[0]
    assert second["back_s"] == pytest.approx(first["back_s"])
    assert second["steps"] == first["steps"]
    assert second["loss_delta_basis"] == "unknown: no fault-free baseline run"
    assert second["detect_s_basis"].startswith("the fault to the first abort")
