"""A PyTorch training run as the plan renders it: the run's library and the stub library in
LD_PRELOAD, R2B_EXPECT_NCCL naming the library, the stub build step against that library; and
the experiments that use it plan cleanly."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from r2bench.config.errors import ConfigError
from r2bench.plan.build import load_inputs, make_plan
from r2bench.plan.model import Plan
from tests.support import paths

GPU_LOCAL = paths.REPO / "experiments" / "testbeds" / "gpu-local.yaml"
STUBS = "stubs/libr2bench-nccl-stubs.so"


def _plan(tmp_path: Path, body: str) -> Plan:
    path = tmp_path / "exp.yaml"
    path.write_text(body)
    return make_plan(load_inputs(path, GPU_LOCAL))


def _exports(command: str) -> dict[str, str]:
    words = shlex.split(command)
    return dict(words[i + 1].split("=", 1) for i, word in enumerate(words) if word == "-x")


TRAINING = """\
name: t
libraries:
  stock: {recipe: system}
  vanilla: {recipe: vanilla}
benchmark: {recipe: train-torch}
training: {model: gpt2-tiny, updates: 3, dtype: bf16}
"""


def test_a_training_run_preloads_its_library_then_the_stubs(tmp_path: Path) -> None:
    plan = _plan(tmp_path, TRAINING)
    by_label = {run.spec.library_label: run for run in plan.runs}
    vanilla = _exports(by_label["vanilla"].launch.command)
    library = "/tmp/r2b/work/src/vanilla-v2.23.4-1/build/lib/libnccl.so.2"
    bench = "/tmp/r2b/work/src/train-torch-local+vanilla-v2.23.4-1"
    assert vanilla["LD_PRELOAD"] == f"{library} {bench}/{STUBS}"
    assert vanilla["R2B_EXPECT_NCCL"] == library
    stock = _exports(by_label["stock"].launch.command)
    assert stock["LD_PRELOAD"].split() == [
        "/tmp/r2b/nccl-stock/lib/libnccl.so.2",
        f"/tmp/r2b/work/src/train-torch-local+system-local/{STUBS}",
    ]
    assert stock["R2B_EXPECT_NCCL"] == "/tmp/r2b/nccl-stock/lib/libnccl.so.2"
    argv = shlex.split(by_label["vanilla"].launch.command)
    assert argv[argv.index("env") :][:5] == [
        "env", f"PYTHONPATH={bench}", "python3", "-m", "r2bench.workloads.train_torch",
    ]  # fmt: skip


def test_the_stubs_are_built_against_each_runs_library(tmp_path: Path) -> None:
    steps = {s.directory: s for s in _plan(tmp_path, TRAINING).setup if s.recipe == "train-torch"}
    step = steps["/tmp/r2b/work/src/train-torch-local+vanilla-v2.23.4-1"]
    assert step.build == [
        "cd /tmp/r2b/work/src/train-torch-local+vanilla-v2.23.4-1 && python3 -m "
        "r2bench.setup.stubbuild --consumer-torch --provider "
        "/tmp/r2b/work/src/vanilla-v2.23.4-1/build/lib/libnccl.so.2 --out stubs"
    ]
    assert (
        "/tmp/r2b/nccl-stock/lib/libnccl.so.2"
        in steps["/tmp/r2b/work/src/train-torch-local+system-local"].build[0]
    )


def test_an_experiments_own_preload_is_refused_and_other_benchmarks_preload_nothing(
    tmp_path: Path,
) -> None:
    """The experiment's LD_PRELOAD once won over the library's: a run of "r2ccl" could be
    served by any library (refused now, located: tests/unit/test_reserved_env.py)."""
    with pytest.raises(ConfigError, match=r"env\.LD_PRELOAD: LD_PRELOAD may not be set here"):
        _plan(tmp_path, TRAINING + "env: {LD_PRELOAD: /opt/mine.so}\n")
    plan = _plan(tmp_path, "name: t\nlibraries:\n  stock: {recipe: system}\n")
    exports = _exports(plan.runs[0].launch.command)
    assert "LD_PRELOAD" not in exports and "R2B_EXPECT_NCCL" not in exports


def test_the_gpu_training_experiment_plans_three_libraries_under_three_scenarios() -> None:
    plan = make_plan(load_inputs(paths.REPO / "experiments" / "gpu" / "training.yaml", GPU_LOCAL))
    assert plan.notes == []
    assert {r.spec.library_label for r in plan.runs} == {"stock", "vanilla", "r2ccl-m0"}
    assert {r.spec.scenario for r in plan.runs} == {"none", "rank1-stopped-4s", "rank1-killed"}
    for run in plan.runs:
        exports = _exports(run.launch.command)
        assert exports["R2B_EXPECT_NCCL"] == exports["LD_PRELOAD"].split()[0]
        assert " --model gpt2-6l --updates 60 " in run.launch.command
