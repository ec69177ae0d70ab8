"""Issue 30's classes of other people's logs, one test per class on data of that shape
(tests/data/public/ and tests/data/logs-round3/, both with their sources): the end of a run by
its tool's version, extracts of several runs, blank redop columns, 0 B rows, failures of the
frameworks NCCL runs under, markdown and chat artefacts, hand-made tables, the library family,
and the one streaming pass that reads a dense log."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from r2bench.analysis.outcome import classify
from r2bench.commands.parse import parse_command, parse_file
from r2bench.parse.events import parse_events, read_events, read_log
from r2bench.parse.library import LibraryEvidence, library_of_line
from r2bench.parse.logprefix import LineCleaner, strip_markup
from r2bench.parse.models import EventKind, OutcomeStatus, ParsedNcclTests
from r2bench.parse.nccltests.lines import LineReader
from r2bench.parse.nccltests.text import ends_complete, iter_runs, parse_text, parse_text_runs
from tests.support import paths

DATA = paths.DATA
PUBLIC = DATA / "public"
ROUND3 = DATA / "logs-round3"
R2CCL = DATA / "r2ccl" / "runs"


def _runs(path: Path) -> list[tuple[ParsedNcclTests, OutcomeStatus, list[str]]]:
    out = []
    for _, text, parsed in parse_text_runs(path.read_bytes(), file_name=path.name):
        outcome = classify(None, parsed=parsed, events=parse_events(text))
        out.append((parsed, outcome.status, parsed.warnings))
    return out


def _peak(parsed: ParsedNcclTests) -> float:
    return max(r.busbw_gbps or 0.0 for r in parsed.rows)


# ------------------------------------------------------------------ 1. the end of a run


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


# ------------------------------------------------------------------ 2. several runs in one extract


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
    text = (DATA / "nccl-tests" / "all_reduce_perf.socket.N5.txt").read_bytes()
    runs = iter_runs(text)
    assert len(runs) == 1 and runs[0].cycles == 5


def test_a_command_line_after_rows_starts_the_next_run() -> None:
    text = (PUBLIC / "rocm-blogs-mi300x-rccl-xgmi.txt").read_text()
    runs = iter_runs(text)
    assert len(runs) == 2
    lines = text.splitlines()
    assert lines[(runs[1].first_line or 0) - 1].startswith("mpirun")


# ------------------------------------------------------------------ 3. blank redop, 0 B rows


def test_a_blank_redop_column_is_read() -> None:
    """Releases before 2.13.4 print nothing under `redop` for alltoall: 34 rows, not 0."""
    parsed = parse_text((PUBLIC / "superbenchmark-nccl_alltoall.txt").read_text())
    assert len({r.line for r in parsed.rows}) == 34 and parsed.unreadable_rows == 0
    assert {r.redop for r in parsed.rows} == {""}
    assert parsed.error_column and not parsed.wrong_rows


def test_a_lost_redop_in_a_reducing_table_is_not_read_as_blank() -> None:
    """One all_reduce row that lost its `sum` is a damaged row, never a blank redop."""
    text = (DATA / "nccl-tests" / "all_reduce_perf.socket.c1.txt").read_text()
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
    text = (DATA / "nccl-tests" / "all_reduce_perf.socket.c1.txt").read_text()
    lines = text.splitlines(keepends=True)
    row = next(ln for ln in lines if ln.lstrip().startswith("2097152 "))
    head = [ln for ln in lines if ln.startswith("#")][:12]
    parsed = parse_text("".join(head) + row * 3)
    assert [r.cycle for r in parsed.rows] == [0, 0, 1, 1, 2, 2]


# ------------------------------------------------------------------ 4. failures of frameworks


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


def test_a_socket_source_warning_is_a_socket_error() -> None:
    events = parse_events((PUBLIC / "nccl-tests-360-a.txt").read_text())
    assert [e.kind for e in events] == [EventKind.SOCKET_ERROR] * 4


# ------------------------------------------------------------------ 5. markdown and chat artefacts


def test_autolinked_source_locations_are_read() -> None:
    plain = parse_events((PUBLIC / "nccl-tests-360-a.txt").read_text())
    linked_text = (ROUND3 / "autolinked-nccl-tests-360-a.txt").read_text()
    linked = parse_events(linked_text)
    assert [(e.kind, e.line, e.message) for e in linked] == [
        (e.kind, e.line, e.message) for e in plain
    ]
    assert linked[0].details["source"] == "misc/socket.cc:502"
    outcome = classify(None, parsed=parse_text(linked_text), events=linked)
    assert outcome.status is OutcomeStatus.CRASHED and outcome.evidence[0].line == 40


@pytest.mark.parametrize(
    ("pasted", "line"),
    [
        ("```bash", ""),
        ("  ~~~", ""),
        ("> # nThread 1 nGpus 1", "# nThread 1 nGpus 1"),
        ("> > vm:1:2 [0] NCCL WARN x", "vm:1:2 [0] NCCL WARN x"),
        (
            "n:1:2 [0] transport/[p2p.cc:783](https://p2p.cc:783/) NCCL WARN x",
            "n:1:2 [0] transport/p2p.cc:783 NCCL WARN x",
        ),
        ("\\# Avg bus bandwidth : 1.5", "# Avg bus bandwidth : 1.5"),
        ("./build/all\\_reduce\\_perf -g 8", "./build/all_reduce_perf -g 8"),
        (
            "  8  2  float  sum  -1  1.0  0.00  0.00  0  1.0  0.00  0.00  0 ```",
            "  8  2  float  sum  -1  1.0  0.00  0.00  0  1.0  0.00  0.00  0 ",
        ),
        ("vm:1:2 [0] NCCL INFO 0 -> 1 via P2P/IPC", "vm:1:2 [0] NCCL INFO 0 -> 1 via P2P/IPC"),
    ],
)
def test_markup_is_stripped(pasted: str, line: str) -> None:
    assert strip_markup(pasted) == line


def test_a_quoted_paste_reads_as_the_plain_one() -> None:
    text = (DATA / "nccl-tests" / "all_reduce_perf.socket.c1.txt").read_text()
    quoted = "".join(f"> {ln}\n" for ln in text.splitlines())
    fenced = "```\n" + text + "```\n"
    plain = parse_text(text)
    for pasted in (quoted, fenced):
        p = parse_text(pasted)
        assert [r.busbw_gbps for r in p.rows] == [r.busbw_gbps for r in plain.rows]
        assert p.concluded and p.collective == "all_reduce"


def test_torchrun_rank_tags_are_prefixes() -> None:
    cleaner = LineCleaner()
    cleaner.decide([])
    text, origin, _ = cleaner.split(
        "[rank3]:[E1206 18:44:12.7 ProcessGroupNCCL.cpp:607] [Rank 3] x"
    )
    assert origin == "3" and text.startswith("[E1206")


# ------------------------------------------------------------------ 6. hand-made tables


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


# ------------------------------------------------------------------ 7. the library family


@pytest.mark.parametrize(
    ("line", "found"),
    [
        ("NCCL version 2.19.3+cuda12.2", ("nccl", "2.19.3+cuda12.2")),
        ("RCCL version : 2.22.3-develop:f5b15f2", ("rccl", "2.22.3-develop:f5b15f2")),
        # RCCL's own line inside an NCCL INFO line (a public RCCL INFO log, ROCm 7.14)
        (
            "macpro2019-01:253809:253809 [0] NCCL INFO RCCL version : 2.30.4-HEAD:2b22ab0",
            ("rccl", "2.30.4-HEAD:2b22ab0"),
        ),
        (
            "[1,0]<stdout>:NCCL version 2.12.12.MSCCL.0.7.3+cuda11.6",
            ("msccl", "2.12.12.MSCCL.0.7.3+cuda11.6"),
        ),
        ("MCCL version 2.16.5", ("other", "MCCL 2.16.5")),
        ("rccl-tests: Version develop:448c4c7", ("rccl", None)),
        (
            "vm:13227:13238 [0] NCCL INFO R2CC: ncclIbInit called - initializing IB devices",
            ("r2ccl", None),
        ),
        ("vm:1:2 [0] r2cc/oob/oob_udp.cc:93 NCCL WARN OOB: x", ("r2ccl", None)),
        ("mpirun -x R2CC_MODE=1 ./all_reduce_perf", None),  # setting it proves nothing
        ("# nccl-tests version 2.19.6 nccl-headers=22803 nccl-library=22803", None),
        ("vm:1:1 [0] NCCL INFO cudaDriverVersion 13000", None),
    ],
)
def test_library_lines(line: str, found: tuple[str, str | None] | None) -> None:
    assert library_of_line(line) == found


def test_r2ccl_is_told_by_its_own_lines_whatever_version_it_reports() -> None:
    r2 = parse_text((R2CCL / "r2ccl-m0-socket-all_reduce.txt").read_text())
    stock = parse_text((R2CCL / "stock-socket-all_reduce.txt").read_text())
    assert (r2.library_family, r2.library_version) == ("r2ccl", "2.23.4+cuda13.0")
    assert (stock.library_family, stock.library_version) == ("nccl", "2.28.9+cuda13.0")


def test_r2ccl_family_does_not_go_back_to_nccl() -> None:
    evidence = LibraryEvidence()
    for line in ("vm:1:1 [0] NCCL INFO R2CC: x", "vm:1:1 [0] NCCL INFO NCCL version 2.23.4"):
        evidence.feed(line)
    assert (evidence.family, evidence.version) == ("r2ccl", "2.23.4")


def test_parse_json_prints_the_family(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert parse_command([PUBLIC / "rocm-systems-3415.txt"], as_json=True) == 0
    doc = json.loads(capsys.readouterr().out.splitlines()[0])
    assert (doc["library_family"], doc["library_version"]) == (
        "rccl",
        "2.28.3-gfx1151-rccl:a188cf2",
    )


# ------------------------------------------------------------------ 8. one streaming pass


@pytest.mark.parametrize(
    "path",
    [
        PUBLIC / "rocm-blogs-mi300x-rccl-xgmi.txt",
        PUBLIC / "nccl-tests-360-b.txt",
        DATA / "nccl-tests" / "all_reduce_perf.killed.warn.txt",
        R2CCL / "r2ccl-m0-socket-hca0-all_reduce.txt",
        ROUND3 / "extract-4-runs.txt",
    ],
)
def test_read_log_is_iter_runs_and_read_events_in_one_pass(path: Path) -> None:
    runs, events = read_log(path.open("rb"), file_name=path.name)
    assert runs == iter_runs(path.read_bytes(), file_name=path.name)
    assert events == read_events(path.read_bytes())
    assert [len(r.rows) for r, _, _ in parse_file(path)] == [len(r.rows) for r in runs]


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


def test_one_event_kind_beyond_its_cap_is_counted_not_built() -> None:
    info = "vm:1:2 [0] NCCL INFO R2CC: Sent STEP_SYNC channel=0 step=1 to rank 1\n"
    warn = "vm:1:2 [0] misc/socket.cc:46 NCCL WARN NET/Socket : unable to allocate requests\n"
    events = read_events((info + warn) * 30, per_kind=10)
    kinds = [e.kind for e in events]
    assert kinds.count(EventKind.R2CC_STEP_SYNC) == 10 and kinds.count(EventKind.SOCKET_ERROR) == 10
    assert [e.details.get("more") for e in events if "more" in e.details] == ["20", "20"]
