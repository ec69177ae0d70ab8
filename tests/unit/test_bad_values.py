"""A bad value costs its row or field, never the run: every number a reader keeps is finite and
within its field's range (int64 for tables), and the refusal is one located warning."""

from __future__ import annotations

import errno
import io
import json
import math
from pathlib import Path

import pytest
from rich.console import Console

from r2bench.commands.failures import report_error
from r2bench.config.errors import ConfigError
from r2bench.config.source import parse_yaml
from r2bench.errors import ExitCode
from r2bench.parse.events import parse_events
from r2bench.parse.models import Event
from r2bench.parse.nccltests.jsonfile import parse_json
from r2bench.parse.nccltests.salvage import salvage_json_results
from r2bench.parse.nccltests.text import parse_text
from r2bench.parse.numbers import INT64_MAX, BadNumber, bounded_float, bounded_int
from r2bench.parse.ras import ras_verdict
from r2bench.parse.verify import parse_verification
from r2bench.runfolder.runmodel import RecordError, load_json_record
from r2bench.runfolder.runmodel import _read_jsonl as read_jsonl
from r2bench.safeio import TooDeep, json_loads, write_failed

HUGE = 10**23

ROW = {
    "size": 64,
    "count": 16,
    "type": "float",
    "redop": "sum",
    "root": -1,
    "out_of_place": {"time": 20.0, "alg_bw": 0.0, "bus_bw": 0.0, "nwrong": 0},
    "in_place": {"time": 19.0, "alg_bw": 0.0, "bus_bw": 0.0, "nwrong": 0},
}


def _json_file(bad_row: dict[str, object], header: dict[str, object] | None = None) -> str:
    good = {**ROW, "size": 128, "count": 32}
    doc = {
        "args": ["/x/all_reduce_perf"],
        "config": {"nthreads": 1, "devices": []},
        **(header or {}),
        "results": [bad_row, good],
    }
    return json.dumps(doc)


def _sizes(parsed_rows: object) -> set[int]:
    return {row.size_bytes for row in parsed_rows}  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("field", "raw"),
    [
        ("count", "1e400"),
        ("count", "Infinity"),
        ("count", "-Infinity"),
        ("count", "NaN"),
        ("size", str(2**64)),
        ("size", "1e400"),
        ("root", str(HUGE)),
    ],
)
def test_json_row_with_a_number_out_of_range_is_refused_and_the_rest_read(
    field: str, raw: str
) -> None:
    text = _json_file({**ROW, field: "@"}).replace('"@"', raw)
    parsed = parse_json(text)
    assert _sizes(parsed.rows) == {128}
    assert any("results[0]" in w and field in w for w in parsed.warnings), parsed.warnings


def _with_wrong(raw: str) -> str:
    bad = {**ROW, "out_of_place": {**ROW["out_of_place"], "nwrong": "@"}}  # type: ignore[dict-item]
    return _json_file(bad).replace('"@"', raw)


@pytest.mark.parametrize("raw", ["1e23", str(HUGE), "-1e23"])
def test_json_wrong_count_out_of_range_refuses_the_row(raw: str) -> None:
    parsed = parse_json(_with_wrong(raw))
    assert _sizes(parsed.rows) == {128}
    assert any("nwrong" in w and "out of range" in w for w in parsed.warnings), parsed.warnings


@pytest.mark.parametrize("raw", ["1e400", "Infinity", "NaN"])
def test_json_wrong_count_that_is_not_finite_is_no_count(raw: str) -> None:
    parsed = parse_json(_with_wrong(raw))
    wrong = {(r.size_bytes, r.placement): r.wrong for r in parsed.rows}
    assert wrong[(64, "out_of_place")] is None
    assert wrong[(64, "in_place")] == 0


def test_json_measurement_as_a_huge_whole_number_refuses_the_row() -> None:
    bad = {**ROW, "in_place": {**ROW["in_place"], "bus_bw": 10**400}}  # type: ignore[dict-item]
    parsed = parse_json(_json_file(bad))
    assert {(r.size_bytes, r.placement) for r in parsed.rows if r.size_bytes == 64} <= {
        (64, "out_of_place")
    }
    assert any("in_place.bus_bw" in w for w in parsed.warnings), parsed.warnings


