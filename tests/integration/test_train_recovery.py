"""The emulated training job's recovery under the real mpirun, on loopback: a killed job resumes
from its checkpoint bit-identically, the watchdog turns a stalled collective into exit 4, and a
shrinking job drops the frozen rank and trains on (or fails clearly when nobody would be left).

The stall is the transport's test hook R2B_TEST_FREEZE (rank:nic:collective; collective c is
update c + 1), under stock-emulated, whose own stall timeout (the IB retry time, about 34 s) is
far longer than the watchdog's."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from r2bench.workloads.train_format import (
    TrainAbort,
    TrainCheckpoint,
    TrainEnd,
    TrainRecord,
    TrainResume,
    TrainShrink,
    TrainStart,
    UpdateLine,
    read_line,
)

pytestmark = [pytest.mark.needs_mpirun, pytest.mark.needs_mpi4py, pytest.mark.slow]
FLAGS = ["--batch", "4", "--seq-len", "16", "--digest-every", "5"]
STALL = {"R2B_EMULATED_LIBRARY": "nccl", "R2B_TEST_FREEZE": "1:0:5"}  # rank 1 from update 6


def command(ranks: int, env: dict[str, str], flags: list[str]) -> list[str]:
    cmd = ["mpirun", "--oversubscribe", "-np", str(ranks)]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    for key in env:
        cmd += ["-x", key]
    return [*cmd, sys.executable, "-m", "r2bench.workloads.train_emulated", *FLAGS, *flags]


def train(
    ranks: int, env: dict[str, str], flags: list[str]
) -> tuple[int, list[TrainRecord], str, float]:
    t0 = time.monotonic()
    proc = subprocess.run(
        command(ranks, env, flags), env={**os.environ, **env}, capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
    return proc.returncode, records(proc.stdout), proc.stderr, time.monotonic() - t0


def records(stdout: str) -> list[TrainRecord]:
    return [r for r in (read_line(t) for t in stdout.splitlines()) if r is not None]


def losses(recs: list[TrainRecord]) -> dict[int, tuple[float | None, str | None]]:
    return {r.update: (r.loss, r.digest) for r in recs if isinstance(r, UpdateLine)}


def run_until_killed(env: dict[str, str], flags: list[str], after_checkpoint: int) -> str:
    """Start the job, SIGKILL mpirun's process group once update `after_checkpoint`'s
    checkpoint is reported; its stdout so far."""
    proc = subprocess.Popen(
        command(3, env, flags), env={**os.environ, **env}, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, text=True, start_new_session=True,
    )  # fmt: skip
    assert proc.stdout is not None
    seen: list[str] = []
    try:
        for line in proc.stdout:
            seen.append(line)
            rec = read_line(line)
            if isinstance(rec, TrainCheckpoint) and rec.update >= after_checkpoint:
                os.killpg(proc.pid, signal.SIGKILL)
                break
    finally:
        with_timeout = proc.wait(timeout=60)
    assert with_timeout != 0, "the job finished before it could be killed"
    return "".join(seen)


def test_a_killed_job_resumes_from_its_checkpoint_bit_identically(tmp_path: Path) -> None:
    env = {"R2B_EMULATED_LIBRARY": "r2ccl"}
    plain = ["--updates", "60"]
    rc, baseline, err, _ = train(3, env, plain)
    assert rc == 0, err
    ckpt = ["--checkpoint-dir", str(tmp_path / "ckpt"), "--checkpoint-every", "4"]
    first = records(run_until_killed(env, [*plain, *ckpt], after_checkpoint=8))
    assert not any(isinstance(r, TrainEnd) for r in first)
    rc, second, err, _ = train(3, env, [*plain, *ckpt])
    assert rc == 0, err
    resume = next(r for r in second if isinstance(r, TrainResume))
    assert resume.attempt == 2 and resume.update >= 8 and resume.update % 4 == 0
    assert resume.path.endswith(f"ckpt-{resume.update:08d}.npz")
    again = losses(second)
    assert min(again) == resume.update + 1 and max(again) == 60
    expected = losses(baseline)
    assert again == {u: expected[u] for u in again}  # losses and digests, bit for bit
    end = next(r for r in second if isinstance(r, TrainEnd))
    assert end == next(r for r in baseline if isinstance(r, TrainEnd))


def test_a_restart_whose_checkpoints_are_gone_fails_clearly(tmp_path: Path) -> None:
    env = {"R2B_EMULATED_LIBRARY": "r2ccl"}
    flags = ["--updates", "60", "--checkpoint-dir", str(tmp_path), "--checkpoint-every", "4"]
    run_until_killed(env, flags, after_checkpoint=8)
    for written in tmp_path.glob("ckpt-*.npz"):
        written.unlink()
    rc, recs, err, seconds = train(3, env, flags)
    assert rc == 6, err  # the usage exit: the supervisor does not restart it again
    assert "an earlier start wrote is gone" in err and re.search(r"ckpt-\d{8}\.npz", err)
    assert not any(isinstance(r, UpdateLine) for r in recs)  # no training from update 1
    assert seconds < 30


def test_a_damaged_newest_checkpoint_is_skipped_on_restart(tmp_path: Path) -> None:
    env = {"R2B_EMULATED_LIBRARY": "r2ccl"}
    flags = ["--updates", "9", "--checkpoint-dir", str(tmp_path), "--checkpoint-every", "3"]
    rc, _, err, _ = train(2, env, flags)
    assert rc == 0, err
    (tmp_path / "ckpt-00000009.npz").write_bytes(b"PK half a file")
    rc, recs, err, _ = train(2, env, flags)
    assert rc == 0, err
    resume = next(r for r in recs if isinstance(r, TrainResume))
    assert (resume.update, resume.attempt) == (6, 2)
    assert "skipped a damaged checkpoint" in err and "ckpt-00000009.npz" in err
    for name in ("ckpt-00000006.npz", "ckpt-00000009.npz"):
        (tmp_path / name).write_bytes(b"garbage")
    rc, _, err, _ = train(2, env, flags)
    assert rc == 6 and "no checkpoint in the directory verifies" in err


def test_the_watchdog_aborts_a_stalled_job_with_exit_4() -> None:
    rc, recs, err, seconds = train(3, STALL, ["--updates", "12", "--watchdog-s", "2"])
    assert rc == 4, err
    abort = next(r for r in recs if isinstance(r, TrainAbort))
    assert (abort.update, abort.waited_s) == (6, 2.0)
    assert max(losses(recs)) == 5
    assert seconds < 30  # the stock library's own stall timeout (34 s) never came into it


def test_a_shrinking_job_drops_the_frozen_rank_and_trains_to_the_end() -> None:
    env = {**STALL, "R2B_TEST_NODE_PER_RANK": "1"}
    flags = ["--updates", "10", "--watchdog-s", "2", "--on-failure", "shrink"]
    rc, recs, err, _ = train(4, env, flags)
    assert rc == 0, err
    start = next(r for r in recs if isinstance(r, TrainStart))
    shrink = next(r for r in recs if isinstance(r, TrainShrink))
    assert start.ranks == 4
    assert (shrink.update, shrink.dropped, shrink.ranks) == (6, "1", 3)
    assert shrink.detect_s is not None and 1.5 < shrink.detect_s < 20
    after = [r for r in recs[recs.index(shrink) :] if isinstance(r, UpdateLine)]
    assert [u.update for u in after] == [6, 7, 8, 9, 10]
    assert all(u.tokens_per_s * u.step_s == pytest.approx(3 * 4 * 16) for u in after)
    assert all(u.digests_agree is True for u in after if u.digest is not None)
    assert isinstance(recs[-1], TrainEnd) and recs[-1].updates == 10


def test_a_shrink_that_would_drop_every_rank_fails_clearly() -> None:
    flags = ["--updates", "10", "--watchdog-s", "2", "--on-failure", "shrink"]
    rc, recs, err, seconds = train(3, STALL, flags)  # one host: one node
    assert rc == 3
    assert "shrink failed" in err and "leaves no rank" in err
    assert not any(isinstance(r, (TrainShrink, TrainEnd)) for r in recs)
    assert seconds < 30
