"""`r2bench doctor --discover`: merge rules (pure), a LocalNode, and the virtual testbed.

This module holds its pure tests; the same subject's other tests:
tests/integration/test_discover.py (those with real processes), tests/system/test_discover.py
(those on a virtual testbed (root)).
"""

from __future__ import annotations

import pytest

from r2bench.config.testbed import NicKind
from r2bench.testbeds.cloudlab.manifest import manifest_testbed
from r2bench.testbeds.discover import merge_testbed, parse_discovery
from tests.support import paths

DATA = paths.DATA / "cloudlab"

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


def test_a_roce_port_without_a_netdev_is_not_added() -> None:
    """A RoCE port whose netdev the node does not show (another namespace, a LAG member) cannot
    be a NIC of the file (a roce NIC needs its netdev): skipped, not a crash."""
    found = parse_discovery("rdma mlx5_2 1 Ethernet -\nrdma mlx5_0 1 InfiniBand -\nroute eno1")
    testbed = manifest_testbed((DATA / "one-node-no-lan.xml").read_text())
    node = merge_testbed(testbed, {"node0": found}).nodes[0]
    assert [(n.name, n.kind) for n in node.data_nics] == [("mlx5_0", NicKind.IB)]


@pytest.mark.parametrize("digits", ["\u00b2", "\u0663", "\u2081"])  # ², Arabic-Indic 3, ₁
def test_discovery_takes_ascii_numbers_only(digits: str) -> None:
    found = parse_discovery(f"gpu {digits}\nrdma mlx5_0 {digits} InfiniBand ibp24s0\n")
    assert found.gpu_archs == [] and found.rdma == []
