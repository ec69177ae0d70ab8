"""Discovery and preflight on sysfs trees laid out as the kernel lays them out (class folders
linked into the device tree, an InfiniBand port's GID netdev unreadable, `bonding_masters`
among the interfaces): tests/data/sysfs/, written by its make_trees.py from facts (the kernel's
sysfs ABI, the real outputs in tests/data/hardware/ and the shapes issue 41 names), not
captured from a host. The scripts run in bash as a node runs them, R2B_SYSFS pointing there
(tests/support/sysfs_hosts.py). Trees captured from real hosts (hwloc-gather-topology
tarballs) and taken from public fixtures are in tests/data/sysfs/captured/, tested by
test_ib_captured_hosts.py.

Hosts: `ndr8-bond`, eight single-port NDR InfiniBand HCAs (IPoIB up on four, down on two,
absent on two) and a RoCE LAG `mlx5_bond_0` over two Ethernet functions enslaved to `bond0`;
`dualport-ib`, one function with two InfiniBand ports, an IPoIB netdev per port (`dev_port`),
port 2 DOWN."""

from __future__ import annotations

from r2bench.config.testbed import NicKind
from r2bench.testbeds.discover import SCRIPT, merge_node, parse_discovery
from tests.support import paths, sysfs_hosts

TREES = paths.DATA / "sysfs"
NDR8_BOND = TREES / "ndr8-bond"
DUAL_PORT = TREES / "dualport-ib"
NDR_HCAS = {
    "mlx5_0": "ibp24s0",
    "mlx5_3": "ibp64s0",
    "mlx5_4": "ibp79s0",
    "mlx5_5": "ibp94s0",
    "mlx5_6": "ibp154s0",
    "mlx5_7": None,
    "mlx5_8": "ibp192s0",
    "mlx5_9": None,
}


def test_the_trees_are_laid_out_as_the_kernel_lays_them_out() -> None:
    link = NDR8_BOND / "class" / "infiniband" / "mlx5_0"
    assert link.is_symlink() and (link / "ports" / "1" / "state").read_text() == "4: ACTIVE\n"
    assert (link / "ports" / "1" / "gid_attrs" / "ndevs" / "0").is_dir()  # EINVAL stand-in
    assert (NDR8_BOND / "class" / "net" / "bonding_masters").is_file()


def test_discovery_on_8x_ndr_and_a_bond_gives_every_kind_and_netdev() -> None:
    """The IB HCAs with their IPoIB netdev (none where IPoIB is absent), the LAG as RoCE on its
    bond master; `bonding_masters` is no interface."""
    found = parse_discovery(sysfs_hosts.run_bash(SCRIPT, NDR8_BOND))
    ports = {(r.device, r.port): (r.link_layer, r.netdev) for r in found.rdma}
    assert ports == {
        **{(hca, 1): ("InfiniBand", ipoib) for hca, ipoib in NDR_HCAS.items()},
        ("mlx5_bond_0", 1): ("Ethernet", "bond0"),
    }
    assert "bonding_masters" not in found.netdevs and "bond0" in found.netdevs
    node = merge_node(sysfs_hosts.node([]), found)
    kinds = {nic.name: (nic.kind, nic.rdma_device, nic.netdev) for nic in node.data_nics}
    assert kinds == {
        **{hca: (NicKind.IB, hca, ipoib) for hca, ipoib in NDR_HCAS.items()},
        "mlx5_bond_0": (NicKind.ROCE, "mlx5_bond_0", "bond0"),
    }


def test_a_nic_listed_by_its_netdev_alone_gets_its_kind_and_device() -> None:
    found = parse_discovery(sysfs_hosts.run_bash(SCRIPT, NDR8_BOND))
    listed = [
        {"name": "rail0", "kind": "eth", "netdev": "ibp79s0"},
        {"name": "lag", "kind": "eth", "netdev": "bond0"},
    ]
    node = merge_node(sysfs_hosts.node(listed), found)
    by_netdev = {n.netdev: (n.name, n.kind, n.rdma_device) for n in node.nics}
    assert by_netdev["ibp79s0"] == ("mlx5_4", NicKind.IB, "mlx5_4")  # a placeholder renamed
    assert by_netdev["bond0"] == ("lag", NicKind.ROCE, "mlx5_bond_0")


def test_port_2_of_a_dual_port_hca_gets_its_own_ipoib_netdev() -> None:
    found = parse_discovery(sysfs_hosts.run_bash(SCRIPT, DUAL_PORT))
    assert [(r.device, r.port, r.netdev) for r in found.rdma] == [
        ("mlx4_0", 1, "ib0"),
        ("mlx4_0", 2, "ib1"),
    ]
    node = merge_node(sysfs_hosts.node([]), found)
    assert [(n.name, n.port, n.netdev) for n in node.data_nics] == [
        ("mlx4_0", 1, "ib0"),
        ("mlx4_0-p2", 2, "ib1"),
    ]


def test_preflight_judges_an_ib_nic_by_its_port_whatever_its_ipoib_says() -> None:
    """An IB NIC that also names its IPoIB netdev: up, down or absent, the port is ACTIVE and
    preflight finds nothing; the LAG's port and bond0 are both checked."""
    nics: list[dict[str, object]] = [
        {"name": hca, "kind": "ib", "rdma_device": hca, **({"netdev": ipoib} if ipoib else {})}
        for hca, ipoib in NDR_HCAS.items()
    ]
    nics += [
        {"name": "gone", "kind": "ib", "rdma_device": "mlx5_9", "netdev": "ibp220s0"},
        {"name": "lag", "kind": "roce", "rdma_device": "mlx5_bond_0", "netdev": "bond0"},
    ]
    assert sysfs_hosts.preflight_problems(nics, NDR8_BOND) == []


def test_preflight_reports_the_down_port_of_a_dual_port_hca_only() -> None:
    nics: list[dict[str, object]] = [
        {"name": "p1", "kind": "ib", "rdma_device": "mlx4_0", "port": 1, "netdev": "ib0"},
        {"name": "p2", "kind": "ib", "rdma_device": "mlx4_0", "port": 2, "netdev": "ib1"},
    ]
    problems = sysfs_hosts.preflight_problems(nics, DUAL_PORT)
    assert problems == ["problem: p2 (mlx4_0/2) is not ACTIVE"]
