"""`r2bench parse` and `r2bench import` command functions, on the real captures.

This module holds its pure tests; the same subject's other tests:
tests/integration/test_parse_cli.py (those with real processes).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from r2bench.commands.import_logs import import_command
from r2bench.commands.parse import parse_command
from r2bench.runfolder.store import RunStore
from tests.support import paths
from tests.support.captures import DATA, top_level_copy


def parse_json_lines(capsys: pytest.CaptureFixture[str], *names: str) -> list[dict]:
    assert parse_command([DATA / n for n in names], as_json=True) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def row(doc: dict, size: int, placement: str, cycle: int = 0) -> dict:
    [match] = [
        r
        for r in doc["rows"]
        if r["size_bytes"] == size and r["placement"] == placement and r["cycle"] == cycle
    ]
    return match


SWEEP = paths.DATA / "sweeps" / "quickstart-nccl-emulated"
CRASHED = SWEEP / "all_reduce-nccl-emulated-nic1-down-r0-a2fcee58fe"
CLEAN = SWEEP / "all_reduce-nccl-emulated-none-r0-645366c18b"


def _json_docs(capsys: pytest.CaptureFixture[str], *paths: Path) -> list[dict]:
    assert parse_command(list(paths), as_json=True) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_json_lines_one_object_per_file(capsys: pytest.CaptureFixture[str]) -> None:
    docs = parse_json_lines(capsys, "all_reduce_perf.socket.c1.txt", "alltoall_perf.socket.c1.json")
    assert [Path(d["file"]).name for d in docs] == [
        "all_reduce_perf.socket.c1.txt",
        "alltoall_perf.socket.c1.json",
    ]
    for key in ("collective", "nccl_tests_version", "nccl_library", "outcome", "evidence", "rows"):
        assert key in docs[0]


def test_exact_numbers_of_the_socket_all_reduce(capsys: pytest.CaptureFixture[str]) -> None:
    [doc] = parse_json_lines(capsys, "all_reduce_perf.socket.c1.txt")
    assert doc["collective"] == "all_reduce"
    assert doc["nccl_tests_version"] == "2.19.6"
    assert doc["nccl_library"] == "2.28.3"  # as people write it, not 22803
    assert doc["outcome"] == "ok"
    assert len(doc["rows"]) == 24  # 12 sizes x 2 placements
    r = row(doc, 33554432, "in_place")  # "10251.5    3.27    3.27       0"
    assert (r["time_us"], r["algbw_gbps"], r["busbw_gbps"], r["wrong"]) == (10251.5, 3.27, 3.27, 0)
    r = row(doc, 8388608, "out_of_place")  # "2625.33    3.20    3.20       0"
    assert (r["count"], r["type"], r["redop"], r["time_us"]) == (2097152, "float", "sum", 2625.33)
    assert r["busbw_gbps"] == 3.20
    assert row(doc, 32, "out_of_place")["time_us"] == 26.62
    assert doc["avg_busbw_gbps"] == pytest.approx(1.04482)
    assert "timestamp" not in r


def test_na_wrong_column_and_timestamps(capsys: pytest.CaptureFixture[str]) -> None:
    rs, s1 = parse_json_lines(
        capsys, "reduce_scatter_perf.socket.c0.txt", "all_reduce_perf.socket.S1.txt"
    )
    assert row(rs, 32, "in_place")["wrong"] is None  # -c 0: printed as N/A
    assert row(rs, 32, "out_of_place")["time_us"] == 14.88
    assert all(r["timestamp"].startswith("2026-11-22T03:54:") for r in s1["rows"])


def test_killed_run_is_crashed_with_exit_0(capsys: pytest.CaptureFixture[str]) -> None:
    [doc] = parse_json_lines(capsys, "all_reduce_perf.killed.warn.txt")
    assert doc["outcome"] == "crashed"
    assert doc["failed_rank"] == 1
    assert doc["failed_host"] == "vm"
    assert any("signal 9" in e["text"] for e in doc["evidence"])
    assert len(doc["rows"]) == 16  # the cut last row is not a result
    kinds = {e["kind"] for e in doc["events"]}
    assert {"mpi_process_signaled", "socket_error", "test_nccl_failure"} <= kinds


def test_hung_run_is_timeout(capsys: pytest.CaptureFixture[str]) -> None:
    [doc] = parse_json_lines(capsys, "all_reduce_perf.hung.T15.txt")
    assert doc["outcome"] == "timeout"
    assert "15s" in doc["reason"]


def test_per_iteration_counts_from_json(capsys: pytest.CaptureFixture[str]) -> None:
    [doc] = parse_json_lines(capsys, "all_reduce_perf.socket.I1.json")
    assert len(doc["per_iteration"]) == 6  # 3 sizes x 2 placements
    assert all(len(p["times_us"]) == 20 for p in doc["per_iteration"])
    # the JSON is read with the text output that wrote it, as `import` reads them: the rows
    # are the text's (line numbers, timestamps), the iterations the JSON's
    assert doc["read_with"].endswith("all_reduce_perf.socket.I1.txt")
    assert row(doc, 1048576, "out_of_place")["time_us"] == pytest.approx(502.19)


@pytest.mark.parametrize(
    "given",
    [
        ("all_reduce_perf.socket.I1.txt",),
        ("all_reduce_perf.socket.I1.json",),
        ("all_reduce_perf.socket.I1.txt", "all_reduce_perf.socket.I1.json"),
        ("all_reduce_perf.socket.I1.json", "all_reduce_perf.socket.I1.txt"),
    ],
)
def test_a_text_output_and_its_json_twin_are_one_run(
    capsys: pytest.CaptureFixture[str], given: tuple[str, ...]
) -> None:
    [doc] = parse_json_lines(capsys, *given)
    assert Path(doc["file"]).name == given[0]
    assert sum(len(p["times_us"]) for p in doc["per_iteration"]) == 120


def test_launch_failures(capsys: pytest.CaptureFixture[str]) -> None:
    docs = parse_json_lines(capsys, "launch.not_enough_slots.txt", "launch.no_such_binary.txt")
    assert [d["outcome"] for d in docs] == ["launch_failed", "launch_failed"]


def test_unreadable_path_exits_2_with_a_message(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code = parse_command([tmp_path / "missing.txt", DATA / "all_reduce_perf.socket.c1.txt"], True)
    out, err = capsys.readouterr()
    assert code == 2
    assert "cannot read" in err and "missing.txt" in err
    assert len(out.splitlines()) == 1  # the readable file is still parsed
    assert parse_command([tmp_path], False) == 2


def test_human_output_is_a_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert parse_command([DATA / "all_reduce_perf.killed.warn.txt"], as_json=False) == 0
    out = capsys.readouterr().out
    assert "crashed" in out and "16446.8" in out and "signal 9" in out


def test_markup_in_a_log_is_printed_literally(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    log = tmp_path / "x.txt"
    log.write_text("h:1:2 [0] NCCL WARN NET/Socket : [link=x]y[/link] Connection reset by peer\n")
    assert parse_command([log], as_json=False) == 0
    assert "[link=x]y[/link]" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("content", "outcome"),
    [
        (b"", "not_nccl_tests"),
        (b"\x00\xff\xfe" * 1000 + b"\n\x89PNG\r\n", "not_nccl_tests"),
        ((DATA / "all_reduce_perf.socket.c1.txt").read_bytes()[:1234], "incomplete"),
        (b'{"results": [{"size": 8, "out_of_place": {"time": 1', "incomplete"),
        (b"#" * 100_000 + b"\n", "not_nccl_tests"),
        (b'{"a":1}', "not_nccl_tests"),
        (
            Path("/etc/passwd").read_bytes() if Path("/etc/passwd").exists() else b"root:x:0:0",
            "not_nccl_tests",
        ),
    ],
    ids=[
        "empty",
        "binary",
        "truncated-text",
        "truncated-json",
        "overlong-line",
        "json-object",
        "passwd",
    ],
)
def test_bad_inputs_never_crash(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, content: bytes, outcome: str
) -> None:
    path = tmp_path / "input.txt"
    path.write_bytes(content)
    code = 1 if outcome == "not_nccl_tests" else 0
    assert parse_command([path], as_json=True) == code
    doc = json.loads(capsys.readouterr().out)
    assert doc["file"] == str(path) and doc["outcome"] == outcome
    assert parse_command([path], as_json=False) == code


def test_import_dir_makes_a_sweep(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    logs = top_level_copy(tmp_path / "logs")
    assert import_command(logs, "captured", tmp_path) == 0
    out = capsys.readouterr()
    store = RunStore(tmp_path, "captured")
    runs = list(store.complete_runs())
    assert len(runs) == 17  # 20 files, 3 JSON paired with their text, commands.log skipped
    assert "commands.log" in out.err
    killed = [r for r in runs if "killed.warn" in r]
    rec = store.load(killed[0])
    assert rec.end is not None and rec.end.outcome.status.value == "crashed"
    assert rec.provenance["imported_from"].endswith("all_reduce_perf.killed.warn.txt")
    assert rec.spec.collective == "all_reduce" and rec.spec.nodes == ["vm"]
    paired = store.load(next(r for r in runs if "socket.I1" in r))
    assert paired.file("result.json") and paired.file("stdout.txt")
    assert (paired.spec.size_begin, paired.spec.size_end, paired.spec.size_factor) == (
        1048576,
        67108864,
        8,
    )
    assert (tmp_path / "captured" / "tables" / "results.parquet").is_file()
    assert import_command(logs, "captured", tmp_path) == 0  # again: nothing new
    assert "0 imported, 17 already there" in capsys.readouterr().out


def test_import_of_a_missing_folder_exits_2(tmp_path: Path) -> None:
    assert import_command(tmp_path / "nope", None, tmp_path) == 2


def test_escape_sequences_and_markup_in_a_log_never_reach_the_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A log whose evidence line carries a terminal escape (clear screen) and rich markup: the
    human view shows both as text, escaped, and does not crash on `[/x]`."""
    text = (DATA / "all_reduce_perf.socket.c1.txt").read_text()
    hostile = "node0:1:2 [0] NCCL WARN NET/Socket : \x1b[2J\x1b]0;owned\x07 [/x] [bold]gone[/]\n"
    log = tmp_path / "hostile\x1b[31m.txt"
    log.write_text(hostile + text.replace("# Out of bounds", "# cut", 1))
    assert parse_command([log], as_json=False) == 0
    out = capsys.readouterr()
    shown = out.out + out.err
    assert "\x1b" not in shown and "\x07" not in shown
    assert "\\e[31m" in shown  # the file name, escaped


