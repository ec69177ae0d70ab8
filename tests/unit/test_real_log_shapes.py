"""Shapes of real logs other people wrote that were misread: RCCL on AMD devices and an
`rcccl-tests` line, an NCCL program's log that ends with every communicator destroyed, an IB
error wrapped over several lines, NCCL lines whose prefix was stripped or lacks its thread id,
a table cut to `size time algbw busbw #wrong`; and a timed-out run's reason naming its
workload. The files are made here in those shapes."""

from __future__ import annotations

from pathlib import Path

from r2bench.analysis.parseview import read_path
from r2bench.parse.events import parse_events
from r2bench.parse.models import EventKind, Outcome, OutcomeStatus
from r2bench.parse.nccltests.text import parse_text
from r2bench.parse.verify import parse_verification, read_verification, with_verification
from tests.unit.test_text_input import HEADER, log

AMD_DEVICES = HEADER.replace("NVIDIA H200", "AMD Instinct MI350X").replace(
    "# nccl-tests version 2.19.6 nccl-headers=22803 nccl-library=22803\n", ""
)


def _one_run(tmp_path: Path, text: str) -> object:
    path = tmp_path / "log.txt"
    path.write_text(text)
    (run,) = read_path(path).runs
    return run


def test_rccl_known_by_its_amd_devices(tmp_path: Path) -> None:
    run = _one_run(tmp_path, log().replace(HEADER, AMD_DEVICES))
    assert run.parsed.library_family == "rccl"  # type: ignore[attr-defined]
    assert run.library.recipe == "rccl"  # type: ignore[attr-defined]
    assert "MI350X" in run.library.basis  # type: ignore[attr-defined]


def test_rccl_known_by_an_rcccl_tests_line() -> None:
    text = log().replace(
        "# nccl-tests version 2.19.6 nccl-headers=22803 nccl-library=22803",
        "# rcccl-tests version 2.18.0-develop rccl-headers=22803 rccl-library=22803",
    )
    parsed = parse_text(text)
    assert parsed.library_family == "rccl"
    assert parsed.nccl_tests_version == "2.18.0-develop"


NCCL_PROGRAM = """\
vm:100:100 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>
vm:100:100 [0] NCCL INFO NCCL version 2.19.3+cuda12.2
vm:101:101 [1] NCCL INFO comm 0x55d1 rank 1 nranks 2 cudaDev 1 nvmlDev 1 busId 2000 commId 0xab - Init COMPLETE
vm:100:100 [0] NCCL INFO comm 0x55d0 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1000 commId 0xab - Init COMPLETE
rank 0: allreduce of 1048576 floats: 3.0 (expected 3.0) in 0.41 ms
rank 1: allreduce of 1048576 floats: 3.0 (expected 3.0) in 0.40 ms
vm:100:100 [0] NCCL INFO comm 0x55d0 rank 0 nranks 2 cudaDev 0 busId 1000 - Destroy COMPLETE
"""
LAST_DESTROY = (
    "vm:101:101 [1] NCCL INFO comm 0x55d1 rank 1 nranks 2 cudaDev 1 busId 2000 - Destroy COMPLETE\n"
)


def test_an_nccl_program_ending_with_every_comm_destroyed_is_ok(tmp_path: Path) -> None:
    run = _one_run(tmp_path, NCCL_PROGRAM + LAST_DESTROY)
    outcome = run.outcome  # type: ignore[attr-defined]
    assert outcome.status is OutcomeStatus.OK, outcome.reason
    assert "Destroy COMPLETE" in outcome.reason


def test_an_nccl_program_with_a_comm_left_is_still_incomplete(tmp_path: Path) -> None:
    run = _one_run(tmp_path, NCCL_PROGRAM)
    assert run.outcome.status is OutcomeStatus.INCOMPLETE  # type: ignore[attr-defined]


WRAPPED_IB = """\
node1:4012:4077 [0] transport/net_ib.cc:2316 NCCL WARN NET/IB : Got completion from peer 10.1.0.2<36471> with status=IBV_WC_LOC_PROT_ERR(4) opcode=IBV_WC_RECV(128)
reqSize=0 vendor_err=81 req_type=Recv
localGid ::ffff:10.1.0.1 remoteGids
::ffff:10.1.0.2 hca mlx5_0
node1:4012:4077 [0] NCCL INFO transport/net_ib.cc:2350 -> 6
rank 0 done
"""


def test_an_ib_warn_wrapped_over_four_lines_is_one_event() -> None:
    (event,) = parse_events(WRAPPED_IB)
    assert event.kind is EventKind.NET_IB_COMPLETION_ERROR and event.line == 1
    assert event.details["status_name"] == "IBV_WC_LOC_PROT_ERR"
    assert (event.details["status"], event.details["vendor"]) == ("4", "81")
    assert event.message.endswith("hca mlx5_0")


