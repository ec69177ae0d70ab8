"""Upstream's CloudLab r7525 tests as r2bench plans them: upstream's mpirun environment, ranks on
the GPU nodes only, the cut on node-1's BlueField, upstream's run order, and no false warning.

The generated commands of every run are held in tests/data/r7525/commands.txt; after a deliberate
change, rewrite it with `R2B_WRITE_COMMANDS=1 python3 -m pytest tests/unit/test_r7525_plan.py`.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import pytest

from r2bench.plan.build import load_inputs, make_plan
from r2bench.plan.model import Plan
from tests.support import paths

ROOT = paths.REPO
TESTBED = ROOT / "experiments" / "testbeds" / "cloudlab-r7525.yaml"
EXPERIMENTS = sorted((ROOT / "experiments" / "r7525").glob("*.yaml"))
HELD = paths.DATA / "r7525" / "commands.txt"

UPSTREAM_ENV = {  # common.sh's MPIRUN_BASE
    "NCCL_IB_HCA": "mlx5_0,mlx5_2,mlx5_3",
    "NCCL_IB_GID_INDEX": "3",
    "NCCL_IB_MERGE_NICS": "0",
    "NCCL_ALGO": "Ring",
    "NCCL_NET_GDR_LEVEL": "SYS",
    "NCCL_TOPO_FILE": "/mydata/topo.xml",
    "NCCL_SOCKET_IFNAME": "eno33np0",
}
CUT_ENV = {  # run_hot_repair.sh, for the cuts
    "NCCL_R2CC_FAILOVER_TIMEOUT_MS": "5000",
    "NCCL_IB_TIMEOUT": "16",
    "NCCL_IB_RETRY_CNT": "1",
}


def _plan(experiment: Path) -> Plan:
    return make_plan(load_inputs(experiment, TESTBED))


def _exports(command: str) -> dict[str, str]:
    words = shlex.split(command)
    pairs = [words[i + 1] for i, word in enumerate(words) if word == "-x"]
    return dict(pair.split("=", 1) for pair in pairs)


def _by_name(stem: str) -> Path:
    return next(path for path in EXPERIMENTS if path.name.startswith(stem))


def test_there_are_upstreams_eight_runnable_tests() -> None:
    assert [p.name[:2] for p in EXPERIMENTS] == ["01", "02", "03", "04", "05", "06", "07", "09"]
    plans = sorted(p.name for p in (ROOT / "experiments" / "r7525").glob("*.plan.md"))
    assert [p[:2] for p in plans] == ["08"]


@pytest.mark.parametrize("experiment", EXPERIMENTS, ids=lambda p: p.name[:2])
def test_upstreams_environment_on_six_ranks_and_no_warning(experiment: Path) -> None:
    plan = _plan(experiment)
    assert [n for n in plan.notes if "warning" in n or "note:" in n] == []
    for run in plan.runs:
        words = shlex.split(run.launch.command)
        assert run.launch.node == "node-1" and words[:3] == ["mpirun", "-np", "6"]
        assert words[4].count(":2") == 3 and "192.168.100.2" not in words[4]
        assert "btl_tcp_if_include" in words and "eno33np0" in words
        exports = _exports(run.launch.command)
        assert {k: exports.get(k) for k in UPSTREAM_ENV} == UPSTREAM_ENV
        if run.spec.library.recipe == "r2ccl":
            assert run.spec.library.ref == "main"
            if run.spec.training is not None:  # 09: the library is not told which NIC fails
                assert not [k for k in exports if k.startswith("R2CC_FAILED_")]
            else:
                assert (exports["R2CC_FAILED_NODE"], exports["R2CC_FAILED_HCA"]) == ("0", "mlx5_2")


@pytest.mark.parametrize(("stem", "after"), [("01", "2"), ("02", "3")])
def test_the_cuts_run_verified_on_the_bluefield_with_upstreams_timer(stem: str, after: str) -> None:
    plan = _plan(_by_name(stem))
    assert [r.spec.scenario for r in plan.runs] == ["none", "cut-mlx5_2"]
    for run in plan.runs:
        exports = _exports(run.launch.command)
        assert {k: exports[k] for k in CUT_ENV} == CUT_ENV
        assert exports["R2CC_AR_AFTER_REPAIR"] == after
        assert "/r2b_verify --collective all_reduce -b 4294967296 -e 4294967296" in (
            run.launch.command
        )
        assert " -n 10 -w 0 -c 1 " in run.launch.command
    (fault,) = plan.runs[1].faults
    assert (fault.kind, fault.node, fault.nic, fault.inject.node) == (
        "flow_drop",
        "node-1",
        "mlx5_2",
        "node-1-bf",
    )
    assert fault.inject_after_s == 8 and fault.heal_after_s is None
    assert shlex.split(fault.inject.command)[-2:] == ["--bridge", "ovsbr1"]


def test_the_k_sweep_keeps_upstreams_order() -> None:
    plan = _plan(_by_name("07"))
    order = [
        (r.spec.env["R2CC_MODE"], r.spec.env["R2CC_AR_STAGE2_CHUNKS"], r.spec.env["R2B_PASS"])
        for r in plan.runs
    ]
    modes = [(m, k) if m == "3" else (m,) for m, k, _ in order]
    ks = [("3", k) for k in ("1", "2", "4", "8", "16")]
    assert modes == [("0",), ("2",), *ks, ("0",), ("2",)]
    assert [p for *_, p in order] == ["1"] * 7 + ["2"] * 2
    assert all(" -b 4294967296 -e 4294967296 " in r.launch.command for r in plan.runs)


def test_03_runs_healthy_balance_allreduce_in_that_order() -> None:
    plan = _plan(_by_name("03"))
    assert [r.spec.env["R2CC_MODE"] for r in plan.runs] == ["0", "2", "3"]
    assert " -b 268435456 -e 4294967296 -f 4 -g 1 -n 5 -w 2 -c 1 " in plan.runs[0].launch.command


def _held_text() -> str:
    lines = []
    for experiment in EXPERIMENTS:
        for run in _plan(experiment).runs:
            lines.append(f"# {experiment.name} {run.spec.run_id}")
            lines.append(f"{run.launch.node}$ {run.launch.command}")
            for fault in run.faults:
                for command in (fault.inject, fault.revert):
                    lines.append(f"{command.node}$ {command.command}")
    return "\n".join(lines) + "\n"


def test_the_generated_commands_are_held() -> None:
    text = _held_text()
    if os.environ.get("R2B_WRITE_COMMANDS") == "1":
        HELD.write_text(text)
    assert text == HELD.read_text(), (
        "the r7525 commands changed; if meant, rewrite tests/data/r7525/commands.txt with "
        "R2B_WRITE_COMMANDS=1"
    )
