"""Tests of the emulated ring AllReduce (r2bench.workloads), run with the real mpirun.

This module holds those with real processes; the same subject's other tests:
tests/unit/test_workload.py (its pure tests).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from r2bench.parse.events import parse_events
from r2bench.parse.models import EventKind
from r2bench.workloads.nccl_format import (
    bus_bandwidth,
)

HAVE_MPI = shutil.which("mpirun") is not None and importlib.util.find_spec("mpi4py") is not None
needs_mpi = pytest.mark.skipif(not HAVE_MPI, reason="mpirun or mpi4py missing")
FAILOVER_MS = 400
LOG_LINE = re.compile(r"^\[(\d+\.\d{6})\] ([^:]+):(\d+):(\d+) \[(\d+)\] NCCL (INFO|WARN) (.*)$")


@dataclass(frozen=True)
class Run:
    """Result of one mpirun."""

    rc: int
    stdout: str
    stderr: str

    def rows(self) -> list[list[str]]:
        """Result rows (non-# lines that start with a size)."""
        return [ln.split() for ln in self.stdout.splitlines() if re.match(r"^\s+\d+\s+\d+ ", ln)]


def mpirun(nranks: int, args: list[str], env: dict[str, str] | None = None) -> Run:
    """Run the workload under the real mpirun on loopback."""
    cmd = ["mpirun", "--oversubscribe", "-np", str(nranks)]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    extra = {"NCCL_DEBUG": "INFO", **(env or {})}
    for key in extra:
        cmd += ["-x", key]
    cmd += [sys.executable, "-m", "r2bench.workloads.ring_allreduce", *args]
    proc = subprocess.run(
        cmd, env={**os.environ, **extra}, capture_output=True, text=True, timeout=60, check=False
    )
    return Run(proc.returncode, proc.stdout, proc.stderr)


# ---- mpirun tests --------------------------------------------------------------------------
def check_rows(run: Run, sizes: list[int], nranks: int, per_iter: bool = False) -> None:
    """Every size has a row, 0 wrong, busbw == size/time * 2(n-1)/n within rounding."""
    rows = run.rows()
    assert [int(r[0]) for r in rows] == sizes, run.stdout
    for r in rows:
        nbytes = int(r[0])
        for start in (5, 13 if per_iter else 9):
            time_us, busbw, wrong = float(r[start]), float(r[start + 2]), float(r[start + 3])
            assert wrong == 0, r
            _, expect = bus_bandwidth(nbytes, time_us * 1e-6, nranks)
            assert abs(busbw - expect) <= 0.006 + 0.01 * expect, r
    assert "# Out of bounds values : 0 OK" in run.stdout
    assert re.search(r"^# Avg bus bandwidth    : [0-9.e+-]+ $", run.stdout, re.M)


def stall_env(mode: int, failover_ms: int = FAILOVER_MS, frozen: str = "1:0:2") -> dict[str, str]:
    """Freeze rank 1's NIC 0 sender (by default) from collective 2: the second timed iteration
    with -w 1, whose first ring step is step 4 with 2 ranks."""
    return {
        "R2CC_MODE": str(mode),
        "NCCL_R2CC_FAILOVER_TIMEOUT_MS": str(failover_ms),
        "R2B_TEST_FREEZE": frozen,
    }


STALL_ARGS = ["-b", "256K", "-e", "256K", "-n", "4", "-w", "1"]
STOCK = {"R2B_EMULATED_LIBRARY": "nccl", "NCCL_IB_TIMEOUT": "14", "NCCL_IB_RETRY_CNT": "3"}
FOUR_NICS = {"R2B_NICS": "4"}


def log_messages(run: Run) -> list[tuple[str, str]]:
    """(rank, message) of every NCCL log line on stderr."""
    lines = [m.groups() for m in map(LOG_LINE.match, run.stderr.splitlines()) if m]
    return [(g[4], g[6]) for g in lines]


def warn_ranks(run: Run) -> list[str]:
    """The rank of every WARN line."""
    return [r for r, kind in _kinds(run) if kind == "WARN"]


def _kinds(run: Run) -> list[tuple[str, str]]:
    return [(m[5], m[6]) for m in map(LOG_LINE.match, run.stderr.splitlines()) if m]


@needs_mpi
def test_two_ranks_rows_json(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    run = mpirun(2, ["-b", "8", "-e", "1M", "-f", "8", "-n", "3", "-I", "1", "-J", str(out)])
    assert run.rc == 0, run.stdout + run.stderr
    assert "# r2bench emulated ring all_reduce (not NCCL" in run.stdout
    assert re.search(r"^#  Rank  1 Group  0 Pid +\d+ on .* emulated CPU", run.stdout, re.M)
    sizes = [8, 64, 512, 4096, 32768, 262144]
    doc = json.loads(out.read_text())
    assert [r["size"] for r in doc["results"]] == sizes
    for result in doc["results"]:
        for key in ("out_of_place", "in_place"):
            assert result[key]["nwrong"] == 0
            assert len(result[f"{key}_per_iter"]["times_us"]) == 3
    assert len(doc["config"]["devices"]) == 2 and doc["errors"] == [] and "end_time" in doc
    rows = run.rows()
    assert all(len(r) == 21 for r in rows)  # 5 + 2 x (4 + 4 per-iteration columns)


@needs_mpi
def test_three_ranks_timestamps() -> None:
    run = mpirun(3, ["-b", "1K", "-e", "256K", "-f", "16", "-n", "2", "-S", "1"])
    assert run.rc == 0, run.stdout + run.stderr
    check_rows(run, [1024, 16384, 262144], 3)
    assert all(re.match(r"\d{4}-\d\d-\d\d", r[-2]) for r in run.rows())


@needs_mpi
def test_busbw_consistent_two_ranks() -> None:
    run = mpirun(2, ["-b", "4K", "-e", "4M", "-f", "32", "-n", "3"])
    assert run.rc == 0, run.stdout + run.stderr
    check_rows(run, [4096, 131072, 4194304], 2)


@needs_mpi
def test_timeout_aborts_with_code_4() -> None:
    run = mpirun(2, [*STALL_ARGS, "-T", "1"], stall_env(0, failover_ms=20000))
    assert run.rc == 4, run.stdout + run.stderr
    assert re.search(r"^\S+: Test timeout \(1s\) ring_allreduce\.py:\d+$", run.stdout, re.M)


@needs_mpi
def test_stock_nccl_aborts_on_a_stall_and_ignores_r2cc_settings() -> None:
    env = {**stall_env(1), **STOCK, "R2CC_DISCONNECTED_HCA": "nic1"}
    run = mpirun(2, STALL_ARGS, env)
    assert run.rc == 3, run.stdout + run.stderr
    assert "stock NCCL (emulated), stall timeout 268 ms" in run.stdout
    assert "Test NCCL failure" in run.stdout
    assert "'remote process exited or there was a network error / " in run.stdout
    assert (
        "NCCL WARN NET/Socket : send to rank 0 on channel 0 device 0 (nic0) stalled" in run.stderr
    )
    # no R-2CCL in it: no backup connection, no out-of-band socket, no mode-1 simulation
    assert not [m for _, m in log_messages(run) if "R2CC" in m or "OOB" in m or "BACKUP" in m]


@needs_mpi
def test_stock_nccl_runs_clean_without_a_fault() -> None:
    run = mpirun(2, ["-b", "64K", "-e", "64K", "-n", "12"], {**STOCK, "R2CC_DISCONNECTED_HCA": "0"})
    assert run.rc == 0, run.stdout + run.stderr
    check_rows(run, [65536], 2)
    assert log_messages(run) == []


@needs_mpi
@pytest.mark.parametrize("mode", [0, 1, 2, 3])
def test_every_mode_survives_a_stall_by_hot_repair(mode: int, tmp_path: Path) -> None:
    """R-2CCL's failure response does not depend on R2CC_MODE: rank 1's NIC 2 (used in every
    mode) stalls; its channel moves to the backup connection on NIC 3 (2 XOR 1), the peers
    hear of it out of band, and from the next collective on the job runs as mode 2."""
    out = tmp_path / "r.json"
    env = {**stall_env(mode, frozen="1:2:2"), **FOUR_NICS}
    run = mpirun(2, [*STALL_ARGS, "-I", "1", "-J", str(out)], env)
    assert run.rc == 0, run.stdout + run.stderr
    check_rows(run, [262144], 2, per_iter=True)
    messages = log_messages(run)
    assert warn_ranks(run) == ["1"], run.stderr
    switch = "SEND: Step-sync applied channel=2 absStep=4, switch to backup dev=3 (nic3)"
    assert ("1", switch) in messages, run.stderr
    assert ("1", "OOB: Sent STEP_SYNC channel=2 step=4 to rank 0") in messages
    assert ("0", "RECV: Step-sync applied channel=2 absStep=4, switch to backup") in messages
    assert ("1", "OOB: Broadcast HOT_REPAIR signal from rank 1 to 1 peers") in messages
    assert any(m.startswith("OOB: Received HOT_REPAIR signal 'R2CC_HR 1'") for _, m in messages)
    gather = [m for _, m in messages if "gather complete" in m]
    # both ranks share this host, so OR-ing per node gives both the failed channel
    assert gather == ["R2CC: hot-repair gather complete: localMask=0x4 globalMask=0x4"] * 2
    forced = [r for r, m in messages if m == "R2CC: hot-repair detected, forcing R2CC_MODE=2"]
    assert sorted(forced) == (["0", "1"] if mode in (0, 1) else [])
    kinds = {e.kind for e in parse_events(run.stderr)}
    assert kinds >= {
        EventKind.R2CC_HOT_REPAIR_BROADCAST,
        EventKind.R2CC_HOT_REPAIR_RECEIVED,
        EventKind.R2CC_STEP_SYNC,
        EventKind.R2CC_GATHER_COMPLETE,
        EventKind.R2CC_BACKUP_CONNECTED,
        EventKind.R2CC_OOB_INIT,
    }
    assert (EventKind.R2CC_BACKUP_SWITCH in kinds) == (mode == 1)  # the simulation's line only
    assert (EventKind.R2CC_HOT_REPAIR_DETECTED in kinds) == (mode in (0, 1))
    times = json.loads(out.read_text())["results"][0]["out_of_place_per_iter"]["times_us"]
    others = [t for i, t in enumerate(times) if i != 1]
    assert times[1] >= 0.9 * FAILOVER_MS * 1000, times
    assert times[1] > 3 * statistics.median(others), times


@needs_mpi
@pytest.mark.parametrize("nics", [4, 3])
def test_backup_connection_is_on_the_pair_nic(nics: int) -> None:
    run = mpirun(2, ["-b", "64K", "-e", "64K", "-n", "2"], {"R2B_NICS": str(nics)})
    assert run.rc == 0, run.stdout + run.stderr
    backups = {
        (int(m["channel"]), int(m["dev"]))
        for m in re.finditer(
            r"rank=1 channel=(?P<channel>\d+) type=BACKUP dev=(?P<dev>\d+)", run.stderr
        )
    }
    expected = {4: {(0, 1), (1, 0), (2, 3), (3, 2)}, 3: {(0, 1), (1, 0), (2, 2)}}
    assert backups == expected[nics], run.stderr


@needs_mpi
def test_an_odd_last_nic_backs_itself_up_so_its_failure_aborts() -> None:
    env = {**stall_env(0, frozen="1:2:2"), "R2B_NICS": "3"}
    run = mpirun(2, STALL_ARGS, env)
    assert run.rc == 3, run.stdout + run.stderr
    assert "no healthy connection left for channel 2" in run.stdout


@needs_mpi
@pytest.mark.parametrize(
    ("mode", "frozen_nic", "extra", "stalls"),
    [
        (0, 0, {}, True),  # the control: the frozen NIC carries traffic
        (1, 0, {}, False),  # mode 1: NIC 0's channel is on its backup (NIC 1) from setup
        (2, 3, {}, False),  # modes 2 and 3: the last NIC is masked off from the first collective
        (3, 3, {}, False),
        (2, 2, {}, True),
        (3, 2, {"FAILURE2_SAME_SERVER": "1"}, False),  # the last two NICs
    ],
)
def test_modes_1_to_3_simulate_a_failed_nic_from_the_start(
    mode: int, frozen_nic: int, extra: dict[str, str], stalls: bool
) -> None:
    env = {**stall_env(mode, frozen=f"1:{frozen_nic}:1"), **FOUR_NICS, **extra}
    run = mpirun(2, STALL_ARGS, env)
    assert run.rc == 0, run.stdout + run.stderr
    check_rows(run, [262144], 2)
    assert bool(warn_ranks(run)) == stalls, run.stderr
    messages = log_messages(run)
    migration = [(r, m) for r, m in messages if m.startswith("R2CC_MODE=1 (")]
    if mode == 1:
        line = "Channel 0 will simulate disable of device 0 (nic0) and use backup device 1 (nic1)"
        assert sorted(migration) == [
            (rank, f"R2CC_MODE=1 ({side}): {line}") for rank in "01" for side in ("RECV", "SEND")
        ]
    else:
        assert migration == []
    if not stalls:  # a simulated failure is no hot repair
        assert not [m for _, m in messages if "HOT_REPAIR" in m or "gather" in m], run.stderr


@needs_mpi
@pytest.mark.parametrize("mode", [0, 1, 2])
def test_disconnected_hca_fails_its_channels_at_step_10(mode: int) -> None:
    env = {"R2CC_MODE": str(mode), "R2CC_DISCONNECTED_HCA": "nic1", "R2B_NICS": "3"}
    run = mpirun(2, ["-b", "64K", "-e", "64K", "-n", "12", "-w", "1"], env)
    setup = (
        "R2CC_DISCONNECTED_HCA: SEND channel 1 primary dev=1 (nic1) will inject failure at step 10"
    )
    assert ("0", setup) in log_messages(run) and ("1", setup) in log_messages(run)
    assert run.rc == 0, run.stdout + run.stderr  # hot repair in every mode, mode 0 included
    check_rows(run, [65536], 2)
    injected = [r for r, m in log_messages(run) if "injected failure at step 10" in m]
    assert sorted(injected) == ["0", "1"]  # once per channel per process
    gathers = [m for _, m in log_messages(run) if "gather complete" in m]
    assert gathers == ["R2CC: hot-repair gather complete: localMask=0x2 globalMask=0x2"] * 2
    assert "stalled" not in run.stderr  # a software fault: no timeout waited for


@needs_mpi
def test_disconnected_step_sets_where_the_failure_fires() -> None:
    env = {"R2CC_DISCONNECTED_HCA": "1", "R2CC_DISCONNECTED_STEP": "3", "R2B_NICS": "2"}
    run = mpirun(2, ["-b", "64K", "-e", "64K", "-n", "4", "-w", "0"], env)
    assert run.rc == 0, run.stdout + run.stderr
    messages = log_messages(run)
    assert ("0", "R2CC_DISCONNECTED_HCA: SEND channel 1 primary dev=1 (nic1) will inject failure "
            "at step 3") in messages  # fmt: skip
    injected = [m for r, m in messages if "injected failure" in m]
    assert injected == ["R2CC_DISCONNECTED_HCA: SEND channel 1 device 1 (nic1) injected failure "
                        "at step 3"] * 2  # fmt: skip


@needs_mpi
@pytest.mark.parametrize(
    ("env", "banner"),
    [
        ({}, "R-2CCL R2CC_MODE=0 (emulated), failover timeout 32000 ms"),
        ({"NCCL_IB_TIMEOUT": "21"}, "failover timeout 64000 ms"),
        ({"NCCL_R2CC_FAILOVER_TIMEOUT_MS": "750"}, "failover timeout 750 ms"),
        ({"R2CC_FAILOVER_TIMEOUT_MS": "750"}, "failover timeout 32000 ms"),  # not read
        ({"R2B_EMULATED_LIBRARY": "nccl"}, "stock NCCL (emulated), stall timeout 34360 ms"),
    ],
)
def test_failover_timeout_is_r2ccls_derived_default(env: dict[str, str], banner: str) -> None:
    run = mpirun(2, ["-b", "8", "-e", "8", "-n", "1"], env)
    assert run.rc == 0, run.stdout + run.stderr
    assert banner in run.stdout.splitlines()[0], run.stdout


@needs_mpi
def test_three_ranks_only_frozen_rank_fails_over() -> None:
    """A peer that waits on the stalled rank must not mistake it for a dead link."""
    env = {**stall_env(1), "R2B_NICS": "3", "R2B_TEST_FREEZE": "2:1:2"}
    run = mpirun(3, ["-b", "1M", "-e", "1M", "-n", "3"], env)
    assert run.rc == 0, run.stdout + run.stderr
    check_rows(run, [1 << 20], 3)
    assert set(warn_ranks(run)) == {"2"}, run.stderr


# ---- the verification records and the checker's self-test (docs/verify.md) ------------------
@needs_mpi
def test_every_timed_iteration_has_its_iter_line_and_the_summary_says_all_checked() -> None:
    from r2bench.parse.verify import parse_verification

    run = mpirun(2, ["-b", "1K", "-e", "16K", "-f", "4", "-n", "3", "-w", "1"])
    assert run.rc == 0, run.stdout + run.stderr
    check = parse_verification(run.stdout.splitlines())
    assert check is not None and check.complete and check.proves_lossless
    # 3 sizes x 2 placements x 3 iterations, numbered in the order they ran
    assert [s.iter for s in check.samples] == list(range(18)) and check.iterations == 18
    assert [s.size for s in check.samples] == [1024] * 6 + [4096] * 6 + [16384] * 6
    for s in check.samples:  # every element of every iteration checked, none wrong
        assert s.wrong == 0 and s.elements == s.size // 4 and s.check_s is not None, s
    assert all(a.end <= b.start for a, b in zip(check.samples, check.samples[1:], strict=False))
    assert (check.program, check.ranks, check.elements) == ("ring_allreduce", 2, 4096)


@needs_mpi
@pytest.mark.parametrize("how", ["env", "flag"])
def test_self_test_corruption_is_wrong_results_naming_the_iteration(how: str) -> None:
    from r2bench.analysis.outcome import classify
    from r2bench.parse.models import OutcomeStatus
    from r2bench.parse.nccltests.text import parse_text
    from r2bench.parse.verify import parse_verification, with_verification

    args = ["-b", "4K", "-e", "16K", "-f", "4", "-n", "3", "-w", "1"]
    if how == "env":
        run = mpirun(2, args, {"R2B_VERIFY_CORRUPT": "4"})
    else:
        run = mpirun(2, [*args, "--corrupt", "4:0"])
    assert run.rc == 7, run.stdout + run.stderr  # nccl-tests' wrong-results exit code
    assert "# Self-test: timed iteration 4 is corrupted on purpose on rank" in run.stdout
    check = parse_verification(run.stdout.splitlines())
    assert check is not None and check.complete
    assert (check.wrong, check.wrong_iterations) == (1, (4,))
    parsed = parse_text(run.stdout)
    events = list(parse_events(run.stdout + run.stderr))
    outcome = with_verification(classify(None, parsed=parsed, events=events), check)
    assert outcome is not None and outcome.status is OutcomeStatus.WRONG_RESULTS
    assert "timed iteration(s) 4 " in outcome.reason
    assert outcome.evidence[0].text.startswith("timed iteration 4 (4096 B): 1 wrong element")


@needs_mpi
def test_a_bad_corrupt_setting_is_a_usage_error() -> None:
    run = mpirun(2, ["-b", "1K", "-e", "1K", "-n", "1"], {"R2B_VERIFY_CORRUPT": "3:9"})
    assert run.rc == 6 and "rank 9 of 2 ranks" in run.stderr, run.stdout + run.stderr
