"""The cost of a fault from the emulated training job's real output under mpirun, on loopback:
a restart (the watchdog aborts the stalled job, a second start resumes from its checkpoint) and
a shrink (the survivors drop the frozen rank). The fault is the transport's test hook
R2B_TEST_FREEZE (rank 1 freezes in update 6's collective), taken as applied at the end of
update 5 (one clock: everything runs here)."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from r2bench.analysis.recovery_cost import Attempt, RecoveryInputs, recovery_cost
from r2bench.parse.training import TrainingLog, parse_training
from tests.integration.test_train_recovery import STALL, command

pytestmark = [pytest.mark.needs_mpirun, pytest.mark.needs_mpi4py, pytest.mark.slow]


def launch(ranks: int, env: dict[str, str], flags: list[str], attempt: int) -> tuple[str, Attempt]:
    """One start of the job: its stdout and its attempt line (this machine's clock)."""
    launched = time.time()
    proc = subprocess.run(
        command(ranks, env, flags), env={**os.environ, **env}, capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
    return proc.stdout, Attempt(attempt, launched, time.time(), proc.returncode)


def end_of(log: TrainingLog, update: int) -> float:
    at = log.updates.index_of(update)
    assert at is not None
    return log.updates.end[at]


def test_a_restart_costs_the_watchdog_the_restart_and_the_updates_since_the_checkpoint(
    tmp_path: Path,
) -> None:
    flags = ["--updates", "10", "--checkpoint-dir", str(tmp_path), "--checkpoint-every", "4"]
    flags += ["--watchdog-s", "2"]
    first, a1 = launch(3, STALL, flags, 1)
    assert a1.exit_code == 4, first
    second, a2 = launch(3, {"R2B_EMULATED_LIBRARY": "nccl"}, flags, 2)
    assert a2.exit_code == 0, second
    log = parse_training(first + second)
    assert log is not None
    fault = end_of(log, 5) + 1e-6
    cost = recovery_cost(RecoveryInputs("restart", log, fault, 0.0, [a1, a2]))
    assert cost.frontier == 5
    assert cost.detect_s.value is not None and 1.5 < cost.detect_s.value < 20
    assert "abort" in cost.detect_s.basis
    assert cost.updates_lost.value == 1 and cost.recomputed.value == 1  # update 5, since 4
    assert cost.progress_s.value is not None and cost.back_s.value is not None
    assert cost.detect_s.value < cost.progress_s.value < cost.back_s.value
    assert [name for name, _ in cost.steps] == ["abort", "exit", "restart", "resume"]
    assert cost.lost_gpu_s.value is not None and cost.lost_gpu_s.value > 3 * 1.5


def test_a_shrink_costs_the_detection_one_update_and_the_dropped_rank() -> None:
    env = {**STALL, "R2B_TEST_NODE_PER_RANK": "1"}
    flags = ["--updates", "10", "--watchdog-s", "2", "--on-failure", "shrink"]
    out, attempt = launch(4, env, flags, 1)
    assert attempt.exit_code == 0, out
    log = parse_training(out)
    assert log is not None
    fault = end_of(log, 5) + 1e-6
    cost = recovery_cost(RecoveryInputs("shrink", log, fault, 0.0))
    assert cost.frontier == 5 and cost.updates_lost.value == 1
    assert cost.detect_s.value is not None and 1.5 < cost.detect_s.value < 20
    assert "shrink" in cost.detect_s.basis
    assert cost.back_s.value is not None and cost.back_s.value > cost.detect_s.value
    assert "1 dropped ranks" in cost.lost_gpu_s.basis