def test_a_run_folders_stdout_and_stderr_are_one_run(capsys: pytest.CaptureFixture[str]) -> None:
    [doc] = _json_docs(capsys, CRASHED / "stdout.txt", CRASHED / "stderr.txt")
    assert doc["run_folder"] is True and Path(doc["file"]) == CRASHED
    assert {"stdout.txt", "stderr.txt", "result.json", "outcome.json"} <= set(doc["files"])
    assert (doc["outcome"], doc["failed_rank"], doc["failed_host"]) == ("crashed", 0, "node0")
    assert doc["outcome_recorded"] is True and doc["exit_code"] == 3
    assert (doc["collective"], doc["collective_from"]) == ("all_reduce", "run_spec")
    assert doc["transport"] == "TCP (emulated)"
    # the 32 MiB iterations completed before the crash, whose row never printed
    big = [p for p in doc["per_iteration"] if p["size_bytes"] == 32 << 20]
    assert [len(p["times_us"]) for p in big] == [8]


def test_the_folder_itself_and_its_files_say_the_same(capsys: pytest.CaptureFixture[str]) -> None:
    [by_folder] = _json_docs(capsys, CRASHED)
    [by_file] = _json_docs(capsys, CRASHED / "stdout.txt")
    assert by_folder == by_file


def test_a_log_outside_a_run_folder_is_still_a_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    copy = tmp_path / "stdout.txt"
    copy.write_bytes((CRASHED / "stdout.txt").read_bytes())
    [doc] = _json_docs(capsys, copy)
    assert "run_folder" not in doc and doc["collective"] is None


