"""The link layer decides: which faults a NIC takes, how doctor and preflight judge its port.

The testbed below is built from real names and values (tests/data/hardware/README.md): an
8-GPU host whose RDMA devices interleave InfiniBand ports (`ibp*` IPoIB names) and Ethernet
ports, a bonded RoCE device, and an IB port without IPoIB.

This module holds those with real processes; the same subject's other tests:
tests/unit/test_link_layer.py (its pure tests).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from r2bench.config.testbed import Node as NodeModel
from r2bench.sweep.preflight import node_check_script
from tests.support import fake_sysfs

# ---- preflight: port state for RDMA NICs, IPoIB optional ----------------------------------


def preflight_problems(sysfs: Path, work: Path, nics: list[dict[str, object]]) -> list[str]:
    """The preflight check script run as a node runs it, sysfs at `sysfs`."""
    model = NodeModel.model_validate({"name": "n", "address": "10.0.0.1", "nics": nics})
    script = node_check_script(model, str(work))
    env = {**os.environ, "R2B_SYSFS": str(sysfs)}
    done = subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, env=env, timeout=30
    )
    return [line for line in done.stdout.splitlines() if line.startswith("problem: ")]


H100_NICS: list[dict[str, object]] = [
    {"name": "mgmt", "kind": "eth", "netdev": "enp170s0np0", "management": True},
    {"name": "mlx5_0", "kind": "ib", "rdma_device": "mlx5_0", "netdev": "ibp24s0"},
    {"name": "mlx5_3", "kind": "ib", "rdma_device": "mlx5_3"},
]


def test_preflight_judges_an_ib_nic_by_its_port_not_its_ipoib(tmp_path: Path) -> None:
    """Before: an IB NIC listed with its IPoIB name failed preflight when IPoIB was absent or
    down, and its port state was never read."""
    sysfs = fake_sysfs.build(tmp_path / "sys", fake_sysfs.dgx_h100(ipoib=False))
    assert preflight_problems(sysfs, tmp_path, H100_NICS) == []
    devices = fake_sysfs.dgx_h100()
    devices = [
        fake_sysfs.ib("mlx5_3", d.bdf, "ibp64s0", state="DOWN") if d.name == "mlx5_3" else d
        for d in devices
    ]
    sysfs = fake_sysfs.build(tmp_path / "sys2", devices)
    assert preflight_problems(sysfs, tmp_path, H100_NICS) == [
        "problem: mlx5_3 (mlx5_3/1) is not ACTIVE"
    ]


def test_preflight_roce_needs_port_and_netdev(tmp_path: Path) -> None:
    sysfs = fake_sysfs.build(tmp_path / "sys", fake_sysfs.dgx_h100())
    nics: list[dict[str, object]] = [
        {"name": "r1", "kind": "roce", "rdma_device": "mlx5_1", "netdev": "enp41s0f0np0"},
        {"name": "r7", "kind": "roce", "rdma_device": "mlx5_7", "netdev": "enp170s0np0"},
    ]
    problems = preflight_problems(sysfs, tmp_path, nics)
    assert problems == [
        "problem: r1 (mlx5_1/1) is not ACTIVE",
        "problem: r1 (enp41s0f0np0) is not up",
    ]
