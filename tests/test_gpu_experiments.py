"""The GPU experiment files plan on the local 2-GPU testbed, with the launch lines the GPU
procedure (scripts/gpu-check.sh) relies on."""

from __future__ import annotations

from pathlib import Path

import pytest

from r2bench.plan.build import load_inputs, make_plan

ROOT = Path(__file__).parents[1]
TESTBED = ROOT / "experiments" / "testbeds" / "gpu-local.yaml"
EXPERIMENTS = sorted((ROOT / "experiments" / "gpu").glob("*.yaml"))


@pytest.mark.parametrize("experiment", EXPERIMENTS, ids=lambda p: p.stem)
def test_gpu_experiment_plans(experiment: Path) -> None:
    plan = make_plan(load_inputs(experiment, TESTBED))
    assert plan.runs
    for run in plan.runs:
        line = run.launch.command
        assert line.startswith("/usr/bin/mpirun --allow-run-as-root -np 2 -H 127.0.0.1:2")
        assert "-x NCCL_NVLS_ENABLE=0" in line and " -g 1 " in line
        assert f"-J {run.run_dir}/result.json" in line


def test_fault_free_sweep_covers_modes_paths_and_collectives() -> None:
    plan = make_plan(load_inputs(ROOT / "experiments" / "gpu" / "fault-free.yaml", TESTBED))
    points = {
        (r.spec.env["R2CC_MODE"], r.spec.env["NCCL_P2P_DISABLE"], r.spec.collective)
        for r in plan.runs
    }
    assert len(points) == 4 * 2 * 2 and len(plan.runs) == 16 * 5
    assert {r.spec.size_begin for r in plan.runs} == {8}
    assert {r.spec.size_end for r in plan.runs} == {1 << 30}