def test_what_parse_cannot_tell_is_said_in_words(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    copy = tmp_path / "stdout.txt"
    copy.write_bytes((CLEAN / "stdout.txt").read_bytes())
    assert parse_command([copy], as_json=False) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "?" not in out
    assert "collective: not stated in this file" in out
    assert "nccl-tests: version not printed in this file" in out
    assert out.count("avg busbw") == 1 and "avg busbw: 0.103273 GB/s" in out


def test_an_unknown_rank_is_said_in_words(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The crashed run's stdout alone: its failure line names the host, not the rank."""
    copy = tmp_path / "stdout.txt"
    copy.write_bytes((CRASHED / "stdout.txt").read_bytes())
    [doc] = _json_docs(capsys, copy)
    assert doc["outcome"] == "crashed"
    assert "a rank (its number not logged) on node0" in doc["reason"]
    assert "?" not in doc["reason"]


def test_a_run_folder_prints_each_figure_once(capsys: pytest.CaptureFixture[str]) -> None:
    assert parse_command([CLEAN / "stdout.txt", CLEAN / "stderr.txt"], as_json=False) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert out.count("read as one run:") == 1  # one run, not one per file
    assert out.count("avg busbw") == 1  # the recorded reason names it: no second line
    assert "transport: TCP (emulated)" in out and "?" not in out


def test_a_folder_that_is_no_run_folder_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert parse_command([tmp_path], as_json=False) == 2
    assert "give a file" in capsys.readouterr().err


def test_a_banner_after_a_run_is_no_run(capsys: pytest.CaptureFixture[str]) -> None:
    """rccl-2075-b.txt: one alltoall_perf run's tail, then the banner of a run that printed
    nothing (`======== scatter_perf ====`): one run, as import makes one."""
    assert parse_command([paths.DATA / "public" / "rccl-2075-b.txt"], as_json=True) == 0
    [doc] = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert (doc["outcome"], "run" in doc) == ("ok", False)


def test_iter_lines_are_timed_iterations(capsys: pytest.CaptureFixture[str]) -> None:
    """A verifying workload's `#iter` lines on a plain log count as the tables count them."""
    log = paths.DATA / "verify" / "all_reduce.np2.ok.stdout.txt"
    assert parse_command([log], as_json=True) == 0
    [doc] = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert sum(len(block["times_us"]) for block in doc["per_iteration"]) == 6
