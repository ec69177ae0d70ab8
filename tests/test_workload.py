"""Tests of the emulated ring AllReduce (r2bench.workloads), run with the real mpirun."""

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

from r2bench.records.events import parse_events
from r2bench.records.models import EventKind
from r2bench.workloads.nccl_format import (
    IterStats,
    bus_bandwidth,
    column_header,
    float_str,
    parse_size,
)
from r2bench.workloads.transport import (
    FreezeHook,
    Nic,
    RecvWindow,
    Slot,
    disconnected_nics,
    split_bytes,
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


# ---- pure unit tests ---------------------------------------------------------------------
def test_parse_size_suffixes() -> None:
    assert [parse_size(s) for s in ("8", "1K", "64M", "1G", "2k")] == [
        8,
        1024,
        64 << 20,
        1 << 30,
        2048,
    ]
    with pytest.raises(ValueError):
        parse_size("3X")


def test_float_str_matches_nccl_tests() -> None:
    assert float_str(12.345, 7) == "  12.35"
    assert float_str(123456.7, 7) == " 123457"
    assert float_str(1234567.0, 7) == "1234567"
    assert float_str(12345678.0, 7) == "1.2e+07"
    assert float_str(0.004, 6) == "  0.00"


def test_column_header_widths() -> None:
    lines = column_header(per_iter=False, timestamps=False)
    assert lines[2] == (
        "#       size         count      type   redop    root     time   algbw   busbw  #wrong"
        "     time   algbw   busbw  #wrong "
    )
    stamped = column_header(per_iter=False, timestamps=True)
    assert stamped[2].endswith("#wrong           timestamp")


def test_split_bytes_covers_and_aligns() -> None:
    pieces = split_bytes(4002, [1.0, 3.0])
    assert pieces[0][0] == 0 and sum(n for _, n in pieces) == 4002
    assert pieces[1][0] == pieces[0][1] and pieces[0][1] % 4 == 0
    assert split_bytes(8, [1.0, 1.0, 1.0]) == [(0, 4), (4, 0), (4, 4)]


def test_iter_stats_and_busbw() -> None:
    st = IterStats.of([3.0, 1.0, 2.0])
    assert (st.min, st.p50, st.max, st.p99) == (1.0, 2.0, 3.0, 3.0)
    assert bus_bandwidth(1_000_000_000, 1.0, 4) == (1.0, 1.5)
    assert FreezeHook.parse("1:0:3") == FreezeHook(1, 0, 3) and FreezeHook.parse("") is None


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


def stall_env(mode: int, failover_ms: int = FAILOVER_MS) -> dict[str, str]:
    """Freeze rank 1's NIC 0 sender from collective 2 (second timed iteration, -w 1)."""
    return {
        "R2CC_MODE": str(mode),
        "NCCL_R2CC_FAILOVER_TIMEOUT_MS": str(failover_ms),
        "R2B_TEST_FREEZE": "1:0:2",
    }


STALL_ARGS = ["-b", "256K", "-e", "256K", "-n", "4", "-w", "1"]


@needs_mpi
def test_timeout_aborts_with_code_4() -> None:
    run = mpirun(2, [*STALL_ARGS, "-T", "1"], stall_env(0, failover_ms=20000))
    assert run.rc == 4, run.stdout + run.stderr
    assert re.search(r"^\S+: Test timeout \(1s\) ring_allreduce\.py:\d+$", run.stdout, re.M)


@needs_mpi
def test_mode0_aborts_on_stall() -> None:
    run = mpirun(2, STALL_ARGS, stall_env(0))
    assert run.rc == 3, run.stdout + run.stderr
    assert "Test NCCL failure" in run.stdout
    assert "'remote process exited or there was a network error / " in run.stdout
    assert (
        "NCCL WARN NET/Socket : send to rank 0 on channel 0 device 0 (nic0) stalled" in run.stderr
    )


@needs_mpi
@pytest.mark.parametrize("mode", [1, 2])
def test_failover_modes_finish_clean(mode: int, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    run = mpirun(2, [*STALL_ARGS, "-I", "1", "-J", str(out)], stall_env(mode))
    assert run.rc == 0, run.stdout + run.stderr
    check_rows(run, [262144], 2, per_iter=True)
    messages = log_messages(run)
    migrate = (
        "R2CC_MODE=1 (SEND): Channel 0 will simulate disable of device 0 (nic0) "
        "and use backup device 1 (nic1)"
    )
    assert (("1", migrate) in messages) == (mode == 1), run.stderr
    assert ("1", "OOB: Broadcast HOT_REPAIR signal from rank 1 to 1 peers") in messages
    assert any(m.startswith("OOB: Received HOT_REPAIR signal 'HOT_REPAIR 1'") for _, m in messages)
    assert ("1", "OOB: Sent STEP_SYNC channel=0 step=4 to rank 0") in messages, run.stderr
    gather = [m for r, m in messages if "gather complete" in m]
    # both ranks share this host, so OR-ing per node gives both the failed channel
    assert gather == ["R2CC: hot-repair gather complete: localMask=0x1 globalMask=0x1"] * 2
    forced = [r for r, m in messages if m == "R2CC: hot-repair detected, forcing R2CC_MODE=2"]
    assert sorted(forced) == (["0", "1"] if mode == 1 else [])
    kinds = {e.kind for e in parse_events(run.stderr)}
    assert kinds >= {
        EventKind.R2CC_HOT_REPAIR_BROADCAST,
        EventKind.R2CC_HOT_REPAIR_RECEIVED,
        EventKind.R2CC_STEP_SYNC,
        EventKind.R2CC_GATHER_COMPLETE,
        EventKind.R2CC_BACKUP_CONNECTED,
        EventKind.R2CC_OOB_INIT,
    }
    assert (EventKind.R2CC_BACKUP_SWITCH in kinds) == (mode == 1)
    assert (EventKind.R2CC_HOT_REPAIR_DETECTED in kinds) == (mode == 1)
    times = json.loads(out.read_text())["results"][0]["out_of_place_per_iter"]["times_us"]
    others = [t for i, t in enumerate(times) if i != 1]
    assert times[1] >= 0.9 * FAILOVER_MS * 1000, times
    assert times[1] > 3 * statistics.median(others), times


@needs_mpi
def test_three_ranks_only_frozen_rank_fails_over() -> None:
    """A peer that waits on the stalled rank must not mistake it for a dead link."""
    env = {**stall_env(1), "R2B_NICS": "3", "R2B_TEST_FREEZE": "2:1:2"}
    run = mpirun(3, ["-b", "1M", "-e", "1M", "-n", "3"], env)
    assert run.rc == 0, run.stdout + run.stderr
    check_rows(run, [1 << 20], 3)
    warns = [
        m.group(5) for m in map(LOG_LINE.match, run.stderr.splitlines()) if m and m[6] == "WARN"
    ]
    assert warns == ["2"], run.stderr


def log_messages(run: Run) -> list[tuple[str, str]]:
    """(rank, message) of every NCCL log line on stderr."""
    lines = [m.groups() for m in map(LOG_LINE.match, run.stderr.splitlines()) if m]
    return [(g[4], g[6]) for g in lines]


@needs_mpi
@pytest.mark.parametrize("mode", [0, 1, 2])
def test_disconnected_hca_fails_its_channels_at_step_10(mode: int) -> None:
    env = {"R2CC_MODE": str(mode), "R2CC_DISCONNECTED_HCA": "nic1", "R2B_NICS": "3"}
    run = mpirun(2, ["-b", "64K", "-e", "64K", "-n", "12", "-w", "1"], env)
    setup = (
        "R2CC_DISCONNECTED_HCA: SEND channel 1 primary dev=1 (nic1) will inject failure at step 10"
    )
    assert ("0", setup) in log_messages(run) and ("1", setup) in log_messages(run)
    if mode == 0:
        assert run.rc == 3, run.stdout + run.stderr
        assert "R2CC_DISCONNECTED_HCA: SEND channel 1 device 1 (nic1) injected" in run.stdout
        return
    assert run.rc == 0, run.stdout + run.stderr
    check_rows(run, [65536], 2)
    gathers = [m for _, m in log_messages(run) if "gather complete" in m]
    assert gathers == ["R2CC: hot-repair gather complete: localMask=0x2 globalMask=0x2"] * 2
    assert "stalled" not in run.stderr  # a software fault: no timeout waited for


def test_disconnected_hca_matches_names_indices_and_suffixes() -> None:
    nics = [Nic(0, "127.0.0.1", "mlx5_0"), Nic(1, "127.0.0.1", "mlx5_3"), Nic(2, "x", "eth2")]
    assert disconnected_nics("mlx5_3", nics) == {1}
    assert disconnected_nics("0", nics) == {0}
    assert disconnected_nics("3, eth2", nics) == {1, 2}
    assert disconnected_nics(" 2\t", nics) == {2}
    assert disconnected_nics("", nics) == set() and disconnected_nics(None, nics) == set()
    assert disconnected_nics("mlx5_9 nic7", nics) == set()


def test_slot_coverage_merges_ranges() -> None:
    slot = Slot(memoryview(bytearray(100)), 100)
    slot.add(50, 100)
    assert not slot.done() and slot.holds(60, 70) and not slot.holds(40, 60)
    slot.add(0, 20)
    slot.add(10, 50)
    assert slot.done() and slot.covered == [(0, 100)]


class _FakeConn:
    def __init__(self) -> None:
        import socket as socket_module

        self.sock = socket_module.socket()


def test_window_discards_replaced_units_and_duplicates() -> None:
    import threading

    window = RecvWindow(threading.Condition())
    window.post(7, memoryview(bytearray(96)))
    a, b = _FakeConn(), _FakeConn()
    assert window.claim(a, 7, 0, 0, 48) is not None  # original unit 0 (its link then dies)
    window.finish(7, 0, ok=False)
    assert window.claim(b, 7, 2, 0, 24) is not None  # replacement parts of unit 0
    window.finish(7, 2, ok=True)
    assert window.claim(a, 7, 0, 0, 48) is None  # the old unit arriving late: discarded
    assert window.claim(b, 7, 3, 24, 48) is not None
    window.finish(7, 3, ok=True)
    assert window.claim(b, 7, 1, 48, 96) is not None
    window.finish(7, 1, ok=True)
    with window.cond:
        assert window.complete(7)
    assert window.claim(b, 7, 4, 0, 24) is None  # a duplicate of received bytes
    a.sock.close()
    b.sock.close()


def test_nic_map_picks_this_hosts_addresses() -> None:
    from r2bench.workloads.ring_allreduce import nic_addrs_from_map

    nic_map = "node0=198.18.1.10,198.18.2.10;node1=198.18.1.11,198.18.2.11"
    assert nic_addrs_from_map(nic_map, "node1") == "198.18.1.11,198.18.2.11"
    assert nic_addrs_from_map(nic_map, "node9") == ""
