"""nccl-tests text/JSON parser, checked against real captures (tests/data/nccl-tests/README.md).

This module holds its pure tests; the same subject's other tests:
tests/integration/test_parse_nccltests.py (those with real processes).
"""

from __future__ import annotations

import io
import time
from datetime import datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from r2bench.analysis.outcome import classify
from r2bench.parse.events import parse_events
from r2bench.parse.models import OutcomeStatus, ParsedNcclTests
from r2bench.parse.nccltests.collective import collective_from_binary, collective_from_file_name
from r2bench.parse.nccltests.jsonfile import parse_json
from r2bench.parse.nccltests.lines import LineReader
from r2bench.parse.nccltests.runs import combine
from r2bench.parse.nccltests.text import ends_complete, iter_runs, parse_text, parse_text_runs
from tests.support import paths
from tests.support.parse_nccltests import read

DATA = paths.DATA / "nccl-tests"
SWEEP_SIZES = [8 * 4**i for i in range(12)]  # -b 8 -e 64M -f 4


OUT_OF_PLACE_2M = "  786.82    2.67    2.67       0"

PUBLIC = paths.DATA / "public"
ROUND3 = paths.DATA / "logs-round3"


def _runs(path: Path) -> list[tuple[ParsedNcclTests, OutcomeStatus, list[str]]]:
    out = []
    for _, text, parsed in parse_text_runs(path.read_bytes(), file_name=path.name):
        outcome = classify(None, parsed=parsed, events=parse_events(text))
        out.append((parsed, outcome.status, parsed.warnings))
    return out


def _peak(parsed: ParsedNcclTests) -> float:
    return max(r.busbw_gbps or 0.0 for r in parsed.rows)


def test_header_facts_of_a_socket_sweep() -> None:
    p = parse_text(read("all_reduce_perf.socket.c1.txt"))
    assert p.collective == "all_reduce"
    assert p.nccl_tests_version == "2.19.6"
    assert (p.nccl_headers, p.nccl_library) == (22803, 22803)
    assert p.ranks == 2
    assert (p.n_threads, p.n_gpus, p.iters, p.warmup_iters, p.validation) == (1, 1, 20, 1, True)
    dev1 = p.devices[1]
    assert (dev1.rank, dev1.group, dev1.pid, dev1.host, dev1.device) == (1, 0, 1683, "vm", 1)
    assert (dev1.bus_id, dev1.name) == ("0000:00:07", "NVIDIA H200")
    assert p.oob_failed is False and p.oob_values == 0
    assert p.avg_busbw_gbps == pytest.approx(1.04482)
    assert p.concluded is True
    assert p.warnings == []


def test_spot_check_rows() -> None:
    rows = parse_text(read("all_reduce_perf.socket.c1.txt")).rows
    assert len(rows) == 24
    last_out, last_in = rows[-2], rows[-1]
    assert (last_out.size_bytes, last_out.count, last_out.type, last_out.redop) == (
        33554432,
        8388608,
        "float",
        "sum",
    )
    assert last_out.root == -1
    assert last_out.placement == "out_of_place" and last_in.placement == "in_place"
    assert (last_out.time_us, last_out.algbw_gbps, last_out.busbw_gbps) == (9643.73, 3.48, 3.48)
    assert (last_in.time_us, last_in.busbw_gbps, last_in.wrong) == (10251.5, 3.27, 0)
    assert rows[0].time_us == 25.89 and rows[1].time_us == 22.44
    assert last_out.line == 23
    assert all(r.wrong == 0 and r.cycle == 0 for r in rows)


