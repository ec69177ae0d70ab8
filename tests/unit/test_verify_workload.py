"""r2bench's verification workload (r2b_verify, docs/verify.md): its captured GPU outputs read
by the unchanged nccl-tests parsers, the `#iter`/`#verify` reader, the self-test's outcome
(wrong_results naming the iteration), the recipe and the GPU experiment's plan.

This module holds its pure tests; the same subject's other tests:
tests/integration/test_verify_workload.py (those with real processes).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from r2bench.analysis.outcome import classify
from r2bench.analysis.parsedrun import parse_run
from r2bench.commands.parse import parse_command
from r2bench.parse.events import parse_events
from r2bench.parse.models import Evidence, Outcome, OutcomeStatus
from r2bench.parse.nccltests.text import ends_complete, parse_text
from r2bench.parse.verify import (
    BASIS,
    parse_verification,
    read_verification,
    verifications,
    with_verification,
)
from r2bench.runfolder import runformat, runmodel
from tests.support import paths

ROOT = paths.REPO
DATA = paths.DATA / "verify"
CORRUPT = DATA / "all_reduce.np2.corrupt3.stdout.txt"
CORRUPT_ERR = DATA / "all_reduce.np2.corrupt3.stderr.txt"
SOURCE = ROOT / "r2bench" / "workloads" / "verify" / "r2b_verify.cu"
# busbw / algbw at 2 ranks, nccl-tests' formulas
BUS_FACTOR = {"all_reduce": 1.0, "all_gather": 0.5, "reduce_scatter": 0.5, "broadcast": 1.0}


def classified(stdout: Path, stderr: Path | None) -> Outcome:
    """The outcome classify gives a captured run (exit status unknown, as `r2bench parse`)."""
    parsed = parse_text(stdout.read_bytes())
    events = list(parse_events(stderr.read_bytes())) if stderr else []
    return classify(None, parsed=parsed, events=events, source="stdout.txt")


# ---- the reader on what a run can leave behind -----------------------------------------------
def _iter_line(it: int, wrong: int | None) -> str:
    doc = {"iter": it, "size": 1024, "start": 10.0 + it, "end": 10.5 + it, "wrong": wrong}
    return "#iter " + json.dumps({**doc, "elements": 256, "ranks": 4})


def _nccl_home() -> Path | None:
    home = os.environ.get("R2B_TEST_NCCL_HOME")
    return Path(home) if home and (Path(home) / "include" / "nccl.h").is_file() else None


# ---- the self-test, captured on 2 H100s ------------------------------------------------------
def test_captured_self_test_is_wrong_results_naming_the_iteration() -> None:
    check = read_verification(CORRUPT)
    assert check is not None and check.complete and check.checked
    assert (check.program, check.ranks, check.iterations) == ("r2b_verify", 2, 15)
    assert check.wrong == 1 and check.wrong_iterations == (3,)
    assert [s.wrong for s in check.samples].count(1) == 1 and check.samples[3].wrong == 1
    # mpirun reports the workload's exit code 2 as a process exit: classify alone says crashed
    before = classified(CORRUPT, CORRUPT_ERR)
    assert before.status is OutcomeStatus.CRASHED
    after = with_verification(before, check)
    assert after is not None and after.status is OutcomeStatus.WRONG_RESULTS
    assert "timed iteration(s) 3 " in after.reason and BASIS in after.reason
    assert after.evidence[0].text.startswith("timed iteration 3 (16777216 B): 1 wrong element")
    assert after.evidence[0].line == check.samples[3].line
    assert not any("mpirun" in e.text for e in after.evidence)  # the exit 2 proves nothing


def test_parse_run_attaches_the_verification(tmp_path: Path) -> None:
    run_dir = tmp_path / "all_reduce-stock-none-r0-0000000000"
    run_dir.mkdir()
    shutil.copy(CORRUPT, run_dir / runformat.STDOUT)
    shutil.copy(CORRUPT_ERR, run_dir / "stderr.txt")
    record = runmodel.RunRecord(
        run_dir.name, run_dir, True, runmodel.SpecFields(collective="all_reduce"), {}, None, []
    )
    run = parse_run(record)
    assert run.verification is not None and run.verification.wrong_iterations == (3,)
    assert run.outcome is not None and run.outcome.status is OutcomeStatus.WRONG_RESULTS
    assert "iteration 3" in run.outcome.evidence[0].text


def test_parse_json_shows_the_verification(capsys: pytest.CaptureFixture[str]) -> None:
    assert parse_command([CORRUPT], as_json=True) == 0
    doc = json.loads(capsys.readouterr().out.splitlines()[0])
    assert doc["outcome"] == "wrong_results" and "iteration(s) 3" in doc["reason"]
    assert doc["verification"]["wrong_iterations"] == [3]
    assert doc["verification"]["basis"] == BASIS and doc["verification"]["complete"] is True
    assert len(doc["verification"]["samples"]) == 15


# ---- fault-free outputs: nccl-tests' parser reads them unchanged ------------------------------
@pytest.mark.parametrize("collective", sorted(BUS_FACTOR))
def test_fault_free_output_reads_as_nccl_tests(collective: str) -> None:
    path = DATA / f"{collective}.np2.ok.stdout.txt"
    parsed = parse_text(path.read_bytes())
    assert parsed.collective == collective and parsed.collective_from == "program_line"
    assert parsed.warnings == [] and ends_complete(parsed) and parsed.ranks == 2
    measured = [r for r in parsed.rows if r.placement == "out_of_place"]
    assert all(r.wrong == 0 for r in measured)
    assert all(r.time_us is None for r in parsed.rows if r.placement == "in_place")
    for row in measured:
        assert row.busbw_gbps == pytest.approx(row.algbw_gbps * BUS_FACTOR[collective], abs=0.02)
    check = read_verification(path)
    assert check is not None and check.proves_lossless and check.collective == collective
    # one #iter line per result row, in order, same size, iterations numbered from 0
    assert [s.iter for s in check.samples] == list(range(len(measured)))
    assert [s.size for s in check.samples] == [r.size_bytes for r in measured]
    assert all(0 < s.end - s.start < 1 and s.check_s for s in check.samples)
    assert with_verification(classified(path, None), check).status is OutcomeStatus.OK  # type: ignore[union-attr]


def test_check_off_proves_nothing() -> None:
    check = read_verification(DATA / "all_reduce.np2.256M.nocheck.stdout.txt")
    assert check is not None and check.complete and not check.checked
    assert check.basis == "" and not check.proves_lossless
    assert all(s.wrong is None and s.check_s is None for s in check.samples)


def test_a_run_cut_short_keeps_what_its_lines_say() -> None:
    lines = [_iter_line(0, 0), _iter_line(1, 5), "#iter {cut sh", _iter_line(2, 0)]
    check = parse_verification(lines)
    assert check is not None and not check.complete and check.ranks == 4
    assert (check.iterations, check.wrong, check.wrong_iterations) == (3, 5, (1,))
    assert check.warnings and "line 3" in check.warnings[0]
    ok = Outcome(status=OutcomeStatus.INCOMPLETE, reason="cut")
    assert with_verification(ok, check).status is OutcomeStatus.WRONG_RESULTS  # type: ignore[union-attr]
    crash = Outcome(status=OutcomeStatus.CRASHED, reason="rank 1 got signal 11")
    kept = with_verification(crash, check)
    assert kept is not None and kept.status is OutcomeStatus.CRASHED
    assert "before that, 5 wrong element(s) in timed iteration(s) 1" in kept.reason
    assert kept.evidence == [
        Evidence(line=2, text="timed iteration 1 (1024 B): 5 wrong element(s) of 256 per rank "
                 "on 4 rank(s)", source="stdout.txt")
    ]  # fmt: skip


def test_outputs_without_the_lines_have_no_verification() -> None:
    nccl_tests = ROOT / "tests" / "data" / "nccl-tests"
    some = next(p for p in sorted(nccl_tests.glob("*.txt")))
    assert read_verification(some) is None and parse_verification(["# nThread 1"]) is None
    outcome = Outcome(status=OutcomeStatus.OK, reason="fine")
    assert with_verification(outcome, None) is outcome


def test_several_runs_of_one_file_each_get_their_own() -> None:
    lines = [_iter_line(0, 0), "#verify " + json.dumps({"wrong": 0, "checked": True}),
             _iter_line(0, 2)]  # fmt: skip
    first, second = verifications(lines, [(1, 2), (3, 3)])
    assert first is not None and first.complete and first.wrong == 0
    assert second is not None and not second.complete and second.wrong_iterations == (0,)


# ---- the recipe and the experiment -------------------------------------------------------------
def test_recipe_builds_the_shipped_source_with_one_nvcc_line() -> None:
    from r2bench.config.recipes import load_recipes

    recipe = load_recipes()["verify"]
    assert recipe.kind.value == "benchmark" and recipe.source is not None
    [step] = recipe.build.steps
    assert (
        step.startswith("{cuda_home}/bin/nvcc ")
        and "r2bench/workloads/verify/r2b_verify.cu" in step
    )
    assert all(k in step for k in ("{gencode}", "{nccl_home}", "{mpi_home}"))
    assert recipe.command == ["{src}/r2b_verify", "--collective", "{collective}"]
    assert SOURCE.is_file() and "R2B_VERIFY_CORRUPT" in SOURCE.read_text()


def test_gpu_experiment_plans_fault_free_fault_and_self_test(tmp_path: Path) -> None:
    from r2bench.config.experiment import Experiment
    from r2bench.config.load import load_yaml
    from r2bench.config.validate import validate_model
    from r2bench.plan.build import load_inputs, make_plan
    from r2bench.sweep.embedded import embedded_description

    path = ROOT / "experiments" / "gpu" / "verify.yaml"
    wanted = validate_model(Experiment, load_yaml(path)).virtual_testbed
    plan = make_plan(load_inputs(path, embedded_description(tmp_path, wanted)))
    kinds = {(r.spec.library_label, r.spec.scenario, r.spec.env.get("R2B_VERIFY_CORRUPT", ""))
             for r in plan.runs}  # fmt: skip
    assert kinds == {
        (lib, scenario, corrupt)
        for lib in ("stock", "r2ccl-m0")
        for scenario, corrupt in (("none", ""), ("nic3-down", ""), ("none", "3"))
    }
    for run in plan.runs:
        assert "/r2b_verify --collective all_reduce -b 16777216 -e 268435456" in run.launch.command
        assert ("-x R2B_VERIFY_CORRUPT=3" in run.launch.command) is (
            run.spec.env.get("R2B_VERIFY_CORRUPT") == "3"
        )


@pytest.mark.skipif(
    shutil.which("nvcc") is None or _nccl_home() is None,
    reason="needs nvcc and R2B_TEST_NCCL_HOME (an NCCL with include/nccl.h)",
)
def test_source_compiles_without_mpi(tmp_path: Path) -> None:
    home = _nccl_home()
    cmd = ["nvcc", "-std=c++17", "-DR2B_NO_MPI", f"-I{home}/include", "-c", str(SOURCE),
           "-o", str(tmp_path / "v.o")]  # fmt: skip
    assert subprocess.run(cmd, capture_output=True, text=True, check=False).returncode == 0
