"""Recovery strategies under a real link fault on a virtual testbed: `r2bench sweep` of the
emulated training workload (3 namespace nodes x 4 NICs at 250 Mbit/s, one rank each) with the
`recovery` dimension, as the CLI.

Node1's nic1 goes down after update 10 for 5 s. Stock NCCL (emulated) with no strategy dies at
its IB retry timeout (4.3 s); with `restart` its watchdog (2 s) gives up first, the job exits 4,
the sweep launches it again 4 s later and it resumes from its checkpoint of update 10; with
`shrink` the survivors drop node1's rank and finish on 2 ranks. R-2CCL (emulated) fails over in
0.5 s, with or without `in_library`, and never restarts.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from r2bench.runfolder import runformat
from r2bench.runfolder.attempts import AttemptEvent, read_attempts
from r2bench.runfolder.runmodel import RunEnd
from r2bench.tables.build import build_tables
from r2bench.testbeds.virtual.lifecycle import UpResult
from r2bench.workloads.train_format import (
    TrainAbort,
    TrainRecord,
    TrainResume,
    TrainShrink,
    UpdateLine,
    read_line,
)

pytestmark = [
    pytest.mark.root,
    pytest.mark.slow,
    pytest.mark.needs_mpirun,
    pytest.mark.needs_mpi4py,
]

CLI = [sys.executable, "-c", "from r2bench.cli import main; main()"]
EXPERIMENT = """name: recover
libraries:
  stock: {recipe: emulated-nccl, env: {NCCL_IB_TIMEOUT: 18, NCCL_IB_RETRY_CNT: 3}}
  r2ccl: {recipe: emulated-lib, env: {R2CC_MODE: 0, NCCL_R2CC_FAILOVER_TIMEOUT_MS: 500}}
benchmark: {recipe: train-emulated}
training: {model: small, updates: 30, batch: 4, seq_len: 32, digest_every: 5, baseline: stock}
recovery:
  strategies: [none, in_library, restart, shrink]
  watchdog_s: 2
  checkpoint_every: 5
  restart_limit: 2
  restart_delay_s: 4
scenarios:
  - name: nic1-down
    faults:
      - {kind: link_down, node: node1, nic: nic1, duration_s: 5,
         trigger: {after_s: 0, since: update, update: 10}}
sweep:
  matrix: {scenario: [nic1-down]}
  exclude:
    - {library: stock, recovery: in_library}
    - {library: r2ccl, recovery: [restart, shrink]}