def test_json_header_numbers_out_of_range_are_left_out_with_a_warning() -> None:
    header = {
        "nccl_version": HUGE,
        "config": {"nthreads": HUGE, "devices": [{"rank": 0, "pid": HUGE}]},
    }
    parsed = parse_json(_json_file(ROW, header))
    assert parsed.devices == []
    assert any("nccl_version" in w for w in parsed.warnings)
    assert any("nthreads" in w for w in parsed.warnings)
    assert any("pid" in w for w in parsed.warnings)
    assert len(parsed.rows) == 4


TABLE = """\
# nThread 1 nGpus 2 minBytes 8 maxBytes 128 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid  {pid} on         vm device  0 [0x00] NVIDIA H200
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
{row}
         128            32     float     sum      -1    20.00    0.01    0.01       0    18.69    0.01    0.01       0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 0.01
"""


@pytest.mark.parametrize(
    "row",
    [
        f"{2**64}            16     float     sum      -1    20.00    0.00    0.00       0    18.69    0.00    0.00       0",
        f"          64   {HUGE}     float     sum      -1    20.00    0.00    0.00       0    18.69    0.00    0.00       0",
        f"          64            16     float     sum      -1    20.00    0.00    0.00  {HUGE}    18.69    0.00    0.00       0",
        "          64            16     float     sum      -1    20.00    0.00    0.00  1e23    18.69    0.00    0.00       0",
    ],
)
def test_text_row_with_a_number_out_of_range_is_refused_located(row: str) -> None:
    parsed = parse_text(TABLE.format(pid=1234, row=row))
    assert all(r.size_bytes == 128 for r in parsed.rows if r.placement == "out_of_place")
    assert 128 in _sizes(parsed.rows)
    assert any(w.startswith("line 9:") for w in parsed.warnings), parsed.warnings
    assert all(r.wrong is None or r.wrong <= INT64_MAX for r in parsed.rows)


def test_text_device_line_with_a_pid_out_of_range_is_refused_located() -> None:
    row = "          64            16     float     sum      -1    20.00    0.00    0.00       0    18.69    0.00    0.00       0"
    parsed = parse_text(TABLE.format(pid=HUGE, row=row))
    assert parsed.devices == []
    assert any(w.startswith("line 4:") and "pid" in w for w in parsed.warnings), parsed.warnings
    assert len(parsed.rows) == 4


def test_nccl_line_with_a_pid_out_of_range_keeps_the_event_without_the_pid() -> None:
    events = parse_events(f"vm:{HUGE}:11 [0] NCCL WARN NET/IB : bad thing\n")
    assert len(events) == 1
    assert events[0].pid is None and events[0].tid == 11
    assert "out of range" in events[0].details["pid_refused"]


@pytest.mark.parametrize(
    "value", [math.inf, -math.inf, math.nan, "1e400", "Infinity", True, None, "x"]
)
def test_bounded_readers_refuse_what_is_not_a_finite_number(value: object) -> None:
    with pytest.raises(BadNumber):
        bounded_int(value, "field")
    with pytest.raises(BadNumber):
        bounded_float(value, "field")


def test_bounded_readers_name_the_field_and_the_range() -> None:
    with pytest.raises(BadNumber, match=r"size 18446744073709551616 is out of range \(0 to "):
        bounded_int(2**64, "size")
    with pytest.raises(BadNumber, match="too many digits"):
        bounded_int("9" * 5000, "size")
    with pytest.raises(BadNumber, match="out of range"):
        bounded_float(10**400, "time")
    assert bounded_int("4.1943e+06", "wrong") == 4194300
    assert bounded_int(INT64_MAX, "size") == INT64_MAX
    assert bounded_float("3", "time") == 3.0


DEEP = '{"results":' + "[" * 100_000 + "]" * 100_000 + "}"


def test_json_nested_too_deeply_is_invalid_json_not_a_recursion_error() -> None:
    with pytest.raises(TooDeep, match="nested too deeply"):
        json_loads(DEEP)
    with pytest.raises(ValueError, match="nested too deeply"):  # callers catch ValueError
        parse_json(DEEP)


