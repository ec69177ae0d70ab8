"""Run outcome classification on real captures (exit codes from tests/data/nccl-tests/README.md)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from r2bench.analysis.outcome import classify
from r2bench.config.recipes import load_recipes
from r2bench.parse.events import parse_events
from r2bench.parse.models import EventKind, LaunchInfo, Outcome, OutcomeStatus
from r2bench.parse.nccltests.text import parse_text
from tests.support import paths

DATA = paths.DATA
CAPTURES = DATA / "nccl-tests"


def classify_text(text: str, exit_code: int | None, **kw: object) -> Outcome:
    return classify(
        exit_code,
        parsed=parse_text(text),
        events=parse_events(text),
        source="out.txt",
        **kw,  # type: ignore[arg-type]
    )


def classify_capture(name: str, exit_code: int | None, **kw: object) -> Outcome:
    return classify_text((CAPTURES / name).read_text(), exit_code, **kw)


PUBLIC = DATA / "public"


@pytest.mark.parametrize(
    "name",
    [
        "all_reduce_perf.socket.c1.txt",
        "all_gather_perf.socket.c1.txt",
        "reduce_scatter_perf.socket.c0.txt",
        "alltoall_perf.socket.c1.txt",
        "broadcast_perf.socket.c0.txt",
        "sendrecv_perf.socket.c1.txt",
        "all_reduce_perf.p2p.c1.txt",
        "all_reduce_perf.socket.S1.txt",
        "all_reduce_perf.socket.I1.txt",
        "all_reduce_perf.socket.N5.txt",
        "all_reduce_perf.socket.info.txt",
        "all_reduce_perf.single.g1.txt",
    ],
)
def test_clean_captures_are_ok(name: str) -> None:
    out = classify_capture(name, 0)
    assert out.status is OutcomeStatus.OK
    assert out.evidence == [] and "result rows" in out.reason


@pytest.mark.parametrize(
    ("name", "socket_line", "signal_line"),
    [("all_reduce_perf.killed.warn.txt", 22, 36), ("all_reduce_perf.killed.info.txt", 105, 129)],
)
def test_killed_rank_is_crashed_and_named(name: str, socket_line: int, signal_line: int) -> None:
    out = classify_capture(name, 137)
    assert out.status is OutcomeStatus.CRASHED
    assert (out.failed_rank, out.failed_host) == (1, "vm")
    assert "rank 1 on vm was killed by signal 9 (Killed)" in out.reason
    assert "rank 0 on vm saw: socketProgress" in out.reason
    assert [e.line for e in out.evidence][:2] == [signal_line, socket_line]
    assert all(e.source == "out.txt" for e in out.evidence)


def test_hung_rank_is_timeout() -> None:
    out = classify_capture("all_reduce_perf.hung.T15.txt", 4)
    assert out.status is OutcomeStatus.TIMEOUT
    assert "15s" in out.reason and out.failed_host == "vm"
    assert out.evidence[0].line == 16 and "Test timeout (15s)" in out.evidence[0].text
    assert out.evidence[1].line == 15  # the last complete result row


def test_harness_deadline_is_timeout() -> None:
    text = (CAPTURES / "all_reduce_perf.socket.N5.txt").read_text().split("# Out of bounds")[0]
    out = classify_text(text, -9, timed_out=True, launch=LaunchInfo(deadline_s=120))
    assert out.status is OutcomeStatus.TIMEOUT
    assert "deadline of 120 s" in out.reason and "10 result rows" in out.reason


@pytest.mark.parametrize(
    ("name", "exit_code", "words"),
    [
        ("launch.no_such_binary.txt", 132, "unable to launch"),
        ("launch.not_enough_slots.txt", 1, "not enough slots"),
    ],
)
def test_launch_failures(name: str, exit_code: int, words: str) -> None:
    out = classify_capture(name, exit_code)
    assert out.status is OutcomeStatus.LAUNCH_FAILED
    assert words in out.reason and out.evidence[0].line == 2


def test_command_not_found() -> None:
    assert classify_text("bash: mpirun: command not found\n", 127).status is (
        OutcomeStatus.LAUNCH_FAILED
    )
    bare = classify(127, parsed=parse_text(""), launch=LaunchInfo(command="mpirun -np 2 x"))
    assert bare.status is OutcomeStatus.LAUNCH_FAILED and "mpirun -np 2 x" in bare.reason


def test_wrong_results() -> None:
    lines = (CAPTURES / "all_reduce_perf.socket.c1.txt").read_text().splitlines(keepends=True)
    row = lines[20]  # 2 MiB row, line 21
    assert row.split()[8] == "0"
    lines[20] = row.replace("       0   ", "      42   ", 1)
    text = "".join(lines).replace("values : 0 OK", "values : 1 FAILED")
    out = classify_text(text, 5)
    assert out.status is OutcomeStatus.WRONG_RESULTS
    assert out.evidence[0].line == 21 and "#wrong 42" in out.evidence[0].text
    assert "2097152" in out.reason and "FAILED" in out.evidence[-1].text


def test_build_failure_names_cuda_mismatch() -> None:
    log = (DATA / "build" / "r2ccl-cuda13-fail.log").read_text()
    known = load_recipes()["r2ccl"].build.known_failures
    out = classify(2, build_failed=True, build_log=log, known_failures=known, source="build.log")
    assert out.status is OutcomeStatus.BUILD_FAILED
    assert "CUDA 12.x" in out.reason and "PFN_cuDeviceGet" in out.reason
    assert out.evidence[0].line == 25 and out.evidence[0].source == "build.log"


def test_interrupted_wins_over_exit_code() -> None:
    out = classify_capture("all_reduce_perf.killed.warn.txt", 130, interrupted=True)
    assert out.status is OutcomeStatus.INTERRUPTED and "16 result rows" in out.reason


def test_truncated_output_without_exit_code_is_incomplete() -> None:
    # A paste cut short, or a log still being written: nothing says the run failed.
    text = (CAPTURES / "all_reduce_perf.socket.c1.txt").read_text()
    out = classify_text(text[: text.index("2097152")], None)
    assert out.status is OutcomeStatus.INCOMPLETE
    assert "without any sign of failure" in out.reason and "18 result rows" in out.reason
    assert "Collective test concluded" in out.reason


def test_truncated_output_with_a_failure_exit_is_crashed() -> None:
    text = (CAPTURES / "all_reduce_perf.socket.c1.txt").read_text()
    out = classify_text(text[: text.index("2097152")], 1)
    assert out.status is OutcomeStatus.CRASHED and "exited with code 1" in out.reason


def test_signal_exit_without_logs() -> None:
    out = classify(-9, parsed=parse_text(""))
    assert out.status is OutcomeStatus.CRASHED and "signal 9" in out.reason
    assert classify(139).reason.startswith("launcher killed by signal 11")


def test_earliest_network_error_names_the_rank_from_the_rank_table() -> None:
    header = (CAPTURES / "all_reduce_perf.socket.c1.txt").read_text().split("#\n#  ")[0]
    text = (
        header + "#\n# Using devices\n"
        "#  Rank  0 Group  0 Pid   100 on      node1 device  0 [0000:00:06] NVIDIA H200\n"
        "#  Rank  1 Group  0 Pid   200 on      node2 device  0 [0000:00:06] NVIDIA H200\n"
        "[2026-01-01 00:00:09] node1:100:5 [0] net_ib.cc:1 NCCL WARN NET/IB : Got completion "
        "from peer 10.0.0.2<1> with error 12, opcode 0, len 0, vendor err 129\n"
        "[2026-01-01 00:00:07] node2:200:5 [0] net_ib.cc:1 NCCL WARN NET/IB : Got completion "
        "from peer 10.0.0.1<1> with error 12, opcode 0, len 0, vendor err 129\n"
        "node1: Test NCCL failure common.cu:514 'remote process exited or there was a network "
        "error / '\n"
    )
    out = classify_text(text, 3)
    assert out.status is OutcomeStatus.CRASHED
    assert (out.failed_rank, out.failed_host) == (1, "node2")  # device [0] on both; pid decides
    assert "network error first" in out.reason
    assert out.evidence[0].text.startswith("[2026-01-01 00:00:07] node2")


@settings(max_examples=150, deadline=None)
@given(st.text(), st.one_of(st.none(), st.integers(-64, 255)), st.booleans())
def test_random_input_always_classifies(text: str, code: int | None, timed_out: bool) -> None:
    out = classify_text(text, code, timed_out=timed_out)
    assert out.status in OutcomeStatus
    if timed_out:
        assert out.status is OutcomeStatus.TIMEOUT


def test_network_errors_survived_by_a_successful_job_are_ok_not_crashed() -> None:
    """A resilient library logs the dead link and carries on: exit 0 + concluded output is ok."""
    text = (DATA / "nccl-tests" / "all_reduce_perf.socket.c1.txt").read_text()
    warn = "vm:1234:1240 [0] NCCL WARN NET/Socket : send to rank 1 on channel 1 device 1 (nic1) stalled for 512 ms\n"
    outcome = classify(0, parsed=parse_text(text), events=parse_events(warn))
    assert outcome.status is OutcomeStatus.OK
    assert "survived 1 network error" in outcome.reason and outcome.evidence
    crashed = classify(3, parsed=parse_text(text), events=parse_events(warn))
    assert crashed.status is OutcomeStatus.CRASHED


def test_an_armed_software_fault_with_no_failover_is_not_a_survival() -> None:
    """R2CC_DISCONNECTED_HCA over NET/Socket logs that it will inject, then nothing happens:
    the run is `fault_not_injected`, never `ok`; with a HOT_REPAIR line it stays ok."""
    from r2bench.analysis.outcome import software_fault_check

    ok = Outcome(status=OutcomeStatus.OK, reason="finished")
    armed = {"R2CC_DISCONNECTED_HCA": "0", "R2CC_MODE": "0"}
    checked = software_fault_check(ok, armed, [])
    assert checked.status is OutcomeStatus.FAULT_NOT_INJECTED
    assert "R2CC_DISCONNECTED_HCA=0 was armed but no failover followed" in checked.reason
    line = "node0:1:2 [0] NCCL INFO OOB: Broadcast HOT_REPAIR signal from rank 0 to 1 peers"
    repaired = parse_events(line + "\n")
    assert repaired and software_fault_check(ok, armed, repaired).status is OutcomeStatus.OK
    assert software_fault_check(ok, {"R2CC_DISCONNECTED_HCA": "none"}, []) is ok
    crashed = ok.model_copy(update={"status": OutcomeStatus.CRASHED})
    assert software_fault_check(crashed, armed, []) is crashed


def test_an_ib_injection_line_shows_the_software_fault_fired() -> None:
    """R-2CCL's IB transport logs `R2CC inject failure: channel=%d step=%d env=%s` when
    R2CC_DISCONNECTED_HCA fires (the format of src/transport/net_ib.cc at f45cbcb; no IB
    hardware has printed it for this project yet)."""
    from r2bench.analysis.outcome import software_fault_check
    from r2bench.parse.models import EventKind

    line = "node1:7:9 [1] NCCL INFO R2CC inject failure: channel=3 step=400 env=mlx5_1"
    (event,) = parse_events(line + "\n")
    assert event.kind is EventKind.R2CC_INJECTED_FAILURE
    assert event.details["step"] == "400" and event.details["channel"] == "3"
    ok = Outcome(status=OutcomeStatus.OK, reason="finished")
    assert software_fault_check(ok, {"R2CC_DISCONNECTED_HCA": "mlx5_1"}, [event]) is ok


def test_evidence_names_the_file_each_line_came_from() -> None:
    # The crashed quickstart run: the network error is on stderr, the workload's own failure
    # line on stdout; each piece of evidence names its own file, not one file for all.
    run = DATA / "quickstart-sweep" / "all_reduce-nccl-emulated-nic1-down-r0-a2fcee58fe"
    pairs = [
        (name, event)
        for name in ("stdout.txt", "stderr.txt")
        for event in parse_events((run / name).read_text())
    ]
    out = classify(
        3,
        parsed=parse_text((run / "stdout.txt").read_text()),
        events=[event for _, event in pairs],
        event_sources=[name for name, _ in pairs],
        source="stderr.txt",
    )
    assert out.status is OutcomeStatus.CRASHED
    by_text = {e.text: e.source for e in out.evidence}
    assert any(
        "Test NCCL failure" in text and source == "stdout.txt" for text, source in by_text.items()
    )
    assert any("NCCL WARN" in text and source == "stderr.txt" for text, source in by_text.items())


# ------------------------------------------------------------------ failures of frameworks


def test_pytorch_watchdog_timeout_is_a_timeout_with_its_evidence() -> None:
    for name, rank in (("basicsr-737.txt", 1), ("llamafactory-7396.txt", 0)):
        text = (PUBLIC / name).read_text()
        events = parse_events(text)
        watchdog = [e for e in events if e.kind is EventKind.COLLECTIVE_TIMEOUT]
        assert watchdog and watchdog[0].details["op"] == "ALLREDUCE"
        assert watchdog[0].details["timeout_ms"] == "600000"
        outcome = classify(None, parsed=parse_text(text), events=events)
        assert outcome.status is OutcomeStatus.TIMEOUT and outcome.failed_rank == rank
        assert "Watchdog caught collective operation timeout" in outcome.evidence[0].text


def test_qp_fatal_events_and_a_fatal_communicator_are_a_crash() -> None:
    text = (PUBLIC / "nccl-tests-360-b.txt").read_text()
    events = parse_events(text)
    fatal = [e for e in events if e.kind is EventKind.NCCL_FATAL_ERROR]
    assert len(fatal) == 13
    assert fatal[0].details == {"dev": "mlx5_3:1", "on": "QP", "what": "invalid request local work queue error", "source": "transport/net_ib.cc:154"}  # fmt: skip
    assert fatal[-1].details["detected"] == "ncclIbIrecv"
    outcome = classify(None, parsed=parse_text(text), events=events)
    assert outcome.status is OutcomeStatus.CRASHED
    assert outcome.evidence[0].line == 4 and "async fatal event on QP" in outcome.reason


def test_ncclremoteerror_report_is_a_crash() -> None:
    text = (PUBLIC / "kubecon-hk-2024-ncclremoteerror.txt").read_text()
    events = parse_events(text)
    kinds = [e.kind for e in events]
    assert EventKind.NCCL_FATAL_ERROR in kinds
    outcome = classify(None, parsed=parse_text(text), events=events)
    assert outcome.status is OutcomeStatus.CRASHED and outcome.failed_rank == 16
    assert "remote process exited or there was a network error" in outcome.reason


def test_network_errors_of_a_run_that_went_on_to_its_end_are_survived() -> None:
    """No exit code (a paste) and the run ends complete: the job carried on past them."""
    text = (PUBLIC / "a3mega-ztan-nccl-test-result.txt").read_text()
    warn = "node:1:2 [0] transport/net_ib.cc:154 NCCL WARN NET/IB : mlx5_3:1 async fatal event on QP (0x1): x\n"
    outcome = classify(None, parsed=parse_text(text), events=parse_events(warn))
    assert outcome.status is OutcomeStatus.OK and "survived 1" in outcome.reason
