"""Logs of real R-2CCL and stock NCCL under a real link fault (tests/data/gpu-netns/README.md):
what r2bench reads in them, and R-2CCL's semantics as its own log lines show them."""

from __future__ import annotations

import json
import re

from r2bench.analysis.outcome import FAILOVER_KINDS, classify
from r2bench.config.r2ccl import backup_nic
from r2bench.parse.events import parse_events
from r2bench.parse.models import EventKind, OutcomeStatus
from r2bench.parse.nccltests.text import parse_text
from r2bench.sweep.flood import SUMMARY_PREFIX
from tests.support import paths

DATA = paths.DATA / "gpu-netns"
R2CCL = "r2ccl-m0-nic3-down-3s"


def _text(name: str) -> str:
    return (DATA / name).read_text()


def test_every_channel_backs_up_on_its_pair_nic() -> None:
    """R-2CCL's recvProxySetup lines: channel c's backup is on NIC primary XOR 1 (4 NICs)."""
    pairs = re.findall(r"primary dev=(\d+), backup dev=(\d+)", _text(f"{R2CCL}.stderr.txt"))
    assert len(pairs) == 16  # 8 channels on each of the 2 ranks
    assert all(int(backup) == backup_nic(int(primary), 4) for primary, backup in pairs)


def test_r2ccl_mode0_under_a_3s_link_fault_logs_no_failover_and_hangs() -> None:
    """The fault was applied (faults.jsonl), the rows stop after the 64 MiB size, and no R2CC
    failover line (STEP_SYNC, HOT_REPAIR) appears: r2bench must never call this a recovery."""
    faults = [json.loads(line) for line in _text(f"{R2CCL}.faults.jsonl").splitlines()]
    assert [f["action"] for f in faults][:1] == ["inject"] and faults[0]["ok"]
    parsed = parse_text(_text(f"{R2CCL}.stdout.txt"))
    assert sorted({row.size_bytes for row in parsed.rows}) == [16 << 20, 64 << 20]
    events = parse_events(_text(f"{R2CCL}.stderr.txt"))
    assert not [e for e in events if e.kind in FAILOVER_KINDS]
    outcome = classify(None, timed_out=True, parsed=parsed, events=events)
    assert outcome.status is OutcomeStatus.TIMEOUT


def test_the_bounded_capture_says_how_much_it_left_out() -> None:
    summaries = [
        line
        for line in _text(f"{R2CCL}.stderr.txt").splitlines()
        if line.startswith(SUMMARY_PREFIX)
    ]
    counts = [int(re.search(r"r2bench: (\d+) more lines", line)[1]) for line in summaries]  # type: ignore[index]
    assert max(counts) > 500_000  # the receive-polling loop of the hang
    assert all("RECV" in s or "SEND" in s or "TIMESTAMP" in s for s in summaries)


def test_stock_nccl_rides_out_a_3s_outage_and_hangs_on_a_dead_nic() -> None:
    survived = parse_text(_text("stock-nic3-down-3s.stdout.txt"))
    assert classify(0, parsed=survived, events=[]).status is OutcomeStatus.OK
    assert max(row.size_bytes for row in survived.rows) == 256 << 20
    text = _text("stock-nic3-down.stdout.txt") + _text("stock-nic3-down.stderr.txt")
    hung = parse_text(_text("stock-nic3-down.stdout.txt"))
    outcome = classify(4, parsed=hung, events=parse_events(text))
    assert outcome.status is OutcomeStatus.TIMEOUT
    assert any(e.kind is EventKind.TEST_TIMEOUT for e in parse_events(text))


def test_nccl_info_on_stdout_glues_log_lines_into_result_rows() -> None:
    """Why link-fault.yaml sets NCCL_DEBUG_FILE=/dev/stderr: with NCCL's log on stdout, a
    row's first fields end where an NCCL line begins (captured from R-2CCL at INFO)."""
    glued = [
        line
        for line in _text("r2ccl-m0-info-on-stdout.head.txt").splitlines()
        if re.match(r"^\s+\d{8,}\s+\d+\s+float\s+sum\s+-1\S+:\d+:\d+ \[\d\] NCCL INFO", line)
    ]
    assert len(glued) == 2


def test_the_first_result_is_found_in_rows_cut_apart_by_nccl_log_lines() -> None:
    """The fault anchor `first_result`: on R-2CCL's INFO stdout the first row's head is glued to
    a log line and its figures come thousands of lines later, glued to another."""
    from r2bench.sweep.firstresult import FirstResultWatch

    lines = _text("r2ccl-m0-info-on-stdout.head.txt").splitlines()
    watch = FirstResultWatch()
    hits = [line for line in lines if watch.feed(line)]
    assert len(hits) == 1 and hits[0].lstrip().startswith("14596.0    1.15    1.15       0")
    clean = FirstResultWatch()
    row = "    16777216       4194304     float     sum      -1  11705.6    1.43    1.43       0"
    assert not clean.feed("#       size         count      type   redop    root     time")
    assert clean.feed(row) and not clean.feed(row)