def test_a_wrapped_ib_warn_leaves_the_next_message_alone() -> None:
    text = (
        "node1:10:20 [0] NCCL WARN NET/IB : Got completion from peer 10.0.0.2<5000> with "
        "status=IBV_WC_LOC_PROT_ERR(4) opcode=IBV_WC_SEND(0)\n"
        "mpirun noticed that process rank 1 with PID 7 on node node2 exited on signal 9 (Killed).\n"
    )
    ib, signaled = parse_events(text)
    assert ib.kind is EventKind.NET_IB_COMPLETION_ERROR and ib.details["status"] == "4"
    assert signaled.kind is EventKind.MPI_PROCESS_SIGNALED


def test_nccl_lines_with_their_prefix_stripped_or_without_a_thread_id() -> None:
    text = (
        "NCCL WARN NET/Socket : Connection reset by peer\n"
        "gpu-7:5511 [3] NCCL WARN Call to ibv_poll_cq failed\n"
        "[2] NCCL WARN NET/IB : Got completion from peer 10.0.0.2<1> with error 12, opcode 0,"
        " len 0, vendor err 129\n"
    )
    socket, warn, ib = parse_events(text)
    assert socket.kind is EventKind.SOCKET_ERROR and socket.pid is None
    assert warn.kind is EventKind.NCCL_WARN
    assert (warn.host, warn.pid, warn.tid, warn.rank) == ("gpu-7", 5511, None, 3)
    assert ib.kind is EventKind.NET_IB_COMPLETION_ERROR and ib.rank == 2
    assert ib.details["vendor"] == "129"


FIVE_COLUMNS = """\
Our 2-node results:

#       size    time   algbw   busbw  #wrong
     1048576  370.52    2.83    2.83       0
     2097152  741.04    2.83    2.83       3
     4194304 1482.09    2.83    2.83       0
# Avg bus bandwidth    : 2.83
"""


def test_a_table_cut_to_size_time_algbw_busbw_wrong_is_read() -> None:
    parsed = parse_text(FIVE_COLUMNS)
    rows = [(r.size_bytes, r.time_us, r.busbw_gbps, r.wrong) for r in parsed.rows]
    assert rows == [
        (1048576, 370.52, 2.83, 0),
        (2097152, 741.04, 2.83, 3),
        (4194304, 1482.09, 2.83, 0),
    ]
    assert {r.count for r in parsed.rows} == {0} and {r.type for r in parsed.rows} == {""}
    assert parsed.collective is None  # nothing in it names one; its blank redop says nothing


ITER = '#iter {{"iter": {i}, "cycle": 0, "size": 1024, "start": 1.0, "end": 1.1, "wrong": {w}}}'


def test_a_timed_out_runs_reason_names_the_workload(tmp_path: Path) -> None:
    stdout = tmp_path / "stdout.txt"
    stdout.write_text(ITER.format(i=0, w=0) + "\n" + ITER.format(i=1, w=7) + "\n")
    check = read_verification(stdout, "r2b-verify")
    timed_out = Outcome(status=OutcomeStatus.TIMEOUT, reason="killed at the deadline")
    outcome = with_verification(timed_out, check)
    assert outcome is not None and "(r2b-verify checks every element" in outcome.reason
    assert "unknown" not in outcome.reason


def test_a_reason_without_a_workload_name_says_so_in_words() -> None:
    check = parse_verification([ITER.format(i=0, w=5)])
    outcome = with_verification(Outcome(status=OutcomeStatus.TIMEOUT, reason="deadline"), check)
    assert outcome is not None and "(the verifying workload checks" in outcome.reason


def test_the_library_file_a_log_says_was_loaded_is_kept(tmp_path: Path) -> None:
    said = (
        "rank 0: loaded /opt/r2ccl/build/lib/libnccl.so.2 (NCCL 2.23.4)\n"
        "vm:1:1 [0] NCCL INFO NCCL version 2.23.4+cuda13.0\n"
        "vm:1:1 [0] NCCL WARN libnccl-net.so: cannot open shared object file\n"
    )
    run = _one_run(tmp_path, said + log())
    parsed = run.parsed  # type: ignore[attr-defined]
    assert parsed.library_path == "/opt/r2ccl/build/lib/libnccl.so.2"
    assert parsed.library_version == "2.23.4+cuda13.0"


def test_no_library_file_from_a_line_that_only_names_one() -> None:
    parsed = parse_text("error: /usr/lib/libnccl.so.2: cannot open shared object file\n" + log())
    assert parsed.library_path is None
