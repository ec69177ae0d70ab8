"""`r2bench doctor --discover`: merge rules (pure), a LocalNode, and the virtual testbed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from r2bench.cli import app
from r2bench.cloudlab.manifest import manifest_testbed
from r2bench.config.load import load_testbed
from r2bench.config.testbed import NicKind
from r2bench.testbeds.discover import merge_testbed, parse_discovery
from r2bench.virtual.lifecycle import UpResult

DATA = Path(__file__).parent / "data" / "cloudlab"

# What the script prints on a CloudLab-like node: 8 H100s, 8 IB HCAs (no netdev on the IB
# ports' GID table here, ib0..7 from device/net), one RoCE port on the LAN NIC, control eno1.
H100_NODE = "\n".join(
    [*["gpu 90"] * 8]
    + [f"rdma mlx5_{i} 1 InfiniBand ib{i}" for i in range(8)]
    + ["rdma mlx5_8 1 Ethernet eth2"]
    + ["net eno1 1 128.105.145.10", "net eth2 1 10.10.0.1", "net docker0 0 172.17.0.1"]
    + [f"net ib{i} 1 -" for i in range(8)]
    + ["route eno1", "some noise line"]
)


def test_parse() -> None:
    found = parse_discovery(H100_NODE)
    assert found.gpu_archs == ["90"] * 8
    assert len(found.rdma) == 9 and found.rdma[0].netdev == "ib0"
    assert found.netdevs["eno1"] == (True, ["128.105.145.10"])
    assert found.default_route == "eno1"


def test_merge_into_a_manifest_testbed() -> None:
    testbed = manifest_testbed((DATA / "two-nodes-one-lan.xml").read_text())
    merged = merge_testbed(testbed, {"node0": parse_discovery(H100_NODE)})
    node0, node1 = merged.nodes
    assert (node0.gpus, node0.gpu_arch) == (8, "90")
    control = node0.nic("control")
    assert control is not None and control.management and control.netdev == "eno1"
    lan = node0.nic("mlx5_8")  # rail0, found by its address, named after its RDMA device
    assert lan is not None and lan.kind is NicKind.ROCE and lan.netdev == "eth2"
    for i in range(8):
        nic = node0.nic(f"mlx5_{i}")
        assert nic is not None and nic.kind is NicKind.IB and nic.netdev == f"ib{i}"
    assert [n.name for n in node0.data_nics][:1] == ["mlx5_8"]
    assert node1 == testbed.nodes[1]  # not discovered: unchanged
    assert merged.launcher.bootstrap_interface is None  # node1's control netdev still unknown
    node1_text = H100_NODE.replace("145.10", "145.11").replace("10.10.0.1", "10.10.0.2")
    found = {"node0": parse_discovery(H100_NODE), "node1": parse_discovery(node1_text)}
    both = merge_testbed(testbed, found)
    assert both.launcher.bootstrap_interface == "eno1"


def test_no_answer_leaves_the_bootstrap_interface_unset() -> None:
    """The manifest's NIC names are not interfaces: with no node asked, nothing is guessed
    (a guess written back would never be replaced, since only an unset value is filled)."""
    testbed = manifest_testbed((DATA / "two-nodes-one-lan.xml").read_text())
    assert merge_testbed(testbed, {}).launcher.bootstrap_interface is None


def test_merge_marks_default_route_as_management_when_none_is() -> None:
    testbed = manifest_testbed((DATA / "one-node-no-lan.xml").read_text())
    node = testbed.nodes[0].model_copy(update={"nics": []})
    bare = testbed.model_copy(update={"nodes": [node]})
    merged = merge_testbed(bare, {"node0": parse_discovery(H100_NODE)})
    first = merged.nodes[0].nics[0]
    assert (first.name, first.management, first.address) == ("eno1", True, "128.105.145.10")


LOCAL = """\
# kept header
name: here
kind: local
nodes:
  - name: me
    address: localhost
launcher: {kind: local}
"""


def test_local_node_discovery_writes_back(tmp_path: Path) -> None:
    path = tmp_path / "testbed.yaml"
    path.write_text(LOCAL)
    runner = CliRunner()
    dry = runner.invoke(app, ["doctor", "--discover", "--dry-run", "-t", str(path)])
    assert dry.exit_code == 0, dry.output
    assert path.read_text() == LOCAL
    result = runner.invoke(app, ["doctor", "--discover", "-t", str(path)])
    assert result.exit_code == 0, result.output
    text = path.read_text()
    assert text.startswith("# kept header\n")
    testbed = load_testbed(path)
    me = testbed.nodes[0]
    if os.path.exists("/sys/class/net") and any(
        line.startswith("default") for line in os.popen("ip route show default").read().splitlines()
    ):
        assert "+" in result.stdout and any(nic.management for nic in me.nics)
    again = runner.invoke(app, ["doctor", "--discover", "-t", str(path)])
    assert again.exit_code == 0 and "nothing to change" in again.stdout
    assert yaml.safe_load(path.read_text()) == yaml.safe_load(text)


@pytest.fixture(scope="module")
def virtual_testbed(virtual_testbed: UpResult) -> Path:
    """The shared testbed (conftest.py), as its file."""
    return virtual_testbed.testbed_yaml


@pytest.mark.root
@pytest.mark.needs_mpirun
def test_virtual_testbed_discovery_is_a_fixed_point(virtual_testbed: Path, tmp_path: Path) -> None:
    """The virtual testbed's file is already complete: discovery confirms it, changes nothing
    but dropping the management mark finds it again from the default route."""
    copy = tmp_path / "testbed.yaml"
    copy.write_text(virtual_testbed.read_text())
    result = CliRunner().invoke(app, ["doctor", "--discover", "-t", str(copy)])
    assert result.exit_code == 0, result.output
    assert "nothing to change" in result.stdout
    before = load_testbed(copy)
    assert before == load_testbed(virtual_testbed)
