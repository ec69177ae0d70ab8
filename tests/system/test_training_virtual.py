"""A training job under a real link fault on a virtual testbed: `r2bench sweep` of the emulated
training workload (3 namespace nodes x 4 NICs at 250 Mbit/s, one rank each), as the CLI.

Stock NCCL (emulated) dies when node1's nic1 goes down at update 10; R-2CCL (emulated) mode 0
hot-repairs and trains on. Fault free, R-2CCL is bit-identical to the stock baseline (3 ranks: the
order of the sums matters); a run whose gradient is corrupted on purpose at update 7 is not, and
the check names update 7.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from r2bench.tables.build import build_tables
from r2bench.testbeds.virtual.lifecycle import UpResult

pytestmark = [
    pytest.mark.root,
    pytest.mark.slow,
    pytest.mark.needs_mpirun,
    pytest.mark.needs_mpi4py,
]

CLI = [sys.executable, "-c", "from r2bench.cli import main; main()"]
EXPERIMENT = """name: train
libraries:
  stock: {recipe: emulated-nccl, env: {NCCL_IB_TIMEOUT: 16, NCCL_IB_RETRY_CNT: 3}}
  r2ccl: {recipe: emulated-lib, env: {R2CC_MODE: 0, NCCL_R2CC_FAILOVER_TIMEOUT_MS: 500}}
  corrupt: {recipe: emulated-lib, env: {R2CC_MODE: 0, R2B_TRAIN_CORRUPT: "7"}}
benchmark: {recipe: train-emulated}
training: {model: small, updates: 30, batch: 4, seq_len: 32, digest_every: 5, baseline: stock}
scenarios:
  - name: nic1-down
    faults:
      - {kind: link_down, node: node1, nic: nic1, duration_s: 3,
         trigger: {after_s: 0, since: update, update: 10}}
sweep:
  exclude: [{library: corrupt, scenario: nic1-down}]
deadline_s: 90
"""


def test_a_training_job_through_a_dead_nic(three_nodes: UpResult, tmp_path: Path) -> None:
    experiment = tmp_path / "train.yaml"
    experiment.write_text(EXPERIMENT)
    results = tmp_path / "results"
    argv = [*CLI, "sweep", str(experiment), "-t", str(three_nodes.testbed_yaml)]
    proc = subprocess.run(
        [*argv, "--results", str(results), "-q"],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    tables = build_tables(results / "train")
    runs = tables.runs.set_index(["library", "scenario"])
    status = runs["outcome"].to_dict()
    assert status == {
        ("stock", "none"): "ok", ("stock", "nic1-down"): "crashed",
        ("r2ccl", "none"): "ok", ("r2ccl", "nic1-down"): "ok", ("corrupt", "none"): "ok",
    }, runs["reason"].to_dict()  # fmt: skip

    checks = tables.training_checks.set_index(["library", "scenario"])
    fault_free = checks.loc[("r2ccl", "none")]
    assert fault_free["identical"] == True  # noqa: E712 - a pandas boolean
    assert "bit-identical at every update" in fault_free["sentence"]
    corrupt = checks.loc[("corrupt", "none")]
    assert corrupt["identical"] == False  # noqa: E712
    assert corrupt["first_difference_update"] == 7, corrupt["sentence"]
    survived = checks.loc[("r2ccl", "nic1-down")]
    assert survived["hit_update"] in (10, 11, 12), survived[
        "sentence"
    ]  # cut after update 10's line
    assert survived["identical"] == True, survived["sentence"]  # noqa: E712 - up to the hit
    # The failover stall: 500 ms without progress, counted from the channel's last progress,
    # which may come before the cut (seen: 0.83 s against a median of 0.24-0.25 s).
    assert survived["hit_step_s"] > 0.2 + survived["step_s_median_before"], survived["sentence"]

    updates = tables.training.groupby(["library", "scenario"])["update"].max()
    assert updates[("r2ccl", "nic1-down")] == 30
    assert 9 <= updates[("stock", "nic1-down")] <= 12  # died at the cut
    assert isinstance(tables.training, pd.DataFrame)
    assert (results / "train" / "report.html").stat().st_size > 10_000
