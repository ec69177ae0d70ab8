"""`r2bench doctor --discover`: merge rules (pure), a LocalNode, and the virtual testbed."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import fake_sysfs
import pytest
import yaml
from typer.testing import CliRunner

from r2bench.cli import app
from r2bench.config.load import load_testbed
from r2bench.config.testbed import Nic, NicKind
from r2bench.testbeds.cloudlab.manifest import manifest_testbed
from r2bench.testbeds.discover import SCRIPT, merge_testbed, parse_discovery
from r2bench.testbeds.virtual.lifecycle import UpResult

DATA = Path(__file__).parent / "data" / "cloudlab"
ROOT = Path(__file__).resolve().parent.parent

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


# ---- the discovery script on sysfs trees laid out from real hosts (tests/fake_sysfs.py) ----


def run_script(sysfs: Path) -> str:
    """The discovery script as a node runs it, with sysfs at `sysfs`."""
    env = {**os.environ, "R2B_SYSFS": str(sysfs), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        ["bash", "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=30
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def rdma_lines(sysfs: Path) -> list[tuple[str, int, str, str | None]]:
    found = parse_discovery(run_script(sysfs))
    return [(r.device, r.port, r.link_layer, r.netdev) for r in found.rdma]


def test_dgx_h100_interleaved_ib_and_ethernet(tmp_path: Path) -> None:
    lines = rdma_lines(fake_sysfs.build(tmp_path, fake_sysfs.dgx_h100()))
    by_device = {device: (layer, netdev) for device, _, layer, netdev in lines}
    assert by_device["mlx5_0"] == ("InfiniBand", "ibp24s0")
    assert by_device["mlx5_10"] == ("InfiniBand", "ibp220s0")
    assert by_device["mlx5_1"] == ("Ethernet", "enp41s0f0np0")
    assert by_device["mlx5_7"] == ("Ethernet", "enp170s0np0")
    assert len(lines) == 11


def test_ib_port_without_ipoib_has_no_netdev(tmp_path: Path) -> None:
    """Before: the IB NIC kept whatever netdev the file named (`ib0`) though no such interface
    exists; IPoIB is filled in only where the port has one."""
    sysfs = fake_sysfs.build(tmp_path, fake_sysfs.dgx_h100(ipoib=False))
    lines = rdma_lines(sysfs)
    assert ("mlx5_0", 1, "InfiniBand", None) in lines
    assert ("mlx5_7", 1, "Ethernet", "enp170s0np0") in lines
    testbed = load_testbed(ROOT / "experiments" / "testbeds" / "dgx-h100-2node.yaml")
    merged = merge_testbed(testbed, {"node0": parse_discovery(run_script(sysfs))})
    mlx5_0 = merged.nodes[0].nic("mlx5_0")
    assert mlx5_0 is not None and mlx5_0.kind is NicKind.IB and mlx5_0.netdev is None
    mlx5_1 = merged.nodes[0].nic("mlx5_1")
    assert mlx5_1 is not None and mlx5_1.kind is NicKind.ROCE
    assert mlx5_1.netdev == "enp41s0f0np0"


def test_dual_port_hca_netdevs_by_dev_port(tmp_path: Path) -> None:
    """Before: both ports of a single-function dual-port HCA got the first netdev (ib0)."""
    lines = rdma_lines(fake_sysfs.build(tmp_path, fake_sysfs.mlx4_dual_port()))
    assert lines == [("mlx4_0", 1, "InfiniBand", "ib0"), ("mlx4_0", 2, "InfiniBand", "ib1")]
    found = parse_discovery(run_script(tmp_path))
    testbed = manifest_testbed((DATA / "one-node-no-lan.xml").read_text())
    node = merge_testbed(testbed, {"node0": found}).nodes[0]
    assert [(n.name, n.port, n.netdev) for n in node.data_nics] == [
        ("mlx4_0", 1, "ib0"),
        ("mlx4_0-p2", 2, "ib1"),
    ]


def test_a_listed_port_2_keeps_its_own_netdev(tmp_path: Path) -> None:
    """A NIC on port 2 whose file netdev is stale is matched by device and port, not device."""
    found = parse_discovery(run_script(fake_sysfs.build(tmp_path, fake_sysfs.mlx4_dual_port())))
    testbed = manifest_testbed((DATA / "one-node-no-lan.xml").read_text())
    node = testbed.nodes[0]
    stale = {"name": "p2", "kind": "ib", "rdma_device": "mlx4_0", "port": 2, "netdev": "ib9"}
    node = node.model_copy(update={"nics": [*node.nics, Nic.model_validate(stale)]})
    merged = merge_testbed(testbed.model_copy(update={"nodes": [node]}), {"node0": found})
    p2 = merged.nodes[0].nic("p2")
    assert p2 is not None and p2.netdev == "ib1"


def test_bonded_roce_takes_the_bond_master(tmp_path: Path) -> None:
    devices, others = fake_sysfs.bonded_roce()
    lines = rdma_lines(fake_sysfs.build(tmp_path, devices, others))
    assert lines == [("mlx5_bond_0", 1, "Ethernet", "bond0")]


def test_a_roce_port_without_a_netdev_is_not_added() -> None:
    """A RoCE port whose netdev the node does not show (another namespace, a LAG member) cannot
    be a NIC of the file (a roce NIC needs its netdev): skipped, not a crash."""
    found = parse_discovery("rdma mlx5_2 1 Ethernet -\nrdma mlx5_0 1 InfiniBand -\nroute eno1")
    testbed = manifest_testbed((DATA / "one-node-no-lan.xml").read_text())
    node = merge_testbed(testbed, {"node0": found}).nodes[0]
    assert [(n.name, n.kind) for n in node.data_nics] == [("mlx5_0", NicKind.IB)]
