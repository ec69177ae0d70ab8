"""The virtual CI sweep (experiments/ci/virtual.yaml) run twice on the same code: `compare`
finds no regression between the two, nor against the stored reference."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from r2bench.analysis.evidence import IDLE_BYTES
from r2bench.compare.policy import load_policy
from r2bench.compare.reference import load_reference
from r2bench.compare.samples import load_sweep
from r2bench.compare.stats import Verdict
from r2bench.compare.verdict import compare_reference, compare_sweeps
from tests.support import paths

pytestmark = [
    pytest.mark.root,
    pytest.mark.slow,
    pytest.mark.needs_mpirun,
    pytest.mark.needs_mpi4py,
]

ROOT = paths.REPO
EXPERIMENT = ROOT / "experiments/ci/virtual.yaml"
POLICY = ROOT / "results/baselines/ci-virtual.policy.yaml"
REFERENCE = ROOT / "results/baselines/ci-virtual.yaml"
CLI = [sys.executable, "-c", "from r2bench.cli import main; main()"]


def _sweep(results: Path) -> Path:
    proc = subprocess.run(
        [*CLI, "sweep", str(EXPERIMENT), "--results", str(results), "-q"],
        capture_output=True, text=True, timeout=600, check=False, cwd=results.parent,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return results / "ci-virtual"


def test_ci_sweep_twice_no_false_regression(tmp_path: Path) -> None:
    first, second = _sweep(tmp_path / "a"), _sweep(tmp_path / "b")
    policy = load_policy(POLICY)
    a, b = load_sweep(first), load_sweep(second)
    result = compare_sweeps(a, b, policy)
    assert result.matched_cells == 16 and result.matched_series == 4
    assert result.regressions == [], [(r.key, r.metric, r.change) for r in result.regressions]
    assert not [r for r in result.rows if r.verdict in (Verdict.MISSING, Verdict.NEW)]
    for sweep in (a, b):
        against = compare_reference(load_reference(REFERENCE), sweep, policy)
        assert against.matched_cells == 16
        assert against.regressions == [], [(r.key, r.metric) for r in against.regressions]
    # every run sampled its NICs, and the faulted ones show the failed NIC idle
    counters = a.tables.counters
    assert set(counters["node"]) == {"node0", "node1"} and counters["nic"].nunique() == 4
    # every cut of nic1 (it carries traffic in modes 1 and 2) has its evidence from the counters
    windows = a.tables.windows
    assert len(windows) == 6 and set(windows["verdict"]) <= {"hit", "between_collectives"}
    # idle as the evidence defines it: under IDLE_BYTES (a loaded controller's sampler has left
    # ~100 KB in the first samples after a cut; a collective moves far more)
    assert (windows["before_bytes"] > IDLE_BYTES).all()
    assert (windows["after_bytes"] < IDLE_BYTES).all()
    faulted = a.tables.runs[a.tables.runs["scenario"] == "nic1-down"]
    assert faulted["evidence"].str.startswith("node1/nic1 link_down: ").all()
    proc = subprocess.run(
        [*CLI, "compare", str(first), str(second), "--policy", str(POLICY), "--allow-undecided"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:]
