"""The link layer decides: which faults a NIC takes, how doctor and preflight judge its port.

The testbed below is built from real names and values (tests/data/hardware/README.md): an
8-GPU host whose RDMA devices interleave InfiniBand ports (`ibp*` IPoIB names) and Ethernet
ports, a bonded RoCE device, and an IB port without IPoIB.

This module holds its pure tests; the same subject's other tests:
tests/integration/test_link_layer.py (those with real processes).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from r2bench.config.testbed import Nic, NicKind
from r2bench.faults.catalogue import FAULT_KINDS, link_layer_refusal
from tests.support.cli_runner import invoke_as_main

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