@pytest.mark.parametrize(
    ("name", "collective", "redop", "root"),
    [
        ("all_reduce_perf.socket.c1.txt", "all_reduce", "sum", -1),
        ("all_gather_perf.socket.c1.txt", "all_gather", "none", -1),
        ("reduce_scatter_perf.socket.c0.txt", "reduce_scatter", "sum", -1),
        ("alltoall_perf.socket.c1.txt", "alltoall", "none", -1),
        ("broadcast_perf.socket.c0.txt", "broadcast", "none", 0),
        ("sendrecv_perf.socket.c1.txt", "sendrecv", "sum", -1),
        ("all_reduce_perf.p2p.c1.txt", "all_reduce", "sum", -1),
    ],
)
def test_every_collective_sweep(name: str, collective: str, redop: str, root: int) -> None:
    p = parse_text(read(name))
    assert p.collective == collective
    # 8 B split over 2 ranks prints as 0 B for the gather/scatter-like collectives
    assert [r.size_bytes for r in p.rows[2::2]] == SWEEP_SIZES[1:]
    assert p.rows[0].size_bytes in (0, 8) and len(p.rows) == 24
    assert {(r.redop, r.root) for r in p.rows} == {(redop, root)}
    assert p.concluded and not p.warnings


def test_unchecked_run_has_no_wrong_counts() -> None:
    p = parse_text(read("reduce_scatter_perf.socket.c0.txt"))
    assert p.validation is False
    assert {r.wrong for r in p.rows} == {None}
    assert p.wrong_rows == []


def test_alltoall_in_place_is_not_checked() -> None:
    rows = parse_text(read("alltoall_perf.socket.c1.txt")).rows
    assert {r.wrong for r in rows if r.placement == "out_of_place"} == {0}
    assert {r.wrong for r in rows if r.placement == "in_place"} == {None}


def test_timestamp_column() -> None:
    p = parse_text(read("all_reduce_perf.socket.S1.txt"))
    assert len(p.rows) == 6
    assert p.rows[0].timestamp == datetime(2026, 11, 22, 3, 54, 36)
    assert p.rows[5].timestamp == datetime(2026, 11, 22, 3, 54, 38)
    assert [r.cycle for r in p.rows] == [0, 0, 1, 1, 2, 2]


def test_repeated_cycles() -> None:
    p = parse_text(read("all_reduce_perf.socket.N5.txt"))
    assert p.cycles == 5
    assert [r.cycle for r in p.rows if r.placement == "in_place"] == [0, 1, 2, 3, 4]
    assert [r.busbw_gbps for r in p.rows if r.placement == "out_of_place"] == [
        3.58,
        3.36,
        3.28,
        3.71,
        3.90,
    ]


def test_per_iteration_text_columns() -> None:
    p = parse_text(read("all_reduce_perf.socket.I1.txt"))
    first_out, first_in = p.rows[0], p.rows[1]
    assert (first_out.time_us, first_out.iter_min_us, first_out.iter_cv_pct) == (
        502.19,
        471.65,
        4.84,
    )
    assert (first_in.busbw_gbps, first_in.iter_max_us, first_in.iter_p99_us) == (
        2.04,
        564.61,
        564.61,
    )
    assert len(p.rows) == 6 and not p.warnings


def test_per_iteration_json() -> None:
    j = parse_json((DATA / "all_reduce_perf.socket.I1.json").read_bytes())
    assert j.collective == "all_reduce" and j.nccl_library == 22803
    assert len(j.per_iteration) == 6
    assert all(len(it.times_us) == 20 for it in j.per_iteration)
    first = j.per_iteration[0]
    assert (first.size_bytes, first.placement) == (1048576, "out_of_place")
    assert first.times_us[0] == pytest.approx(585.15197)
    assert max(first.times_us) == pytest.approx(585.15197)  # i_max of the text row
    assert j.rows[0].time_us == pytest.approx(502.1875)
    assert j.avg_busbw_gbps == pytest.approx(2.639357)
    assert [d.pid for d in j.devices] == [2234, 2235]


def test_combine_keeps_text_rows_and_adds_iterations() -> None:
    text = parse_text(read("all_reduce_perf.socket.I1.txt"))
    both = combine(text, parse_json(read("all_reduce_perf.socket.I1.json")))
    assert both.rows == text.rows
    assert len(both.per_iteration) == 6
    assert both.rows[0].line == 14


