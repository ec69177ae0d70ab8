"""The readers' cost is linear in the input whatever its shape: the runs of a long file are
read in one pass each (not once per run), repeated events are a count and the last line, not
an object each. Correctness of those single passes is tested here; the timings are
benchmarks/bench_logs.py's (the runs, connect, line and zeros shapes)."""

from __future__ import annotations

from pathlib import Path

from r2bench.analysis.importer import import_dir
from r2bench.analysis.parseview import LineCursor, read_path
from r2bench.parse.events import read_events
from r2bench.parse.models import EventKind
from r2bench.parse.verify import verifications
from tests.unit.test_text_input import log

ITER = '#iter {{"iter": {i}, "cycle": 0, "size": 64, "start": 1.0, "end": 1.1, "wrong": {w}}}\n'


def test_verifications_of_many_runs_each_get_their_own_lines() -> None:
    lines = []
    ranges = []
    for run in range(300):
        first = len(lines) + 1
        lines += ["# run\n", ITER.format(i=run, w=run % 3), "plain line\n"]
        ranges.append((first, len(lines)))
    checks = verifications(lines, ranges)
    assert [c.samples[0].iter if c else None for c in checks] == list(range(300))
    assert [c.wrong if c else None for c in checks] == [run % 3 for run in range(300)]


def test_verifications_of_overlapping_and_unordered_ranges() -> None:
    lines = [ITER.format(i=i, w=0) for i in range(6)]
    checks = verifications(lines, [(4, 6), (1, 3), (2, 5)])
    assert [[s.iter for s in c.samples] for c in checks if c] == [
        [3, 4, 5],
        [0, 1, 2],
        [1, 2, 3, 4],
    ]


def test_line_cursor_reads_ranges_in_one_pass_and_reopens_for_an_earlier_one(
    tmp_path: Path,
) -> None:
    path = tmp_path / "log.txt"
    path.write_text("".join(f"line {n}\n" for n in range(1, 11)))
    cursor = LineCursor(path)
    assert list(cursor.lines(1, 3)) == [b"line 1\n", b"line 2\n", b"line 3\n"]
    assert list(cursor.lines(4, 4)) == [b"line 4\n"]
    assert list(cursor.lines(7, 8)) == [b"line 7\n", b"line 8\n"]
    assert list(cursor.lines(2, 2)) == [b"line 2\n"]  # earlier: read again
    assert list(cursor.lines(10, 99)) == [b"line 10\n"]
    cursor.close()


def test_import_of_many_runs_in_one_file_writes_each_its_own_lines(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    one = log()
    (logs / "all_reduce_perf.txt").write_text(one * 40)
    report = import_dir(logs, tmp_path / "results", "s")
    assert len(report.imported) == 40
    for run_id, _ in report.imported:
        assert (report.sweep_dir / run_id / "stdout.txt").read_text() == one
    runs = read_path(logs / "all_reduce_perf.txt").runs
    assert [r.lines for r in runs][:2] == [(1, 19), (20, 38)]


def test_a_repeated_event_is_its_first_ones_a_count_and_its_last_line() -> None:
    warn = "vm:1:2 [0] misc/socket.cc:46 NCCL WARN NET/Socket : unable to allocate requests\n"
    events = read_events(warn * 50, per_kind=5)
    assert len(events) == 5 and all(e.kind is EventKind.SOCKET_ERROR for e in events)
    assert events[-1].details["more"] == "45"
    assert events[-1].details["last_line"] == "50"
