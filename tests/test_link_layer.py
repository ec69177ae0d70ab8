"""The link layer decides: which faults a NIC takes, how doctor and preflight judge its port.

The testbed below is built from real names and values (tests/data/hardware/README.md): an
8-GPU host whose RDMA devices interleave InfiniBand ports (`ibp*` IPoIB names) and Ethernet
ports, a bonded RoCE device, and an IB port without IPoIB.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import fake_sysfs
import pytest
from cli_runner import invoke_as_main

from r2bench.config.testbed import Nic, NicKind
from r2bench.config.testbed import Node as NodeModel
from r2bench.faults.catalogue import FAULT_KINDS, link_layer_refusal
from r2bench.sweep.preflight import node_check_script

TESTBED = """\
name: h100-mixed
kind: ssh
nodes:
  - name: node0
    address: 10.0.0.10
    nics:
      - {name: mgmt, kind: eth, netdev: enp170s0np0, management: true}
      - {name: mlx5_0, kind: ib, rdma_device: mlx5_0, port: 1, netdev: ibp24s0}
      - {name: mlx5_3, kind: ib, rdma_device: mlx5_3, port: 1}
      - {name: bond, kind: roce, rdma_device: mlx5_bond_0, port: 1, netdev: bond0}
  - name: node1
    address: 10.0.0.11
    nics:
      - {name: mgmt, kind: eth, netdev: enp170s0np0, management: true}
      - {name: mlx5_0, kind: ib, rdma_device: mlx5_0, port: 1, netdev: ibp24s0}
      - {name: mlx5_3, kind: ib, rdma_device: mlx5_3, port: 1}
      - {name: bond, kind: roce, rdma_device: mlx5_bond_0, port: 1, netdev: bond0}
launcher: {kind: mpirun, bootstrap_interface: enp170s0np0}
"""

EXPERIMENT = """\
name: wrong-layer
libraries: {r2ccl: {recipe: r2ccl, ref: f45cbcb}}
sizes: {begin: 8, end: 1M, factor: 4}
scenarios:
  - name: wrong
    faults:
      - {kind: ib_port_down, node: node1, nic: bond, trigger: {after_s: 1}}
      - {kind: link_down, node: node1, nic: mlx5_0, trigger: {after_s: 1}}
"""


def nic(**fields: object) -> Nic:
    return Nic.model_validate({"name": "x", **fields})


def test_ib_port_down_is_refused_on_roce_and_link_down_on_ib() -> None:
    roce = nic(kind="roce", rdma_device="mlx5_bond_0", netdev="bond0")
    ib = nic(kind="ib", rdma_device="mlx5_0", netdev="ibp24s0")
    refused = link_layer_refusal(FAULT_KINDS["ib_port_down"], roce)
    assert refused is not None
    message, hint = refused
    assert "subnet management agent" in message and "mad_rpc_open_port" in message
    assert "link_down" in hint and "flow_drop" in hint and "ib_port_down" not in hint
    refused = link_layer_refusal(FAULT_KINDS["link_down"], ib)
    assert refused is not None
    message, hint = refused
    assert "IPoIB" in message and "port ACTIVE and RDMA traffic flowing" in message
    assert hint.startswith("on ib NICs use: ib_port_down")
    assert link_layer_refusal(FAULT_KINDS["ib_port_down"], ib) is None
    assert link_layer_refusal(FAULT_KINDS["link_down"], roce) is None
    eth = nic(kind="eth", netdev="eth1")
    assert link_layer_refusal(FAULT_KINDS["link_down"], eth) is None
    assert link_layer_refusal(FAULT_KINDS["flow_drop"], eth) is not None


def test_every_nic_fault_kind_has_somewhere_to_go() -> None:
    """A refusal always names a fault that works on that NIC (no dead end)."""
    for kind in FAULT_KINDS.values():
        if not kind.targets_nic:
            continue
        for layer in NicKind:
            fields: dict[str, object] = {"kind": layer.value, "rdma_device": "d", "netdev": "n"}
            refused = link_layer_refusal(kind, nic(**fields))
            assert (refused is None) == (layer in kind.nic_kinds)
            if refused is not None:
                assert "use:" in refused[1]


def test_plan_refuses_each_wrong_placement_located_exit_2(tmp_path: Path) -> None:
    testbed = tmp_path / "testbed.yaml"
    testbed.write_text(TESTBED)
    experiment = tmp_path / "exp.yaml"
    experiment.write_text(EXPERIMENT)
    result = invoke_as_main("plan", str(experiment), "-t", str(testbed))
    assert result.exit_code == 2, result.output
    text = result.output
    assert f"{experiment}:7" in text and "ib_port_down does not apply to roce NIC 'bond'" in text
    assert f"{experiment}:8" in text and "link_down does not apply to ib NIC 'mlx5_0'" in text
    assert "inject" not in text.lower().replace("ib_port_down", "")


@pytest.mark.parametrize("fault", ["ib_port_down", "link_down"])
def test_right_placements_plan(fault: str, tmp_path: Path) -> None:
    testbed = tmp_path / "testbed.yaml"
    testbed.write_text(TESTBED)
    target = "mlx5_3" if fault == "ib_port_down" else "bond"
    experiment = tmp_path / "exp.yaml"
    experiment.write_text(
        EXPERIMENT.split("    faults:")[0]
        + f"    faults:\n      - {{kind: {fault}, node: node1, nic: {target}, trigger: {{after_s: 1}}}}\n"
    )
    result = invoke_as_main("plan", str(experiment), "-t", str(testbed))
    assert result.exit_code == 0, result.output


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