def test_json_agrees_with_text() -> None:
    text = parse_text(read("alltoall_perf.socket.c1.txt"))
    j = parse_json(read("alltoall_perf.socket.c1.json"))
    assert len(j.rows) == len(text.rows) == 24
    for a, b in zip(text.rows, j.rows, strict=True):
        assert (a.size_bytes, a.placement, a.wrong) == (b.size_bytes, b.placement, b.wrong)
        assert a.busbw_gbps == pytest.approx(b.busbw_gbps, abs=0.006)


def test_truncated_json_is_salvaged() -> None:
    raw = read("all_reduce_perf.p2p.c1.json")
    cut = raw[: raw.index('"size":2097152')]  # inside the results list
    j = parse_json(cut)
    assert len(j.rows) == 2 * 9  # the 9 complete results before the cut
    assert any("incomplete" in w for w in j.warnings)


def test_interleaved_nccl_info_lines() -> None:
    p = parse_text(read("all_reduce_perf.socket.info.txt"))
    assert [r.size_bytes for r in p.rows[::2]] == [8, 256, 8192, 262144]
    assert p.rows[0].time_us == 42.79 and p.rows[0].line == 96
    assert p.concluded and not p.warnings


def test_killed_run_output() -> None:
    p = parse_text(read("all_reduce_perf.killed.warn.txt"))
    assert len(p.rows) == 16 and p.cycles == 8
    assert not p.concluded and p.avg_busbw_gbps is None
    assert p.warnings == ["line 21: result row cut short (no measurements)"]


def test_hung_run_row_glued_to_timeout_message() -> None:
    p = parse_text(read("all_reduce_perf.hung.T15.txt"))
    assert len(p.rows) == 8
    assert p.warnings == ["line 16: result row cut short (no measurements)"]


def test_single_process_large_numbers() -> None:
    p = parse_text(read("all_reduce_perf.single.g1.txt"))
    assert p.ranks == 1
    assert p.rows[-1].algbw_gbps == 42848.0  # printed without decimals when wide


def test_row_split_by_a_log_line_is_joined() -> None:
    lines = read("all_reduce_perf.socket.c1.txt").splitlines(keepends=True)
    row = lines[11]  # size 8
    split = row.index(" -1 ") + 3
    head, tail = row[:split], row[split:]
    lines[11:12] = [head + "\n", "vm:1:1 [0] NCCL INFO Channel 00 via NET/Socket/0\n", tail]
    p = parse_text("".join(lines))
    assert len(p.rows) == 24 and p.rows[0].time_us == 25.89 and not p.warnings


@pytest.mark.parametrize(
    ("cut_after", "line_end", "rows", "last_placement"),
    [
        ("   2097152     ", "", 18, "in_place"),
        ("   2097152     ", "\n", 18, "in_place"),
        (OUT_OF_PLACE_2M, "\n", 19, "out_of_place"),  # the in-place half never came
        (OUT_OF_PLACE_2M, "", 18, "in_place"),  # no line end: the whole row is doubtful
    ],
)
def test_truncated_mid_row(cut_after: str, line_end: str, rows: int, last_placement: str) -> None:
    text = read("all_reduce_perf.socket.c1.txt")
    cut = text[: text.index(cut_after) + len(cut_after)] + line_end
    p = parse_text(cut)
    assert len(p.rows) == rows
    assert p.rows[-1].placement == last_placement
    assert not p.concluded and p.warnings


def test_last_line_without_line_end_is_not_trusted() -> None:
    text = read("all_reduce_perf.socket.c1.txt")
    cut = text[: text.index("10251.5") + 3]  # in-place time cut to "102"
    p = parse_text(cut)
    assert len(p.rows) == 22
    assert p.rows[-1].size_bytes == 8388608
    assert "no line end" in p.warnings[-1]