deadline_s: 120
"""


def _runs(sweep: Path) -> dict[tuple[str, str], Path]:
    """Each run folder by (library, strategy)."""
    folders = {}
    for spec_file in sweep.glob(f"*/{runformat.SPEC}"):
        spec = json.loads(spec_file.read_text())
        folders[(spec["library_label"], spec["recovery"]["strategy"])] = spec_file.parent
    return folders


def _end(folder: Path) -> RunEnd:
    return RunEnd.model_validate_json((folder / runformat.OUTCOME).read_text())


def _ends(events: list[AttemptEvent]) -> list[int | None]:
    return [e.exit_code for e in events if e.event == "end"]


class Timeline:
    """A run's own account of the fault, read straight from its files: the fault's applied
    time (faults.jsonl) and rank 0's records (stdout), on the host's one clock."""

    def __init__(self, folder: Path) -> None:
        injects = [
            json.loads(line) for line in (folder / runformat.FAULTS).read_text().splitlines()
        ]
        self.fault = next(e["time"] for e in injects if e["action"] == "inject" and e["ok"])
        lines = (folder / runformat.STDOUT).read_text().splitlines()
        self.records: list[TrainRecord] = [r for r in map(read_line, lines) if r is not None]
        updates = [r for r in self.records if isinstance(r, UpdateLine)]
        self.frontier = max(u.update for u in updates if u.end <= self.fault)
        beyond = [u.end for u in updates if u.update > self.frontier and u.end > self.fault]
        self.back_s = min(beyond) - self.fault
        numbers = [u.update for u in updates]
        self.recomputed = len(numbers) - len(set(numbers))

    def first(self, kind: type[TrainRecord]) -> TrainRecord:
        return next(r for r in self.records if isinstance(r, kind))


def _check_costs(runs: dict[tuple[str, str], Path], sweep: Path) -> None:
    """Each strategy's cost metrics against what its run's own files show."""
    cost = build_tables(sweep).recovery_cost.set_index("run_id")
    for key, folder in runs.items():
        if key == ("stock", "none"):
            continue  # it died: no update beyond the frontier to measure against
        row, seen = cost.loc[folder.name], Timeline(folder)
        assert row["fault_at"] == pytest.approx(seen.fault, abs=0.01), key
        assert row["frontier"] == seen.frontier, key
        assert row["back_s"] == pytest.approx(seen.back_s, abs=0.05), key
        assert row["recomputed"] == seen.recomputed, key
    restart, seen = cost.loc[runs[("stock", "restart")].name], Timeline(runs[("stock", "restart")])
    abort, resume = seen.first(TrainAbort), seen.first(TrainResume)
    assert isinstance(abort, TrainAbort) and isinstance(resume, TrainResume)
    assert restart["detect_s"] == pytest.approx(abort.at - seen.fault, abs=0.05)
    assert restart["updates_lost"] == seen.frontier - resume.update
    assert seen.recomputed == seen.frontier - resume.update  # the lost ones, redone once
    assert restart["goodput"] < 0.8 * restart["goodput_fault_free"]  # seconds without progress
    shrink, seen = cost.loc[runs[("stock", "shrink")].name], Timeline(runs[("stock", "shrink")])
    shrunk = seen.first(TrainShrink)
    assert isinstance(shrunk, TrainShrink)
    assert shrink["updates_lost"] == 1
    assert shrink["detect_s"] <= shrunk.at - seen.fault + 0.05
    for strategy in ("none", "in_library"):
        row = cost.loc[runs[("r2ccl", strategy)].name]
        assert row["updates_lost"] == 0 and row["recomputed"] == 0
        assert row["back_s"] < restart["back_s"]  # the failover beats the restart


def test_each_strategy_through_a_dead_nic(three_nodes: UpResult, tmp_path: Path) -> None:
    experiment = tmp_path / "recover.yaml"
    experiment.write_text(EXPERIMENT)
    results = tmp_path / "results"
    argv = [*CLI, "sweep", str(experiment), "-t", str(three_nodes.testbed_yaml)]
    proc = subprocess.run(
        [*argv, "--results", str(results), "-q"],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    runs = _runs(results / "recover")
    assert sorted(runs) == [
        ("r2ccl", "in_library"), ("r2ccl", "none"),
        ("stock", "none"), ("stock", "restart"), ("stock", "shrink"),
    ], proc.stdout + proc.stderr  # fmt: skip
    ends = {key: _end(folder) for key, folder in runs.items()}
    said = {key: f"{end.outcome.status.value}: {end.outcome.reason}" for key, end in ends.items()}
    assert ends[("stock", "none")].outcome.status.value != "ok", said

    restart = runs[("stock", "restart")]
    attempts = read_attempts(restart / runformat.ATTEMPTS)
    assert [e.event for e in attempts] == ["launch", "end", "launch", "end"], attempts
    assert _ends(attempts) == [4, 0], said  # the watchdog's exit, then a whole run
    assert attempts[2].at - attempts[1].at >= 4.0  # the supervisor's delay
    stdout = (restart / runformat.STDOUT).read_text()
    assert "#train-abort" in stdout and "#train-resume" in stdout
    assert ends[("stock", "restart")].outcome.status.value == "ok", said

    shrink = runs[("stock", "shrink")]
    assert _ends(read_attempts(shrink / runformat.ATTEMPTS)) == [0], said
    assert "#train-shrink" in (shrink / runformat.STDOUT).read_text()
    assert ends[("stock", "shrink")].outcome.status.value == "ok", said

    for strategy in ("none", "in_library"):
        folder = runs[("r2ccl", strategy)]
        assert _ends(read_attempts(folder / runformat.ATTEMPTS)) == [0], said
        assert "#train-abort" not in (folder / runformat.STDOUT).read_text()
        assert ends[("r2ccl", strategy)].outcome.status.value == "ok", said

    _check_costs(runs, results / "recover")
