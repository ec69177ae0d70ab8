"""Which library a log is from, told by its own lines: NCCL, R-2CCL (whatever version it
reports), RCCL; `parse --json` prints the family."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from r2bench.commands.parse import parse_command
from r2bench.parse.events import read_events
from r2bench.parse.library import (
    LibraryEvidence,
    LibraryIdentity,
    identify_library,
    library_of_line,
    r2cc_mode,
)
from r2bench.parse.models import ParsedNcclTests
from r2bench.parse.nccltests.jsonfile import parse_json
from r2bench.parse.nccltests.text import parse_text
from tests.support import paths

DATA = paths.DATA
PUBLIC = DATA / "public"
R2CCL = DATA / "r2ccl" / "runs"


# ------------------------------------------------------------------ the library family


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


# ------------------------------------------------------------------ the library a run is filed under


def test_r2cc_lines_prove_r2ccl() -> None:
    text = (R2CCL / "r2ccl-m0-socket-all_reduce.txt").read_text()
    identity = identify_library(parse_text(text), {}, read_events(text))
    assert (identity.recipe, identity.shown, identity.version) == (
        "r2ccl",
        "r2ccl",
        "2.23.4+cuda13.0",
    )
    assert identity.basis == "R2CC log lines"


def test_r2cc_variables_alone_are_a_guess_and_name_no_library() -> None:
    parsed = parse_json((R2CCL / "r2ccl-m0-socket-all_reduce.json").read_bytes())
    identity = identify_library(parsed, {"R2CC_MODE": "0"}, [])
    assert (identity.recipe, identity.proven, identity.shown) == ("r2ccl", False, None)
    assert identity.basis.startswith("guess: ")


def test_a_json_naming_nccls_version_is_nccl() -> None:
    parsed = parse_json((R2CCL / "stock-socket-all_reduce.json").read_bytes())
    identity = identify_library(parsed, {}, [])
    assert (identity.shown, identity.version) == ("nccl", "2.28.9")


def test_nothing_said_is_a_guess() -> None:
    identity = identify_library(ParsedNcclTests(), {}, [])
    assert identity == LibraryIdentity(
        "nccl", None, "guess: no library version or R2CC line in the output"
    )
    assert identity.shown is None


@pytest.mark.parametrize(
    ("env", "mode"), [({}, None), ({"R2CC_MODE": "2"}, "2"), ({"R2CC_MODE": 3}, "3")]
)
def test_r2cc_mode_is_the_settings_text(env: dict[str, object], mode: str | None) -> None:
    assert r2cc_mode(env) == mode


def _docs(capsys: pytest.CaptureFixture[str], path: Path) -> list[dict]:
    parse_command([path], as_json=True)
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_parse_files_an_artifact_run_under_r2ccl_with_its_harness_mode(
    capsys: pytest.CaptureFixture[str],
) -> None:
    docs = _docs(capsys, DATA / "r7525" / "logs" / "07.nccl_tests_r2cc_allreduce_k_sweep.log")
    assert {d["library"] for d in docs} == {"r2ccl"}
    assert {d["library_family"] for d in docs} == {"nccl"}  # what the lines state
    assert [d["mode"] for d in docs] == ["0", "2", "3", "3", "3", "3", "3", "0", "2"]


def test_parse_files_the_hot_repair_program_under_r2ccl(
    capsys: pytest.CaptureFixture[str],
) -> None:
    [doc] = _docs(capsys, DATA / "r7525" / "logs" / "01.hot_repair_to_balance.log")
    assert (doc["library"], doc["mode"]) == ("r2ccl", None)
    assert "R-2CCL" in doc["library_basis"]


def test_a_json_envs_mode_is_the_runs_and_judges_it(capsys: pytest.CaptureFixture[str]) -> None:
    """R2CC_FAILED_HCA under mode 0 fails nothing: the outcome says so, as import's does."""
    [doc] = _docs(capsys, R2CCL / "r2ccl-m0-socket-hca0-all_reduce.json")
    assert (doc["library"], doc["mode"], doc["outcome"]) == (None, "0", "fault_not_injected")
