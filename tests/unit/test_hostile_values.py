"""A bad value costs its row, never the run, the sweep or a later command; a log r2bench
cannot take whole is named in one line. The inputs are made here (nccl-tests text and `-J`
files of a complete all_reduce run, then spoiled one value at a time)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from r2bench.analysis.importer import import_dir
from r2bench.analysis.parseview import read_path
from r2bench.parse.nccltests.jsonfile import parse_json
from r2bench.parse.nccltests.text import parse_text
from tests.support.cli_runner import invoke_as_main
from tests.unit.test_text_input import SIZES, log, row

TIME = 1048576 / 2.83e3


def _result(size: int, **out_of_place: Any) -> dict[str, Any]:
    t = size / 2.83e3
    good = {"time": t, "alg_bw": 2.83, "bus_bw": 2.83, "nwrong": 0}
    return {
        "size": size,
        "count": size // 4,
        "type": "float",
        "redop": "sum",
        "root": -1,
        "out_of_place": {**good, **out_of_place},
        "in_place": dict(good),
    }


def _json(*results: dict[str, Any], **top: Any) -> str:
    doc = {
        "args": ["/x/all_reduce_perf"],
        "config": {"nthreads": 1, "ngpus": 1, "devices": []},
        "end_time": "2026-11-27 10:00:00",
        "results": list(results),
        **top,
    }
    return json.dumps(doc)


def _read(tmp_path: Path, text: str, name: str = "all_reduce_perf.json") -> Any:
    path = tmp_path / name
    path.write_text(text)
    (run,) = read_path(path).runs
    return run


def test_json_wrong_count_written_as_a_string_is_counted(tmp_path: Path) -> None:
    run = _read(tmp_path, _json(_result(1048576, nwrong="3"), _result(2097152)))
    assert run.outcome.status.value == "wrong_results"
    wrong = {(r.size_bytes, r.placement): r.wrong for r in run.parsed.rows}
    assert wrong[(1048576, "out_of_place")] == 3


def test_json_measurements_written_as_strings_are_read() -> None:
    parsed = parse_json(_json(_result(1048576, time=f"{TIME:.2f}", alg_bw="2.83", bus_bw="2.83")))
    (out,) = [r for r in parsed.rows if r.placement == "out_of_place"]
    assert (out.time_us, out.algbw_gbps, out.busbw_gbps) == (round(TIME, 2), 2.83, 2.83)


@pytest.mark.parametrize(("key", "value"), [("nwrong", "three"), ("bus_bw", "fast"), ("time", [1])])
def test_json_string_that_is_no_number_is_refused_located(key: str, value: object) -> None:
    parsed = parse_json(_json(_result(1048576, **{key: value}), _result(2097152)))
    assert {r.size_bytes for r in parsed.rows} == {2097152}
    assert any(w.startswith("results[0]") and key in w for w in parsed.warnings), parsed.warnings


def _text_row(size: int, busbw: float, algbw: float = 2.83) -> str:
    t = size / 2.83e3
    return (
        f"     {size}       {size // 4}     float     sum      -1   {t:.2f}    {algbw:.2f}"
        f"    {busbw:.2f}       0   {t:.2f}    2.83    2.83       0\n"
    )


@pytest.mark.parametrize(("busbw", "algbw"), [(9999.0, 2.83), (9999.0, 9999.0)])
def test_json_refuses_the_bandwidths_the_text_refuses(busbw: float, algbw: float) -> None:
    text = log().replace(row(1048576), _text_row(1048576, busbw, algbw))
    from_text = parse_text(text)
    from_json = parse_json(
        _json(_result(1048576, bus_bw=busbw, alg_bw=algbw), _result(2097152), _result(4194304))
    )
    assert 1048576 not in {r.size_bytes for r in from_text.rows}
    assert {r.size_bytes for r in from_json.rows} == {2097152, 4194304}
    assert any("results[0]" in w and "do not fit" in w for w in from_json.warnings)


def test_json_negative_size_is_refused_located() -> None:
    parsed = parse_json(_json(_result(-1048576), _result(2097152)))
    assert {r.size_bytes for r in parsed.rows} == {2097152}
    assert any("results[0]" in w and "size" in w for w in parsed.warnings)


@pytest.mark.parametrize("count", ["1e400", "Infinity", "-Infinity", "NaN"])
def test_parse_of_a_json_count_beyond_any_number_exits_0(tmp_path: Path, count: str) -> None:
    path = tmp_path / "all_reduce_perf.json"
    text = _json(_result(1048576), _result(2097152)).replace('"count": 262144', f'"count": {count}')
    path.write_text(text)
    ran = invoke_as_main("parse", "--json", str(path))
    assert ran.exit_code == 0, ran.output
    (doc,) = [json.loads(line) for line in ran.output.splitlines() if line.startswith("{")]
    assert {r["size_bytes"] for r in doc["rows"]} == {2097152}
    assert any("count" in w for w in doc["warnings"])


def test_a_5000_digit_size_costs_its_row_and_later_rows_are_read() -> None:
    text = log().replace(row(2097152), row(2097152).replace("2097152", "9" * 5000, 1))
    parsed = parse_text(text)
    assert {r.size_bytes for r in parsed.rows} == {1048576, 4194304}
    assert parsed.footer


def test_nccl_prefix_pid_of_10_to_23_keeps_the_event(tmp_path: Path) -> None:
    pid = 10**23
    warn = f"vm:{pid}:12 [0] misc/socket.cc:46 NCCL WARN NET/Socket : Connection reset by peer\n"
    path = tmp_path / "all_reduce_perf.txt"
    path.write_text(log(between=warn))
    (run,) = read_path(path).runs
    (event,) = [e for e in run.events if "reset" in e.message]
    assert event.pid is None and "pid_refused" in event.details


def _import(tmp_path: Path, files: dict[str, str | bytes]) -> Any:
    logs = tmp_path / "logs"
    logs.mkdir()
    for name, data in files.items():
        target = logs / os.fsdecode(name.encode("utf-8", "surrogateescape"))
        target.write_bytes(data if isinstance(data, bytes) else data.encode())
    return import_dir(logs, tmp_path / "results", "s")


def test_import_of_values_beyond_int64_then_report(tmp_path: Path) -> None:
    wrong_row = row(2097152).split()
    wrong_row[8] = str(10**23)
    huge = _result(2**64)
    files = {
        "all_reduce_perf.size.txt": log().replace(
            row(2097152), row(2097152).replace("2097152", str(2**64), 1)
        ),
        "all_reduce_perf.wrong.txt": log().replace(row(2097152), "  ".join(wrong_row) + "\n"),
        "all_reduce_perf.j.json": _json(_result(1048576, nwrong=10**23), huge, _result(2097152)),
    }
    report = _import(tmp_path, files)
    assert len(report.imported) == 3, report.skipped
    ran = invoke_as_main("report", str(report.sweep_dir))
    assert ran.exit_code == 0, ran.output
    assert "Traceback" not in ran.output


def test_import_beyond_planning_limits_is_one_line(tmp_path: Path) -> None:
    report = _import(
        tmp_path, {"all_reduce_perf.txt": log().replace("iters: 20", "iters: 2000000")}
    )
    ((source, why),) = report.skipped
    assert source.endswith("all_reduce_perf.txt")
    assert "\n" not in why and "iterations 2000000" in why and "1000000" in why
    assert "pydantic" not in why


def test_import_of_a_non_utf8_file_name_and_a_lone_surrogate_env(tmp_path: Path) -> None:
    env = _json(_result(1048576), env=["NCCL_ALGO=a\ud800b"])
    report = _import(
        tmp_path,
        {"all_reduce_perf.n\udcff.txt": log(), "all_reduce_perf.s.json": env},
    )
    assert len(report.imported) == 2, report.skipped
    folders = [p for p in report.sweep_dir.iterdir() if p.is_dir() and p.name != "tables"]
    assert len(folders) == 2
    assert all((folder / "COMPLETE").is_file() for folder in folders)


def test_import_keeps_a_json_of_another_run_apart(tmp_path: Path) -> None:
    other = _json(*(_result(s * 1024) for s in SIZES))
    report = _import(tmp_path, {"all_reduce_perf.txt": log(), "all_reduce_perf.json": other})
    assert len(report.imported) == 2, report.skipped
    logs = tmp_path / "logs"
    runs = read_path(logs / "all_reduce_perf.txt", logs / "all_reduce_perf.json").runs
    assert [r.alone for r in runs] == [False, True]
    assert any("another run" in w for w in runs[0].parsed.warnings)
    assert {r.size_bytes for r in runs[1].parsed.rows} == {s * 1024 for s in SIZES}


def test_json_twin_of_the_same_run_is_still_combined(tmp_path: Path) -> None:
    twin = _json(*(_result(s) for s in SIZES))
    (tmp_path / "all_reduce_perf.json").write_text(twin)
    (tmp_path / "all_reduce_perf.txt").write_text(log())
    (run,) = read_path(tmp_path / "all_reduce_perf.txt", tmp_path / "all_reduce_perf.json").runs
    assert run.json is not None
    assert not any("another run" in w for w in run.parsed.warnings)


def test_import_of_a_deeply_nested_twin_imports_the_text(tmp_path: Path) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    report = _import(tmp_path, {"all_reduce_perf.txt": log(), "all_reduce_perf.json": deep})
    assert len(report.imported) == 1
    ((_, why),) = report.skipped
    assert why.startswith("all_reduce_perf.json: the -J file of this output is nested too deeply")
    logs = tmp_path / "logs"
    (run,) = read_path(logs / "all_reduce_perf.txt", logs / "all_reduce_perf.json").runs
    assert any("nested too deeply" in w for w in run.parsed.warnings)