@pytest.mark.parametrize("data", ["", b"", "\n\n\n", "#\n#\n"])
def test_empty_input(data: str | bytes) -> None:
    p = parse_text(data)
    assert p.rows == [] and p.devices == [] and p.collective is None
    assert parse_json(data).rows == []


def test_binary_garbage_around_real_output() -> None:
    garbage = bytes(range(256)) * 40
    blob = garbage + b"\n" + (DATA / "sendrecv_perf.socket.c1.txt").read_bytes() + garbage
    p = parse_text(blob)
    assert len(p.rows) == 24 and p.collective == "sendrecv"


def test_hostile_lines_between_rows() -> None:
    hostile = [
        "<script>alert('x')</script>\n",
        "\x1b[31m\x00\x07 1 2 <b>x</b>\n",
        "#  Rank " + "1 " * 3000 + "\n",
        "9" * 10000 + "\n",
        "   16   4   float  sum  -1  N/A  N/A  N/A  N/A  N/A  N/A  N/A  N/A\n",
    ]
    lines = read("all_reduce_perf.socket.c1.txt").splitlines(keepends=True)
    p = parse_text("".join(lines[:14] + hostile + lines[14:]))
    assert len(p.rows) == 26
    odd = [r for r in p.rows if r.size_bytes == 16]
    assert [r.time_us for r in odd] == [None, None] and odd[0].wrong is None
    assert any("overlong" in w for w in p.warnings)
    assert all("\x00" not in w and "<script>" not in w for w in p.warnings)


def test_older_format_without_root_column() -> None:
    # Column layout of early nccl-tests 2.x (no root column, float "error" column).
    text = (
        "# nThread 1 nGpus 8 minBytes 8 maxBytes 16 step: 2(factor) warmup iters: 5 iters: 20 "
        "validation: 1\n"
        "#   Rank  0 Pid  12345 on     node01 device  0 [0x1a] Tesla V100-SXM2-16GB\n"
        "#       size         count    type   redop     time   algbw   busbw  error     time   "
        "algbw   busbw  error\n"
        "           8             2   float     sum    42.44    0.00    0.00  1e-07    41.95    "
        "0.00    0.00  1e-07\n"
        "          16             4   float     sum    43.00    0.00    0.00  0e+00    N/A    "
        "N/A    N/A  N/A\n"
    )
    p = parse_text(text, binary_name="/opt/bin/all_reduce_perf")
    assert p.collective == "all_reduce" and p.warmup_iters == 5
    assert p.devices[0].host == "node01" and p.devices[0].group is None
    assert [r.time_us for r in p.rows] == [42.44, 41.95, 43.0, None]
    # `error` is the largest error seen, not a count of wrong elements: never a #wrong.
    assert p.error_column and all(r.wrong is None for r in p.rows) and p.rows[0].root == -1


def test_collective_from_binary() -> None:
    assert collective_from_binary("/x/build/all_reduce_perf") == "all_reduce"
    assert collective_from_binary("alltoall_perf_mpi") == "alltoall"
    assert collective_from_binary("alltoallv_perf") == "alltoallv"
    assert collective_from_binary("") is None
    # Only nccl-tests' own test names, wherever they stand in the name: a user's prefix is not
    # part of the collective, and an unknown `*_perf` names none.
    assert collective_from_binary("v213-all_reduce_perf") == "all_reduce"
    assert collective_from_binary("/x/run3_reduce_scatter_perf_mpi") == "reduce_scatter"
    assert collective_from_binary("node1.all_gather_perf") == "all_gather"
    assert collective_from_binary("reduce_perf") == "reduce"
    assert collective_from_binary("my_bench_perf") is None
    assert collective_from_binary("all_reduce") is None


def test_collective_from_file_name() -> None:
    assert collective_from_file_name("logs/all_reduce_perf.socket.c1.txt") == "all_reduce"
    assert collective_from_file_name("old/v213-all_reduce_perf.g2.c1.txt") == "all_reduce"
    assert collective_from_file_name("2026-01-02_sendrecv_perf.txt") == "sendrecv"
    assert collective_from_file_name("results.txt") is None


