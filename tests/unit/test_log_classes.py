"""Log classes that real outputs of other people show (issue 22), built from a real table:
launcher prefixes, greps of several runs, single-process `-g 8`, collective from the file name,
RCCL provenance, strict `parse --json`, and imports that never count a run twice."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from r2bench.analysis.importer import import_dir, library_of
from r2bench.commands.import_logs import import_command
from r2bench.commands.parse import parse_command
from r2bench.parse.nccltests.collective import collective_from_file_name
from r2bench.parse.nccltests.text import iter_runs, parse_text
from r2bench.runfolder.store import RunStore
from tests.support import paths

DATA = paths.DATA / "nccl-tests"
PUBLIC = paths.DATA / "public"
SOCKET = (DATA / "all_reduce_perf.socket.c1.txt").read_text()


def _prefixed(prefix: str) -> str:
    return "".join(f"{prefix}{line}\n" for line in SOCKET.splitlines())


@pytest.mark.parametrize(
    "prefix",
    [
        "[1,0]<stdout>:",  # mpirun --tag-output
        "Wed Nov 25 13:19:30 2026[1,0]<stdout>:",  # mpirun --timestamp-output --tag-output
        "Wed Nov 25 13:19:30 2026<stdout>:",  # mpirun --timestamp-output
        "0: ",  # srun --label
        "  12: ",
        "gpu-node-07: ",  # pdsh / clush
        "2026-11-25T13:19:30.123Z ",  # a log collector's stamp
        "[2026-11-25 13:19:30] ",
    ],
)
def test_launcher_prefixes_are_stripped(prefix: str) -> None:
    plain = parse_text(SOCKET)
    p = parse_text(_prefixed(prefix))
    assert p.rows == plain.rows and p.devices == plain.devices
    assert p.collective == "all_reduce" and p.concluded and not p.warnings


def test_a_host_prefix_is_kept_only_when_the_file_carries_it() -> None:
    # `HCA-128: Test NCCL failure` is a line of its own, not a pdsh prefix.
    p = parse_text((PUBLIC / "nccl-tests-322.txt").read_text())
    assert len({r.line for r in p.rows}) == 5


def test_header_lines_that_lost_their_hash() -> None:
    bare = "".join(line.lstrip("#") + "\n" for line in SOCKET.splitlines())
    p = parse_text(bare)
    assert p.ranks == 2 and p.n_gpus == 1 and len(p.rows) == 24 and p.concluded


def test_a_grep_of_several_runs_is_several_runs() -> None:
    # `cat run-1node.txt run-2node.txt`: the second run's rows follow the first one's footer.
    one = SOCKET.replace("vm", "nodeA")
    two = SOCKET.replace("vm", "nodeB")
    runs = iter_runs(one + two)
    assert len(runs) == 2 and all(r.cycles == 1 and len(r.rows) == 24 for r in runs)
    assert {d.host for d in runs[1].devices} == {"nodeB"}
    # rows alone (no headers), one block per node count, each ending with its footer
    table = [ln for ln in SOCKET.splitlines() if ln[:1] == " " or "Avg bus" in ln]
    runs = iter_runs("\n".join(table * 3) + "\n")
    assert len(runs) == 3 and all(r.cycles == 1 for r in runs)


def test_a_new_device_list_after_rows_is_a_new_run() -> None:
    lines = SOCKET.splitlines(keepends=True)
    rows = [ln for ln in lines if ln[:1] == " "]
    devices = [ln for ln in lines if "Rank" in ln]
    text = "".join(devices[:1] + rows[:6] + devices + rows[:6])
    runs = iter_runs(text)
    assert [r.ranks for r in runs] == [1, 2] and all(r.cycles == 1 for r in runs)


def test_single_process_driving_eight_gpus_is_one_process() -> None:
    p = parse_text((PUBLIC / "nccl-1530.txt").read_text())
    assert p.ranks == 8 and p.processes == 1 and p.n_gpus == 8


@pytest.mark.parametrize(
    ("name", "collective"),
    [
        ("old_all_reduce.txt", "all_reduce"),
        ("logs/2024-01-05_alltoall.log", "alltoall"),
        ("v2-reduce_scatter_perf.socket.txt", "reduce_scatter"),
        ("allreduce.txt", None),
        ("my_reduce_notes.txt", None),
    ],
)
def test_collective_from_the_file_name(name: str, collective: str | None) -> None:
    assert collective_from_file_name(name) == collective


def test_collective_from_file_name_when_the_text_does_not_say() -> None:
    text = (PUBLIC / "inc-rdma-wrong.txt").read_text()  # sum/-1 at 2 ranks: ambiguous
    assert parse_text(text).collective is None
    p = parse_text(text, file_name="old_all_reduce.txt")
    assert (p.collective, p.collective_from) == ("all_reduce", "file_name")


@pytest.mark.parametrize(
    ("name", "from_"),
    [
        ("nccl-1530.txt", "command_line"),
        ("nccl-tests-5.txt", "command_line"),
        ("rccl-2078.txt", "program_line"),
        ("mooncake-3484.txt", "columns"),
    ],
)
def test_collective_from_says_which_source(name: str, from_: str) -> None:
    assert parse_text((PUBLIC / name).read_text()).collective_from == from_


def test_failure_line_names_the_collective() -> None:
    p = parse_text("NCCL failure all_gather.cu:95 'unhandled cuda error'\n")
    assert (p.collective, p.collective_from) == ("all_gather", "failure_line")


@pytest.mark.parametrize(
    ("name", "family", "ref"),
    [
        ("rocm-systems-3415.txt", "rccl", "2.28.3"),
        ("rocm-systems-3272.txt", "rccl", "2.28.3"),
        ("rccl-1562.txt", "rccl", None),
        ("nccl-1812.txt", "nccl", "2.19.3"),
        ("nccl-tests-78.txt", "nccl", "2.8.4"),
    ],
)
def test_library_family_and_version(name: str, family: str, ref: str | None) -> None:
    p = parse_text((PUBLIC / name).read_text())
    label, lib, basis = library_of(p, {}, [])
    assert (label, lib.ref) == (family, ref) and not basis.startswith("guess")


def test_a_library_nothing_names_is_a_guess() -> None:
    text = "".join(ln + "\n" for ln in SOCKET.splitlines() if "version" not in ln)
    label, lib, basis = library_of(parse_text(text), {}, [])
    assert (label, lib.ref) == ("nccl", None) and basis.startswith("guess")


@pytest.mark.parametrize("bad", ["nan", "inf", "-3.5", "-nan"])
def test_non_measurements_are_flagged_and_json_stays_strict(
    bad: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = SOCKET.replace("   786.82    2.67    2.67", f"   786.82    2.67 {bad:>7}", 1)
    text = text.replace("Avg bus bandwidth    : 1.04482", f"Avg bus bandwidth    : {bad}")
    assert text.count(bad) == 2
    path = tmp_path / "out.txt"
    path.write_text(text)
    assert parse_command([path], as_json=True) == 0
    out = capsys.readouterr().out

    def no_bare_constant(name: str) -> None:
        raise AssertionError(f"parse --json printed a bare {name}")

    docs = [json.loads(line, parse_constant=no_bare_constant) for line in out.splitlines()]
    assert all(doc["avg_busbw_gbps"] is None for doc in docs if "avg_busbw_gbps" in doc)
    assert any("not a measurement" in w for doc in docs for w in doc["warnings"])
    assert all(r["busbw_gbps"] is None or r["busbw_gbps"] >= 0 for doc in docs for r in doc["rows"])


def test_importing_a_folder_into_itself_does_not_double_it(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "run.txt").write_text(SOCKET)
    first = import_dir(logs, logs, "again")
    second = import_dir(logs, logs, "again")
    third = import_dir(logs / "again", logs, "again")  # the sweep folder itself
    assert len(first.imported) == 1
    assert (len(second.imported), len(second.already)) == (0, 1)
    assert third.imported == [] and third.already == []
    assert len(list(RunStore(logs, "again").complete_runs())) == 1


def test_import_says_when_dots_made_scenarios(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "all_reduce_perf.socket.c1.txt").write_text(SOCKET)
    (logs / "plain.txt").write_text(SOCKET)
    assert import_command(logs, "dots", tmp_path) == 0
    out = capsys.readouterr().out
    assert "1 file name(s) with a dot became scenarios" in out and "-> socket.c1" in out
