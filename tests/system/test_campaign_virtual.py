"""A tiny fault campaign for real on the virtual testbed: a seeded drawn trigger, two trials,
predictions registered. The same seed swept twice draws and applies the same schedule; another
seed another; every trial records its draw; the predictions file's SHA-256 is recorded before
the first run and scored in the report; the runs table carries the verdicts.

Three sweeps of 3 runs each (the fault-free run and two trials), a few seconds a run: 100
iterations a size keep the job running well past the latest draw (0.6 s after the first
result) on the uncapped 2 x 2 NIC testbed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from r2bench.config.predictions import sha256_of
from r2bench.runfolder.predictions import RECORD
from r2bench.tables.build import build_tables
from r2bench.testbeds.virtual.lifecycle import UpResult

pytestmark = [
    pytest.mark.root,
    pytest.mark.slow,
    pytest.mark.needs_mpirun,
    pytest.mark.needs_mpi4py,
]

CLI = [sys.executable, "-c", "from r2bench.cli import main; main()"]

EXPERIMENT = """name: {name}
libraries: {{r2ccl-m0: {{recipe: emulated-lib, env: {{R2CC_MODE: 0}}}}}}
benchmark: {{recipe: emulated}}
sizes: {{begin: 1M, end: 4M, factor: 4}}
options: {{iterations: 100, warmup: 1, timeout_s: 30}}
env: {{NCCL_R2CC_FAILOVER_TIMEOUT_MS: 300, NCCL_DEBUG: INFO}}
scenarios:
  - name: nic1-cut
    trials: 2
    seed: {seed}
    faults:
      - kind: link_down
        node: node1
        nic: nic1
        trigger: {{after_s: 0.1, within_s: 0.5, since: first_result}}
        duration_s: 0.5
predictions: predictions.yaml
deadline_s: 30
"""

PREDICTIONS = """experiment: {name}
predictions:
  - match: {{library: r2ccl-m0, scenario: nic1-cut}}
    expect: TRANSPARENT
"""


def _sweep(tmp: Path, testbed: Path, name: str, seed: int) -> Path:
    folder = tmp / name
    folder.mkdir()
    (folder / "exp.yaml").write_text(EXPERIMENT.format(name=name, seed=seed))
    (folder / "predictions.yaml").write_text(PREDICTIONS.format(name=name))
    results = folder / "results"
    done = subprocess.run(
        [*CLI, "sweep", str(folder / "exp.yaml"), "-t", str(testbed), "--results", str(results)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return results / name


def _draws(sweep: Path) -> dict[int, float]:
    """trial -> the time its fault drew (from each run's spec.json)."""
    out = {}
    for spec_file in sweep.glob("*/spec.json"):
        campaign = json.loads(spec_file.read_text()).get("campaign")
        if campaign:
            out[campaign["trial"]] = campaign["draws"][0]["after_s"]
    return out


def _applied_after_first_result(sweep: Path) -> dict[int, float]:
    """trial -> seconds from the first result line to the inject, as the sweep applied it."""
    runs = build_tables(sweep).runs
    faulted = runs[runs["trial"].notna()]
    return {
        int(r["trial"]): float(r["fault_applied_at"] - r["first_result_at"])
        for r in faulted.to_dict("records")
    }


def test_a_seeded_campaign_draws_the_same_schedule_twice(
    virtual_testbed: UpResult, tmp_path: Path
) -> None:
    testbed = virtual_testbed.testbed_yaml
    first = _sweep(tmp_path, testbed, "camp-a", seed=11)
    again = _sweep(tmp_path, testbed, "camp-b", seed=11)
    other = _sweep(tmp_path, testbed, "camp-c", seed=12)

    assert set(_draws(first)) == {0, 1}
    assert _draws(first) == _draws(again)
    assert _draws(first) != _draws(other)
    assert all(0.1 <= t <= 0.6 for t in _draws(first).values())
    # The sweep applied each trial at its draw (the first result line's arrival to the inject,
    # within the controller's scheduling slack).
    for trial, applied in _applied_after_first_result(first).items():
        assert applied == pytest.approx(_draws(first)[trial], abs=0.25)

    runs = build_tables(first).runs
    faulted = runs[runs["scenario"] == "nic1-cut"]
    assert set(faulted["verdict"]) <= {"TRANSPARENT", "DECLINED", "HUNG", "MISSED", "OTHER"}
    assert set(runs[runs["scenario"] == "none"]["verdict"]) == {"NO_FAULT"}
    assert set(faulted["told"]) == {"blind"}

    record = json.loads((first / RECORD).read_text())
    registered = (tmp_path / "camp-a" / "predictions.yaml").read_bytes()
    assert record["sha256"] == sha256_of(registered)
    report = (first / "report.html").read_text()
    assert "Fault campaign" in report and record["sha256"] in report
    assert "scored runs as predicted" in report
