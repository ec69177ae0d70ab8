"""The bounded capture of a job's NCCL log lines: floods counted, evidence and results kept."""

from __future__ import annotations

from r2bench.sweep.flood import SUMMARY_PREFIX, LogCondenser

WARN = "node0:4242:4250 [0] transport/net_socket.cc:445 NCCL WARN NET/Socket : unable to allocate requests"
REPAIR = "node0:4242:4250 [0] NCCL INFO OOB: Broadcast HOT_REPAIR signal from rank 0 to 1 peers"
ROW = "    67108864      16777216     float     sum      -1   41234.1    1.63    1.63      0"


def test_a_flood_is_counted_not_written_and_summarised() -> None:
    condenser = LogCondenser(keep=3)
    admitted = [condenser.admit(WARN.replace("4250", str(4250 + i)), 10.0 + i) for i in range(1000)]
    assert admitted[:3] == [True] * 3 and not any(admitted[3:])
    assert condenser.dropped == 997
    ((when, line),) = condenser.summary()
    assert when == 1009.0 and line.startswith(SUMMARY_PREFIX)
    assert "997 more lines like the 3 above, from 13.000000 to 1009.000000" in line
    assert line.endswith(WARN)


def test_rare_evidence_and_result_rows_are_always_written() -> None:
    condenser = LogCondenser(keep=2)
    for i in range(100):
        condenser.admit(WARN, float(i))
    assert condenser.admit(REPAIR, 100.0)
    assert all(condenser.admit(ROW, 101.0 + i) for i in range(5000))
    assert all(condenser.admit("# Out of bounds values : 0 OK", 1.0) for _ in range(3))
    assert condenser.dropped == 98