def test_iterable_of_lines_streams() -> None:
    with (DATA / "all_gather_perf.socket.c1.txt").open("rb") as fh:
        p = parse_text(fh)
    assert len(p.rows) == 24 and p.avg_busbw_gbps == pytest.approx(0.978799)


def test_pathological_lines_are_fast() -> None:
    evil = ["#  Rank " + " " * 7000 + "x", "# nThread " + "1" * 8000, "1 " * 4000, "#" * 8000]
    start = time.perf_counter()
    for line in evil:
        parse_text((line + "\n") * 50)
    assert time.perf_counter() - start < 5


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_random_text_never_raises(text: str) -> None:
    p = parse_text(text)
    assert isinstance(p.warnings, list)
    assert parse_json(text).rows is not None


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_mutated_capture_never_raises(data: st.DataObject) -> None:
    text = read("all_reduce_perf.socket.I1.txt")
    start = data.draw(st.integers(0, len(text)))
    end = data.draw(st.integers(start, min(len(text), start + 200)))
    junk = data.draw(st.text(max_size=50))
    p = parse_text(text[:start] + junk + text[end:])
    assert len(p.rows) <= 6 + junk.count("\n") * 2 + 2


# ------------------------------------------------------------------ the end of a run


def test_rccl_tests_end_with_their_footer() -> None:
    """rccl-tests (`rccl-tests: Version`, no starting line) print no concluding line: the
    footer is the end of a complete run, and each of the two runs is ok."""
    runs = _runs(PUBLIC / "rocm-blogs-mi300x-rccl-xgmi.txt")
    assert [status for _, status, _ in runs] == [OutcomeStatus.OK, OutcomeStatus.OK]
    assert all(ends_complete(p) and not p.concluded for p, _, _ in runs)


def test_a_version_that_concludes_is_incomplete_without_its_concluding_line() -> None:
    """nccl-tests 2.17.4+ and newer rccl-tests print `# Collective test concluded`: output
    cut between the footer and it is still cut short."""
    text = (PUBLIC / "alibaba-rccl-alltoall.txt").read_text()
    cut = text[: text.index("# Collective test concluded")]
    parsed = parse_text(cut)
    assert parsed.footer and not ends_complete(parsed)
    outcome = classify(None, parsed=parsed, events=[])
    assert outcome.status is OutcomeStatus.INCOMPLETE
    assert "# Collective test concluded" in outcome.reason


def test_old_nccl_tests_footer_ends_the_run() -> None:
    parsed = parse_text((PUBLIC / "superbenchmark-nccl_alltoall.txt").read_text())
    assert ends_complete(parsed) and not parsed.concluded


# ------------------------------------------------------------------ several runs in one extract


def test_an_extract_of_four_runs_is_four_runs() -> None:
    """`grep -h` of the 2-8 GiB rows of four runs of 8, 16, 72 and ~1000 ranks: the sizes start
    over with another busbw/algbw factor each time; every row is kept, in its run."""
    runs = iter_runs((ROUND3 / "extract-4-runs.txt").read_bytes())
    assert [len({r.line for r in p.rows}) for p in runs] == [3, 3, 3, 3]
    assert [_peak(p) for p in runs] == [317.96, 338.82, 846.82, 365.65]
    assert [(p.first_line, p.last_line) for p in runs] == [(1, 3), (4, 6), (7, 9), (10, 12)]
    assert all(p.collective == "all_reduce" and p.cycles == 1 for p in runs)
    for n, p in enumerate(runs, 1):
        assert any(f"run {n} of 4 in an extract" in w for w in p.warnings), p.warnings


