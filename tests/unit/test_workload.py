"""Tests of the emulated ring AllReduce (r2bench.workloads), run with the real mpirun.

This module holds its pure tests; the same subject's other tests:
tests/integration/test_workload.py (those with real processes).
"""

from __future__ import annotations

import json

import pytest

from r2bench.workloads.nccl_format import (
    IterationLine,
    IterStats,
    bus_bandwidth,
    column_header,
    float_str,
    parse_corrupt,
    parse_size,
    verification_lines,
)
from r2bench.workloads.transport import (
    FreezeHook,
    Nic,
    RecvWindow,
    Slot,
    disconnected_nics,
    split_bytes,
)
from tests.support import paths


class _FakeConn:
    def __init__(self) -> None:
        import socket as socket_module

        self.sock = socket_module.socket()


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


def test_iter_and_summary_lines_have_the_gpu_workloads_keys() -> None:
    """The emulator's records carry the keys r2b_verify prints (one reader for both)."""
    gpu = (paths.DATA / "verify" / "all_reduce.np2.ok.stdout.txt").read_text()
    first = next(ln for ln in gpu.splitlines() if ln.startswith("#iter "))
    summary = next(ln for ln in gpu.splitlines() if ln.startswith("#verify "))
    line = IterationLine(3, 0, 1024, 1.0, 1.5, 0.5, 0, 256, 2, 0.001).text()
    assert set(json.loads(line[6:])) == set(json.loads(first[6:]))
    mine = json.loads(verification_lines("p", "all_reduce", True, 2, 5, 256, {3: 2})[1][8:])
    assert set(mine) <= set(json.loads(summary[8:]))
    assert (mine["wrong"], mine["wrong_iterations"]) == (2, [3])
    assert parse_corrupt("7", 4) == (7, 3) and parse_corrupt("7:1", 4) == (7, 1)
    assert parse_corrupt("", 4) is None
    with pytest.raises(ValueError, match="ITER or ITER:RANK"):
        parse_corrupt("x", 2)
