"""The emulated training job under the real mpirun, on loopback (no faults: those are in
tests/system/test_training_virtual.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from r2bench.workloads.train_format import TrainEnd, TrainStart, UpdateLine, read_line

pytestmark = [pytest.mark.needs_mpirun, pytest.mark.needs_mpi4py]
FLAGS = ["--updates", "8", "--batch", "4", "--seq-len", "16", "--digest-every", "4"]


def train(env: dict[str, str], ranks: int = 3) -> list[TrainStart | UpdateLine | TrainEnd]:
    cmd = ["mpirun", "--oversubscribe", "-np", str(ranks)]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    for key in env:
        cmd += ["-x", key]
    cmd += [sys.executable, "-m", "r2bench.workloads.train_emulated", *FLAGS]
    proc = subprocess.run(
        cmd, env={**os.environ, **env}, capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = [read_line(text) for text in proc.stdout.splitlines()]
    return [x for x in lines if x is not None]


def values(records: list[TrainStart | UpdateLine | TrainEnd]) -> list[tuple[object, ...]]:
    return [(u.update, u.loss, u.grad_norm, u.digest) for u in records if isinstance(u, UpdateLine)]


def test_stock_and_r2ccl_emulated_train_bit_identically_and_a_corruption_shows() -> None:
    r2ccl = train({"R2B_EMULATED_LIBRARY": "r2ccl"})
    start, *updates, end = r2ccl
    assert isinstance(start, TrainStart) and isinstance(end, TrainEnd)
    assert (start.ranks, start.updates, start.allreduce_bytes) == (3, 8, start.parameters * 4)
    assert "R-2CCL" in start.library and "emulated" in start.library
    assert [u.update for u in updates if isinstance(u, UpdateLine)] == list(range(1, 9))
    assert all(
        u.digests_agree is (True if u.update % 4 == 0 else None)
        for u in updates
        if isinstance(u, UpdateLine)
    )
    stock = train({"R2B_EMULATED_LIBRARY": "nccl"})
    assert values(stock) == values(r2ccl)  # one ring, one order: equal floats
    corrupt = values(train({"R2B_EMULATED_LIBRARY": "r2ccl", "R2B_TRAIN_CORRUPT": "5"}))
    same = values(r2ccl)
    assert corrupt[:4] == same[:4]
    assert corrupt[4][2] != same[4][2]  # update 5's reduced gradient (its norm) differs
    # The parameters differ from update 5 on (the digest of update 8); a float32 loss may round
    # to the same value at one update or another, not at all of them.
    assert corrupt[7][3] != same[7][3]
    assert any(a[1] != b[1] for a, b in zip(corrupt[5:], same[5:], strict=True))