def test_an_extract_of_named_files_is_split_at_each_file() -> None:
    """grep over several files prefixes each line with its file: two runs of one rank count
    (one busbw/algbw factor) are still two runs."""
    runs = iter_runs((ROUND3 / "extract-named-runs.txt").read_bytes())
    assert [len({r.line for r in p.rows}) for p in runs] == [3, 3, 3]
    assert [_peak(p) for p in runs] == [338.82, 360.56, 846.82]
    assert any("'rccl-2078.txt'" in w for w in runs[1].warnings)


def test_one_run_of_cycles_stays_one_run() -> None:
    """-N cycles restart the sizes with the same factor: one run, several cycles."""
    text = (DATA / "all_reduce_perf.socket.N5.txt").read_bytes()
    runs = iter_runs(text)
    assert len(runs) == 1 and runs[0].cycles == 5


def test_a_command_line_after_rows_starts_the_next_run() -> None:
    text = (PUBLIC / "rocm-blogs-mi300x-rccl-xgmi.txt").read_text()
    runs = iter_runs(text)
    assert len(runs) == 2
    lines = text.splitlines()
    assert lines[(runs[1].first_line or 0) - 1].startswith("mpirun")


# ------------------------------------------------------------------ blank redop, 0 B rows


def test_a_blank_redop_column_is_read() -> None:
    """Releases before 2.13.4 print nothing under `redop` for alltoall: 34 rows, not 0."""
    parsed = parse_text((PUBLIC / "superbenchmark-nccl_alltoall.txt").read_text())
    assert len({r.line for r in parsed.rows}) == 34 and parsed.unreadable_rows == 0
    assert {r.redop for r in parsed.rows} == {""}
    assert parsed.error_column and not parsed.wrong_rows


def test_a_lost_redop_in_a_reducing_table_is_not_read_as_blank() -> None:
    """One all_reduce row that lost its `sum` is a damaged row, never a blank redop."""
    text = (DATA / "all_reduce_perf.socket.c1.txt").read_text()
    row = next(ln for ln in text.splitlines() if ln.lstrip().startswith("2097152 "))
    damaged = text.replace(row, row.replace("     sum", "        ", 1))
    parsed = parse_text(damaged)
    line = text.splitlines().index(row) + 1
    assert not [r for r in parsed.rows if r.line == line]
    assert any(f"line {line}:" in w and "redop" in w for w in parsed.warnings)


def test_blank_redop_rows_with_a_root_column() -> None:
    """2.13.0-2.13.3 print a root beside the blank redop: `8  2  float  -1  ...`."""
    header = (
        "#       size         count      type   redop    root     time   algbw   busbw #wrong"
        "     time   algbw   busbw #wrong\n"
    )
    rows = "".join(
        f"{size:>12}  {size // 4:>12}     float      -1    {t:.2f}  {size / t / 1e3:6.2f}"
        f"  {size / t / 1e3 * 0.5:6.2f}      0    {t:.2f}  {size / t / 1e3:6.2f}"
        f"  {size / t / 1e3 * 0.5:6.2f}      0\n"
        for size, t in ((1048576, 50.0), (2097152, 80.0))
    )
    parsed = parse_text("# nThread 1\n" + header + rows, file_name="all_gather_perf.txt")
    assert [(r.redop, r.root) for r in parsed.rows] == [("", -1)] * 4
    assert parsed.collective == "all_gather"


@pytest.mark.parametrize(
    ("name", "zero_rows"),
    [
        ("superbenchmark-nccl_alltoall.txt", 5),
        ("superbenchmark-nccl_allgather.txt", 5),
        ("alibaba-rccl-alltoall.txt", 4),
    ],
)
def test_zero_byte_rows_are_one_sweep(name: str, zero_rows: int) -> None:
    parsed = parse_text((PUBLIC / name).read_text())
    zero = {r.line for r in parsed.rows if r.size_bytes == 0}
    assert len(zero) == zero_rows and parsed.cycles == 1


