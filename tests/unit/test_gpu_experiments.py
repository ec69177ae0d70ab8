"""The GPU experiment files plan on the local 2-GPU testbed, with the launch lines the GPU
procedure (scripts/gpu-check.sh) relies on."""

from __future__ import annotations

from pathlib import Path

import pytest

from r2bench.plan.build import load_inputs, make_plan
from tests.support import paths

ROOT = paths.REPO
TESTBED = ROOT / "experiments" / "testbeds" / "gpu-local.yaml"
# Experiments with a `virtual_testbed:` bring their own namespace testbed (link-fault.yaml's);
# the others run on one host.
LINK_FAULT = ROOT / "experiments" / "gpu" / "link-fault.yaml"
GPU_EXPERIMENTS = sorted((ROOT / "experiments" / "gpu").glob("*.yaml"))
NAMESPACE_EXPERIMENTS = [p for p in GPU_EXPERIMENTS if "\nvirtual_testbed:" in p.read_text()]
EXPERIMENTS = [p for p in GPU_EXPERIMENTS if p not in NAMESPACE_EXPERIMENTS]


def _embedded_plan(experiment: Path, tmp_path: Path):  # type: ignore[no-untyped-def]
    """The plan of an experiment on the namespace testbed a sweep would bring up for it."""
    from r2bench.config.experiment import Experiment
    from r2bench.config.load import load_yaml
    from r2bench.config.validate import validate_model
    from r2bench.sweep.embedded import embedded_description

    wanted = validate_model(Experiment, load_yaml(experiment)).virtual_testbed
    return make_plan(load_inputs(experiment, embedded_description(tmp_path, wanted)))


@pytest.mark.parametrize("experiment", NAMESPACE_EXPERIMENTS, ids=lambda p: p.stem)
def test_namespace_experiment_plans_one_process_per_gpu(experiment: Path, tmp_path: Path) -> None:
    """One mpirun context per node; a collective benchmark drives one GPU a process (`-g 1`),
    as a training job does by its ranks (a node with 2 GPUs runs 2 of them)."""
    plan = _embedded_plan(experiment, tmp_path)
    assert plan.runs
    for run in plan.runs:
        contexts = run.launch.command.split(" : ")
        assert len(contexts) == 2
        assert all("-x NCCL_NVLS_ENABLE=0" in c for c in contexts)
        if run.spec.training is None:
            assert all(" -g 1 " in c for c in contexts)
        else:  # one rank per GPU of the node
            assert f"--map-by ppr:{run.spec.ranks_per_node}:node" in run.launch.command


@pytest.mark.parametrize("experiment", EXPERIMENTS, ids=lambda p: p.stem)
def test_gpu_experiment_plans(experiment: Path) -> None:
    plan = make_plan(load_inputs(experiment, TESTBED))
    assert plan.runs
    for run in plan.runs:
        line = run.launch.command
        assert line.startswith("/usr/bin/mpirun --allow-run-as-root -np 2 -H 127.0.0.1:2")
        assert "-x NCCL_NVLS_ENABLE=0" in line
        if run.spec.training is None:  # nccl-tests' flags; a training job takes its own
            assert " -g 1 " in line and f"-J {run.run_dir}/result.json" in line


def test_fault_free_sweep_covers_modes_paths_and_collectives() -> None:
    plan = make_plan(load_inputs(ROOT / "experiments" / "gpu" / "fault-free.yaml", TESTBED))
    points = {
        (r.spec.env["R2CC_MODE"], r.spec.env["NCCL_P2P_DISABLE"], r.spec.collective)
        for r in plan.runs
    }
    assert len(points) == 4 * 2 * 2 and len(plan.runs) == 16 * 5
    assert {r.spec.size_begin for r in plan.runs} == {8}
    assert {r.spec.size_end for r in plan.runs} == {1 << 30}


def test_link_fault_runs_one_rank_per_namespace_node_on_the_shared_gpu(tmp_path: Path) -> None:
    plan = _embedded_plan(LINK_FAULT, tmp_path)
    assert len(plan.runs) == 72
    for run in plan.runs:
        line = run.launch.command
        contexts = line.split(" : ")
        assert len(contexts) == 2, line
        assert all("-x NCCL_HOSTID=r2benchgpu-node" in c and " -g 1 " in c for c in contexts)
        assert all("-x NCCL_NVLS_ENABLE=0" in c and "CUDA_VISIBLE_DEVICES=0" in c for c in contexts)
        stock = run.spec.library_label == "stock"
        assert ("NCCL_R2CC_FAILOVER_TIMEOUT_MS" in run.spec.env) is not stock
        assert ("R2CC_MODE" in run.spec.env) is not stock
        assert ("R2CC" in run.spec.env["NCCL_DEBUG_SUBSYS"]) is (run.spec.scenario != "none")
