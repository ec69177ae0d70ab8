"""Log events: real captures (tests/data/nccl-tests) plus R2CC lines written from its sources."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from r2bench.commands.parse import parse_file
from r2bench.parse.events import clean, iter_events, parse_events, read_events, read_log
from r2bench.parse.models import EventKind
from r2bench.parse.nccltests.text import iter_runs
from tests.support import paths

DATA = paths.DATA / "nccl-tests"
KILL_SENT_AT = 1795319700.276  # epoch of the SIGKILL in commands.log (killed.warn)


def events_of(name: str, **kw: object) -> list:
    return parse_events((DATA / name).read_text(), **kw)  # type: ignore[arg-type]


def kinds(events: list) -> list[EventKind]:
    return [e.kind for e in events]


# R2CC lines, written from the format strings of R-2CCL (src/r2cc/oob/oob_udp.cc,
# src/collectives.cc, src/transport/net.cc at f45cbcb): it cannot run on the capture machine.
R2CC_LOG = """\
node1:4242:4300 [3] NCCL INFO OOB: Socket Initialized on Port 51234
node1:4242:4300 [3] NCCL INFO Connection: Connect COMPLETED rank=11 channel=2 type=BACKUP dev=5 sendComm=0x7f00
node1:4242:4301 [3] NCCL INFO R2CC_MODE=1 (SEND): Channel 2 will simulate disable of device 3 (mlx5_3) and use backup device 5 (mlx5_5)
node1:4242:4301 [3] NCCL INFO OOB: Broadcast HOT_REPAIR signal from rank 3 to 15 peers
node2:777:790 [1] NCCL INFO OOB: Received HOT_REPAIR signal 'HOT_REPAIR:3' from 10.0.0.1:51234
node1:4242:4301 [3] NCCL INFO OOB: Sent STEP_SYNC channel=2 step=10 to rank 11
node2:777:790 [1] NCCL INFO OOB: Received STEP_SYNC channel=2 step=10 from 10.0.0.1:51234
node2:777:777 [1] NCCL INFO R2CC: hot-repair detected, forcing R2CC_MODE=2
node2:777:777 [1] NCCL INFO R2CC: hot-repair gather complete: localMask=0x8 globalMask=0x88
"""

PUBLIC = paths.DATA / "public"
ROUND3 = paths.DATA / "logs-round3"
R2CCL = paths.DATA / "r2ccl" / "runs"


def test_killed_run_events() -> None:
    ev = events_of("all_reduce_perf.killed.warn.txt")
    assert kinds(ev) == [
        EventKind.NCCL_VERSION,
        EventKind.SOCKET_ERROR,
        EventKind.MPI_JOB_ABORTED,
        EventKind.TEST_NCCL_FAILURE,
        *[EventKind.TEST_FAILURE] * 7,
        EventKind.MPI_PROCESS_SIGNALED,
    ]
    sock = ev[1]
    assert (sock.line, sock.host, sock.pid, sock.tid, sock.rank) == (22, "vm", 2537, 2554, 0)
    assert sock.details["source"] == "misc/socket.cc:46"
    assert sock.message.startswith("socketProgressOpt: Call to send to 127.0.0.1<44825> failed")
    assert sock.time == datetime(2026, 11, 22, 3, 55, 0, tzinfo=timezone.utc).timestamp()
    assert abs(sock.time - KILL_SENT_AT) < 1.0
    sig = ev[-1]
    assert (sig.rank, sig.host, sig.pid, sig.line) == (1, "vm", None, 36)
    assert sig.details == {"signal": "9", "signal_name": "Killed"}
    fail = ev[3]
    assert fail.details["where"] == "common.cu:514"
    assert "remote process exited" in fail.details["error"]
    assert {e.pid for e in ev if e.kind is EventKind.TEST_FAILURE} == {2537}
    assert ev[0].details["version"] == "2.28.3+cuda13.0"


def test_timestamps_on_every_level() -> None:
    ev = events_of("all_reduce_perf.killed.info.txt", include_info=True)
    info = [e for e in ev if e.kind is EventKind.NCCL_INFO]
    n_info_lines = (DATA / "all_reduce_perf.killed.info.txt").read_text().count("NCCL INFO")
    versions = [e for e in ev if e.kind is EventKind.NCCL_VERSION]
    assert len(info) + len(versions) == n_info_lines
    assert {e.pid for e in versions} == {2636, 2637}
    assert all(e.time is not None for e in info)
    assert info[0].time == datetime(2026, 11, 22, 3, 55, 2, tzinfo=timezone.utc).timestamp()
    sock = next(e for e in ev if e.kind is EventKind.SOCKET_ERROR)
    assert sock.line == 105 and "Connection closed by remote peer" in sock.message


def test_info_lines_skipped_by_default() -> None:
    ev = events_of("all_reduce_perf.socket.info.txt")
    assert kinds(ev) == [EventKind.NCCL_VERSION, EventKind.NCCL_VERSION]
    assert len(events_of("all_reduce_perf.socket.info.txt", include_info=True)) > 80


def test_hung_run_events() -> None:
    ev = events_of("all_reduce_perf.hung.T15.txt")
    timeout = ev[0]
    assert timeout.kind is EventKind.TEST_TIMEOUT
    assert (timeout.line, timeout.host) == (16, "vm")  # the row preamble glued in front is cut
    assert timeout.details["timeout_s"] == "15"
    exit_ev = ev[-1]
    assert exit_ev.kind is EventKind.MPI_PROCESS_EXIT
    assert (exit_ev.rank, exit_ev.details["exit_code"], exit_ev.line) == (0, "4", 29)


@pytest.mark.parametrize(
    ("name", "first"),
    [
        ("launch.no_such_binary.txt", "mpirun was unable to launch the specified application"),
        ("launch.not_enough_slots.txt", "There are not enough slots available"),
    ],
)
def test_launch_errors(name: str, first: str) -> None:
    ev = events_of(name)
    assert ev and all(e.kind is EventKind.LAUNCH_ERROR for e in ev)
    assert ev[0].message.startswith(first) and ev[0].line == 2


def test_clean_runs_have_no_error_events() -> None:
    for name in ("all_reduce_perf.socket.c1.txt", "all_reduce_perf.socket.I1.txt"):
        assert events_of(name) == []


def test_r2cc_failover_lines() -> None:
    ev = parse_events(R2CC_LOG)
    assert kinds(ev) == [
        EventKind.R2CC_OOB_INIT,
        EventKind.R2CC_BACKUP_CONNECTED,
        EventKind.R2CC_BACKUP_SWITCH,
        EventKind.R2CC_HOT_REPAIR_BROADCAST,
        EventKind.R2CC_HOT_REPAIR_RECEIVED,
        EventKind.R2CC_STEP_SYNC,
        EventKind.R2CC_STEP_SYNC,
        EventKind.R2CC_HOT_REPAIR_DETECTED,
        EventKind.R2CC_GATHER_COMPLETE,
    ]
    assert ev[0].details == {"port": "51234"}
    assert ev[1].details == {"peer_rank": "11", "channel": "2", "dev": "5"}
    assert ev[2].details["failed_name"] == "mlx5_3" and ev[2].details["backup_dev"] == "5"
    assert ev[3].details == {"from_rank": "3", "peers": "15"} and ev[3].rank == 3
    assert ev[4].details == {"signal": "HOT_REPAIR:3", "peer": "10.0.0.1:51234"}
    assert ev[5].details["direction"] == "Sent" and ev[5].details["peer_rank"] == "11"
    assert ev[6].details["peer"] == "10.0.0.1:51234"
    assert ev[8].details == {"local_mask": "0x8", "global_mask": "0x88"}
    assert [e.line for e in ev] == list(range(1, 10))
    assert (ev[8].host, ev[8].pid) == ("node2", 777)


@pytest.mark.parametrize(
    "line",
    [
        "\nnode1:10:20 [0] transport/net_ib.cc:2770 NCCL WARN NET/IB: Got completion from peer "
        "10.0.0.2<5000> with status=12 opcode=0 len=0 vendor err 129 (Send) localGid ::1 hca mlx5_0",
        "node1:10:20 [0] net_ib.cc:1 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<5000> "
        "with error 12, opcode 0, len 0, vendor err 129",
    ],
)
def test_ib_completion_error(line: str) -> None:
    (ev,) = parse_events(line)
    assert ev.kind is EventKind.NET_IB_COMPLETION_ERROR
    assert (ev.details["status"], ev.details["vendor"]) == ("12", "129")
    assert ev.details["peer"] == "10.0.0.2<5000>" and ev.line == line.count("\n") + 1


def test_fractional_timestamp_and_zone() -> None:
    line = "[2025-01-02 03:04:05.250] h:1:2 [0] NCCL INFO R2CC: hot-repair detected, forcing"
    utc = parse_events(line)[0].time
    plus2 = parse_events(line, tz=timezone(timedelta(hours=2)))[0].time
    assert utc == datetime(2025, 1, 2, 3, 4, 5, tzinfo=timezone.utc).timestamp() + 0.25
    assert plus2 is not None and utc is not None and utc - plus2 == 7200


def test_mpirun_improper_exit_spans_lines() -> None:
    text = "mpirun has exited due to process rank 2 with PID 99 on\nnode gpu7 exiting improperly.\n"
    (ev,) = parse_events(text)
    assert ev.kind is EventKind.MPI_PROCESS_EXIT
    assert (ev.rank, ev.host, ev.line) == (2, "gpu7", 1)


def test_missing_library_is_a_launch_error() -> None:
    text = "all_reduce_perf: error while loading shared libraries: libnccl.so.2: cannot open shared"
    text += " object file: No such file or directory\nbash: mpirun: command not found\n"
    assert kinds(parse_events(text)) == [EventKind.LAUNCH_ERROR] * 2


def test_control_characters_are_replaced() -> None:
    line = "h:1:2 [0] misc/socket.cc:1 NCCL WARN socketProgress: \x1b[31mreset\x00 <b>x</b>"
    (ev,) = parse_events(line.encode())
    assert ev.kind is EventKind.SOCKET_ERROR
    assert "\x1b" not in ev.text and "\x00" not in ev.message
    assert "<b>x</b>" in ev.message  # escaping for HTML is the report's job
    assert clean("a\x7fb") == "a\ufffdb"


def test_streaming_from_a_file() -> None:
    with (DATA / "all_reduce_perf.hung.T15.txt").open("rb") as fh:
        first = next(iter_events(fh))
    assert first.kind is EventKind.TEST_TIMEOUT


@pytest.mark.parametrize("data", ["", b"", b"\x00\xff\xfe" * 1000, "x" * 100_000])
def test_empty_and_binary_input(data: str | bytes) -> None:
    assert parse_events(data) == []


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_random_text_never_raises(text: str) -> None:
    for ev in parse_events(text, include_info=True):
        assert ev.line >= 1


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from([*R2CC_LOG.splitlines(), "", "NCCL ", "[", "]"]), max_size=20))
def test_shuffled_known_lines_keep_line_numbers(lines: list[str]) -> None:
    ev = parse_events("\n".join(lines), include_info=True)
    for e in ev:
        assert lines[e.line - 1].strip() == e.text


def test_pathological_lines_are_fast() -> None:
    evil = [
        "1 " * 4000,
        "a:1:1 " * 1300,
        "x" * 8000 + ": Test",
        "Got completion from peer x with error 1 " + "v" * 7000,
        "NCCL " * 1600,
    ]
    start = time.perf_counter()
    for line in evil:
        assert parse_events((line + "\n") * 50, include_info=True) == []
    assert time.perf_counter() - start < 5


def test_ib_completion_error_continued_on_the_next_line() -> None:
    text = (
        "node1:10:20 [0] transport/net_ib.cc:1695 NCCL WARN NET/IB : Got completion from peer "
        "10.0.0.2<5000> with error 12, opcode 0, len\n"
        "0, vendor err 129 (Send) localGid ::ffff:10.0.0.1 remoteGids::ffff:10.0.0.2\n"
        "node1:10:20 [0] NCCL INFO transport/net_ib.cc:1 -> 6\n"
    )
    (ev,) = parse_events(text)
    assert ev.kind is EventKind.NET_IB_COMPLETION_ERROR and ev.line == 1
    assert (ev.details["status"], ev.details["vendor"], ev.details["peer"]) == (
        "12",
        "129",
        "10.0.0.2<5000>",
    )


@pytest.mark.parametrize(
    "text",
    [
        "If mpirun says `No such file or directory`, check the path of the binary.\n",
        "Errors such as command not found mean the PATH is wrong (see below).\n",
        "  --prefix <dir>   Prefix where Open MPI is installed on remote nodes\n",
    ],
)
def test_help_and_prose_are_not_launch_errors(text: str) -> None:
    assert parse_events(text) == []


def test_mpirun_exit_code_after_the_node_line() -> None:
    text = (
        "prterun detected that one or more processes exited with non-zero status,\n"
        "thus causing the job to be terminated. The first process to do so was:\n\n"
        "   Process name: [prterun-vm-1234@1,1]\n"
        "   Node: vm\n"
        "   Exit code:    3\n"
    )
    (ev,) = parse_events(text)
    assert ev.kind is EventKind.MPI_PROCESS_EXIT
    assert (ev.rank, ev.host, ev.details["exit_code"]) == (1, "vm", "3")


def test_slurm_task_exit_code() -> None:
    (ev,) = parse_events("srun: error: gpu-07: task 3: Exited with exit code 2\n")
    assert ev.kind is EventKind.MPI_PROCESS_EXIT
    assert (ev.rank, ev.host, ev.details["exit_code"]) == (3, "gpu-07", "2")


def test_ib_completion_error_without_its_continuation_keeps_the_next_line() -> None:
    text = (
        "node1:10:20 [0] net_ib.cc:1 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<5000> "
        "with error 12, opcode 0, len\n"
        "mpirun noticed that process rank 1 with PID 7 on node node2 exited on signal 9 (Killed).\n"
    )
    ib, signaled = parse_events(text)
    assert ib.kind is EventKind.NET_IB_COMPLETION_ERROR and ib.details["status"] == "12"
    assert signaled.kind is EventKind.MPI_PROCESS_SIGNALED and signaled.line == 2


def test_a_socket_source_warning_is_a_socket_error() -> None:
    events = parse_events((PUBLIC / "nccl-tests-360-a.txt").read_text())
    assert [e.kind for e in events] == [EventKind.SOCKET_ERROR] * 4


# ------------------------------------------------------------------ one streaming pass


@pytest.mark.parametrize(
    "path",
    [
        PUBLIC / "rocm-blogs-mi300x-rccl-xgmi.txt",
        PUBLIC / "nccl-tests-360-b.txt",
        DATA / "all_reduce_perf.killed.warn.txt",
        R2CCL / "r2ccl-m0-socket-hca0-all_reduce.txt",
        ROUND3 / "extract-4-runs.txt",
    ],
)
def test_read_log_is_iter_runs_and_read_events_in_one_pass(path: Path) -> None:
    runs, events = read_log(path.open("rb"), file_name=path.name)
    assert runs == iter_runs(path.read_bytes(), file_name=path.name)
    assert events == read_events(path.read_bytes())
    assert [len(r.rows) for r, _, _ in parse_file(path)] == [len(r.rows) for r in runs]


def test_one_event_kind_beyond_its_cap_is_counted_not_built() -> None:
    info = "vm:1:2 [0] NCCL INFO R2CC: Sent STEP_SYNC channel=0 step=1 to rank 1\n"
    warn = "vm:1:2 [0] misc/socket.cc:46 NCCL WARN NET/Socket : unable to allocate requests\n"
    events = read_events((info + warn) * 30, per_kind=10)
    kinds = [e.kind for e in events]
    assert kinds.count(EventKind.R2CC_STEP_SYNC) == 10 and kinds.count(EventKind.SOCKET_ERROR) == 10
    assert [e.details.get("more") for e in events if "more" in e.details] == ["20", "20"]