def test_zero_byte_rows_of_two_cycles_are_two_cycles() -> None:
    text = (PUBLIC / "superbenchmark-nccl_alltoall.txt").read_text()
    rows = [ln + "\n" for ln in text.splitlines() if ln.startswith("  ") and "float" in ln]
    head = text[: text.index(rows[0])]
    parsed = parse_text(head + "".join(rows * 2))
    assert parsed.cycles == 2
    assert {r.cycle for r in parsed.rows if r.line and r.line < len(head.splitlines()) + 35} == {0}


def test_a_repeated_single_size_is_one_cycle_each() -> None:
    """`-b X -e X -N 3`: the same non-zero size three times is three cycles."""
    text = (DATA / "all_reduce_perf.socket.c1.txt").read_text()
    lines = text.splitlines(keepends=True)
    row = next(ln for ln in lines if ln.lstrip().startswith("2097152 "))
    head = [ln for ln in lines if ln.startswith("#")][:12]
    parsed = parse_text("".join(head) + row * 3)
    assert [r.cycle for r in parsed.rows] == [0, 0, 1, 1, 2, 2]


# ------------------------------------------------------------------ hand-made tables


def test_a_hand_edited_number_is_outvoted_not_followed() -> None:
    """One busbw edited by hand: only that placement is left out; the genuine rows after it
    are all read (before, the edited row narrowed the run's busbw/algbw and 7 rows after it
    were dropped), and the warning tells the two ranges apart."""
    parsed = parse_text((ROUND3 / "hand-edited-busbw.txt").read_text())
    assert len({r.line for r in parsed.rows}) == 31 and _peak(parsed) == 338.82
    assert {(r.line, r.placement) for r in parsed.rows if r.line == 54} == {(54, "in_place")}
    warning = next(w for w in parsed.warnings if w.startswith("line 54:"))
    assert "1.8738..1.8747" in warning and "1.8750..1.8750" in warning


def test_a_commented_out_row_is_read_and_said() -> None:
    parsed = parse_text((ROUND3 / "commented-row.txt").read_text())
    assert len({r.line for r in parsed.rows}) == 31
    assert any("commented out" in w for w in parsed.warnings)


def test_condensed_tables_of_one_placement() -> None:
    runs = _runs(PUBLIC / "mi300a-rccl-affinity.txt")
    assert [len({r.line for r in p.rows}) for p, _, _ in runs] == [8, 7, 7]
    assert all({r.placement for r in p.rows} == {"out_of_place"} for p, _, _ in runs)
    assert [p.avg_busbw_gbps for p, _, _ in runs] == [11.69, 33.98, 26.22]
    assert [p.ranks for p, _, _ in runs] == [2, 2, 2]  # `Rank 0 ... device 0` counts
    assert runs[0][0].rows[0].wrong is None  # no #wrong column: not checked, not 0


def test_a_seven_column_table_an_author_printed() -> None:
    """`size count type redop time algbw busbw`: one placement, no root, no #wrong."""
    text = (
        "   size      count    type  redop    time   algbw   busbw\n"
        "1048576     262144   float    sum   21.25   49.35   49.35\n"
        "4194304    1048576   float    sum   52.89   79.31   79.31\n"
    )
    parsed = parse_text(text)
    assert [(r.size_bytes, r.busbw_gbps, r.placement) for r in parsed.rows] == [
        (1048576, 49.35, "out_of_place"),
        (4194304, 79.31, "out_of_place"),
    ]


def test_line_reader_across_chunks() -> None:
    lines = [f"line {i} " + "x" * (i % 97) for i in range(30000)]
    data = ("\r\n".join(lines) + "\r\n").encode()
    assert list(LineReader(io.BytesIO(data))) == lines
    reader = LineReader(io.BytesIO(data[:-2]))
    assert list(reader) == lines and not reader.ended


def test_an_overlong_line_is_cut_not_held() -> None:
    data = b"a" * (3 << 20) + b"\nnext\n"
    got = list(LineReader(io.BytesIO(data)))
    assert len(got) == 2 and got[1] == "next" and len(got[0]) < 1 << 20