def test_a_cut_short_json_nested_too_deeply_salvages_nothing_and_raises_nothing() -> None:
    assert salvage_json_results(DEEP[: len(DEEP) // 2]) == []


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ('env:\n  MY_VAR: "a\\ud800b"\n', "2:11"),
        ('env:\n  "a\\udfffb": x\n', "2:3"),
        ('runs:\n  - name: "x\\udc80"\n', "2:11"),
    ],
)
def test_a_lone_surrogate_in_a_config_is_refused_where_it_is_written(text: str, where: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_yaml(text, "exp.yaml")
    rendered = caught.value.issues[0].render()
    assert rendered.startswith(f"exp.yaml:{where}:"), rendered
    assert "lone surrogate" in rendered and "UTF-16 pair" in rendered


def test_characters_beyond_the_basic_plane_are_still_read() -> None:
    assert parse_yaml('env:\n  X: "\\U0001F600 \u00e9"\n').data == {
        "env": {"X": "\U0001f600 \u00e9"}
    }


def _iter_line(**fields: object) -> str:
    doc = {"iter": 0, "cycle": 0, "size": 8, "start": 1.0, "end": 2.0, "wrong": 0, "elements": 4}
    return "#iter " + json.dumps({**doc, **fields})


def test_verify_iteration_with_a_size_or_time_out_of_range_is_refused_located() -> None:
    lines = [
        _iter_line(size=HUGE),
        _iter_line(iter=1).replace('"start": 1.0', '"start": 1' + "0" * 400),
        _iter_line(iter=2),
    ]
    check = parse_verification(lines)
    assert check is not None
    assert [r.iter for r in check.samples] == [2]
    assert [w.split(":")[0] for w in check.warnings] == ["line 1", "line 2"]


def test_verify_wrong_count_beyond_int64_still_says_wrong() -> None:
    summary = "#verify " + json.dumps(
        {"program": "x", "checked": True, "iterations": 1, "wrong": HUGE}
    )
    check = parse_verification([_iter_line(wrong=HUGE), summary])
    assert check is not None
    assert check.wrong == INT64_MAX and check.samples[0].wrong == INT64_MAX
    assert check.wrong_iterations == (0,)
    assert sum("more than int64 holds" in w for w in check.warnings) == 2


def test_ras_records_nested_too_deeply_or_with_a_huge_time_are_read_past() -> None:
    text = "[" * 100_000 + "]" * 100_000 + '\n{"timestamp": 1' + "0" * 400 + "}\n"
    verdict = ras_verdict(text)
    assert verdict.reports == 1 and verdict.first_problem_at is None


def test_a_file_too_large_from_any_writer_is_the_machine_not_a_bug() -> None:
    refused = OSError(errno.EFBIG, "File too large", "/out/report.html")
    console = Console(file=io.StringIO(), width=250)
    assert report_error(refused, False, console) == ExitCode.USAGE
    assert "File too large: /out/report.html" in console.file.getvalue()  # type: ignore[attr-defined]
    assert report_error(write_failed(Path("/o/x"), refused), False, console) == ExitCode.USAGE


def test_a_5000_digit_size_costs_its_row_only_and_is_quoted_short() -> None:
    row = "9" * 5000 + "  16  float  sum  -1  20.00  0.00  0.00  0  18.69  0.00  0.00  0"
    parsed = parse_text(TABLE.format(pid=1234, row=row))
    assert _sizes(parsed.rows) == {128}
    assert [w for w in parsed.warnings if w.startswith("line 9:")] == [
        "line 9: result row not read: size '999999999999999999999999999999999999..."
        " is out of range (more than int64 holds)"
    ]


def test_json_strings_are_text_utf8_can_hold_with_lone_surrogates_escaped() -> None:
    doc = json_loads(r'{"a\ud800": ["x\udc00y", {"k": "\ud83d\ude00"}]}')
    assert doc == {"a\\ud800": ["x\\udc00y", {"k": "\U0001f600"}]}
    assert json_loads(rb'["\ud800"]') == ["\\ud800"]
    json.dumps(doc, ensure_ascii=False).encode("utf-8")  # writable as UTF-8


def test_a_run_record_with_a_whole_number_beyond_int64_is_refused_named(tmp_path: Path) -> None:
    record = tmp_path / "outcome.json"
    record.write_text(f'{{"outcome": {{"failed_rank": {HUGE}}}}}')
    with pytest.raises(RecordError, match=rf"{record}: .*'{HUGE}' is beyond int64"):
        load_json_record(record)
    record.write_text(f'{{"outcome": {{"failed_rank": {INT64_MAX}}}}}')
    assert load_json_record(record) == {"outcome": {"failed_rank": INT64_MAX}}


def test_a_jsonl_record_line_beyond_int64_is_skipped_and_the_rest_read(tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    good = {"kind": "nccl_warn", "line": 2, "text": "y", "pid": 5}
    lines = [{**good, "line": 1, "pid": HUGE}, good]
    events.write_text("".join(json.dumps(line) + "\n" for line in lines) + "[" * 50_000 + "\n")
    assert [e.line for e in read_jsonl(events, Event, [])] == [2]
