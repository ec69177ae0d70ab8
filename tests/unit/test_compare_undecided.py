"""What `compare` says when it cannot tell: identical samples are `same` however few they are,
a cell with too few samples or too much noise is `undecided` (never a regression), and whether
undecided cells fail the gate is the policy's `undecided:` (default `fail`), named together with
how to get a decision (more repeats) in the first lines of the output.

The quickstart sweep as it ran (tests/data/quickstart-sweep: one repeat, 8 iterations a cell,
a crashed run with one result row, one recovery sample a series) is what a new user compares
first."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from r2bench.compare.policy import Policy, UndecidedGate, load_policy
from r2bench.compare.samples import SweepData, load_sweep
from r2bench.compare.stats import Undecided, Verdict
from r2bench.compare.verdict import Gate, compare_sweeps
from tests.support import paths
from tests.support.cli_runner import invoke_as_main
from tests.support.sample_sweep import SampleConfig, write_sample_sweep

DATA = paths.DATA
QUICKSTART = DATA / "quickstart-sweep"
SHORT = {"modes": (None, "1"), "scenarios": ("none",), "repeats": 1, "sizes": 3, "iterations": 2}


@pytest.fixture(scope="module")
def quickstart(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the quickstart sweep (building tables writes beside the runs)."""
    target = tmp_path_factory.mktemp("qs") / "quickstart"
    shutil.copytree(QUICKSTART, target, ignore=shutil.ignore_patterns("README.md"))
    return target


@pytest.fixture(scope="module")
def short_sweeps(tmp_path_factory: pytest.TempPathFactory) -> tuple[SweepData, SweepData]:
    """Two sweeps of the same code with 2 samples a cell (fewer than min_samples)."""
    root = tmp_path_factory.mktemp("short")
    for name, seed in (("a", 1), ("b", 2)):
        write_sample_sweep(root, DATA / "nccl-tests", SampleConfig(sweep=name, seed=seed, **SHORT))  # type: ignore[arg-type]
    return load_sweep(root / "a"), load_sweep(root / "b")


def test_the_quickstart_sweep_compared_with_itself_passes(quickstart: Path) -> None:
    ran = invoke_as_main("compare", str(quickstart), str(quickstart), env={"COLUMNS": "80"})
    assert ran.exit_code == 0, ran.output
    assert ran.output.splitlines()[0].startswith("PASSED")
    result = compare_sweeps(load_sweep(quickstart), load_sweep(quickstart), Policy())
    assert result.rows and {r.verdict for r in result.rows} == {Verdict.SAME}
    # one result row of the crashed run, one recovery sample a series: identical, so `same`
    few = [
        r for r in result.rows if r.metric != "outcome" and 0 < r.n_baseline < Policy().min_samples
    ]
    assert few and all(r.note == "identical samples" for r in few)


def test_too_few_samples_are_undecided_and_name_the_cause(
    short_sweeps: tuple[SweepData, SweepData],
) -> None:
    result = compare_sweeps(*short_sweeps, Policy())
    metric_rows = [r for r in result.rows if r.metric != "outcome"]
    assert metric_rows and {r.verdict for r in metric_rows} == {Verdict.UNDECIDED}
    assert {r.undecided for r in metric_rows} == {Undecided.TOO_FEW_SAMPLES}
    assert result.regressions == [] and result.exit_code == 1


def test_noisy_cells_are_undecided_as_too_noisy(
    short_sweeps: tuple[SweepData, SweepData],
) -> None:
    result = compare_sweeps(*short_sweeps, Policy(min_samples=2))
    noisy = [r for r in result.rows if r.verdict is Verdict.UNDECIDED]
    assert noisy and {r.undecided for r in noisy} == {Undecided.TOO_NOISY}


def test_the_policy_decides_whether_undecided_cells_fail_the_gate(
    short_sweeps: tuple[SweepData, SweepData], tmp_path: Path
) -> None:
    assert Policy().undecided is UndecidedGate.FAIL
    policy_file = tmp_path / "p.yaml"
    policy_file.write_text("undecided: pass\n")
    lenient = load_policy(policy_file)
    assert lenient.undecided is UndecidedGate.PASS
    assert compare_sweeps(*short_sweeps, lenient).exit_code == 0
    strict = compare_sweeps(*short_sweeps, Policy())
    assert strict.exit_code == 1
    # --allow-undecided widens the policy's gate, never narrows it
    assert strict.gate.widened(Gate(allow_undecided=True)).blocks(Verdict.UNDECIDED) is False
    policy_file.write_text("undecided: maybe\n")
    with pytest.raises(ValueError, match="undecided"):
        load_policy(policy_file)


def test_a_gate_that_could_not_decide_says_so_first_and_how_to_decide(tmp_path: Path) -> None:
    for name, seed in (("a", 1), ("b", 2)):
        write_sample_sweep(
            tmp_path, DATA / "nccl-tests", SampleConfig(sweep=name, seed=seed, **SHORT)
        )  # type: ignore[arg-type]
    ran = invoke_as_main("compare", str(tmp_path / "a"), str(tmp_path / "b"), env={"COLUMNS": "80"})
    assert ran.exit_code == 1, ran.output
    head = "\n".join(ran.output.splitlines()[:6])
    assert head.startswith("NOT PASSED: could not decide")
    assert "no regression" in head
    assert "too few samples" in head and "repeats" in head
    assert "undecided: pass" in head and "--allow-undecided" in head
