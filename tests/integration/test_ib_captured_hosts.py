"""Discovery and preflight on sysfs trees of real InfiniBand hosts: tests/data/sysfs/captured/
(README.md there names each source; extract.py re-creates the trees from the public archives).
The scripts run in bash as a node runs them, R2B_SYSFS pointing at the tree; `ip` and
`nvidia-smi` answer nothing (tests/support/sysfs_hosts.py), so what discovery finds is what
the tree holds. The expected values below were read from the trees' files.

Captured (hwloc-gather-topology, 2013, kept byte for byte):
- `hwloc-mic-mlx4-fdr`: a Xeon node (32 threads, 2 NUMA nodes) with a Xeon Phi: a ConnectX-3
  (mlx4_0, one port, InfiniBand 56 Gb/s FDR, ACTIVE) with its IPoIB `ib0` up; `eth0` up, `eth1` down; the
  capture has no `devices/virtual`, so `lo`, `br0`, `mic0`, `eth0.1015` and the Phi's RDMA
  device `scif0` are dangling links.
- `hwloc-r910-qib-qdr`: a Dell PowerEdge R910: a QLogic QLE7340 (qib0, one port, InfiniBand
  40 Gb/s QDR, ACTIVE) with `ib0` up; `eth0` up, `eth1`..`eth3` down; `lo` dangling.
Both kernels predate `dev_port` (Linux 3.15): no netdev has one.

Public fixtures (hand-assembled, class folders not linked to devices):
- `procfs-fixture`: `hfi1_0` (Omni-Path, link layer InfiniBand), a dual-port `mlx4_0` and
  `mlx5_0`, every port ACTIVE, no IPoIB netdev; `eth0` on a PCI function.
- `node-exporter-fixture`: `i40iw0` and a dual-port `mlx4_0`, every port ACTIVE, no netdev of
  theirs; bonds `bond0`, `dmz`, `int` (`bonding_masters` names all three) and `eth0`.

Variants of a captured tree (one file changed in a copy, said where) give what no capture
shows: IPoIB down or absent beside an ACTIVE port, a port DOWN."""

from __future__ import annotations

import importlib.util
import shutil
import sys
import tarfile
from pathlib import Path
from types import ModuleType

import pytest

from r2bench.config.testbed import NicKind
from r2bench.sweep.preflight import node_check_script
from r2bench.testbeds.discover import Discovered, RdmaPort, merge_node
from tests.support import paths, sysfs_hosts

CAPTURED = paths.DATA / "sysfs" / "captured"
MIC = CAPTURED / "hwloc-mic-mlx4-fdr"
R910 = CAPTURED / "hwloc-r910-qib-qdr"
PROCFS = CAPTURED / "procfs-fixture"
NODE_EXPORTER = CAPTURED / "node-exporter-fixture"
TREES = (MIC, R910, PROCFS, NODE_EXPORTER)
HCAS = [(MIC, "mlx4_0"), (R910, "qib0")]
"""The captured hosts and their HCA."""

IB = "InfiniBand"
RDMA_PORTS = {
    MIC: [RdmaPort("mlx4_0", 1, IB, "ib0")],
    R910: [RdmaPort("qib0", 1, IB, "ib0")],
    PROCFS: [
        RdmaPort("hfi1_0", 1, IB, None),
        RdmaPort("mlx4_0", 1, IB, None),
        RdmaPort("mlx4_0", 2, IB, None),
        RdmaPort("mlx5_0", 1, IB, None),
    ],
    NODE_EXPORTER: [
        RdmaPort("i40iw0", 1, IB, None),
        RdmaPort("mlx4_0", 1, IB, None),
        RdmaPort("mlx4_0", 2, IB, None),
    ],
}
"""Every port of every RDMA device each tree holds, in the order bash lists them."""
NETDEVS = {
    MIC: {"eth0": True, "eth1": True, "ib0": True},
    R910: {"eth0": True, "eth1": True, "eth2": True, "eth3": True, "ib0": True},
    PROCFS: {"eth0": True},
    NODE_EXPORTER: {"bond0": False, "dmz": False, "eth0": False, "int": False},
}
"""Each tree's interfaces (dangling links left out) -> whether `device` names a PCI function."""


def _discover(tree: Path, tmp_path: Path) -> Discovered:
    return sysfs_hosts.discover_tree(tree, sysfs_hosts.quiet_tools(tmp_path / "bin"))


def _copy(tree: Path, tmp_path: Path) -> Path:
    """A copy of `tree` to change one file of (links kept as links, dangling ones too)."""
    copy = tmp_path / tree.name
    shutil.copytree(tree, copy, symlinks=True)
    return copy


def _extractor() -> ModuleType:
    spec = importlib.util.spec_from_file_location("captured_extract", CAPTURED / "extract.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


# ---- the trees ----


def test_the_captured_trees_keep_the_kernels_layout() -> None:
    """Class entries link into `devices/`; what the capture lacks stays a dangling link; an
    IPoIB netdev of a kernel before 3.15 has `dev_id` and no `dev_port`."""
    link = MIC / "class" / "infiniband" / "mlx4_0"
    assert link.is_symlink() and (link / "ports" / "1" / "state").read_text() == "4: ACTIVE\n"
    assert (link / "device").resolve() == (MIC / "class" / "net" / "ib0" / "device").resolve()
    for name in ("lo", "br0", "mic0", "eth0.1015"):
        entry = MIC / "class" / "net" / name
        assert entry.is_symlink() and not entry.exists()
    assert (MIC / "class" / "infiniband" / "scif0").is_symlink()
    assert not (MIC / "class" / "infiniband" / "scif0").exists()
    for tree in (MIC, R910):
        ipoib = tree / "class" / "net" / "ib0"
        assert (ipoib / "type").read_text() == "32\n" and (ipoib / "dev_id").read_text() == "0x0\n"
        assert not (ipoib / "dev_port").exists()
    fixture = PROCFS / "class" / "infiniband" / "mlx4_0"
    assert fixture.is_dir() and not fixture.is_symlink() and not (fixture / "device").exists()
    masters = NODE_EXPORTER / "class" / "net" / "bonding_masters"
    assert masters.read_text() == "bond0 dmz int\n"


def test_the_extractor_and_the_readme_name_every_tree() -> None:
    extract = _extractor()
    stored = sorted(p.name for p in CAPTURED.iterdir() if p.is_dir() and not p.is_symlink())
    stored = [name for name in stored if name != "__pycache__"]
    assert sorted(t.name for t in extract.TREES) == stored == sorted(t.name for t in TREES)
    readme = (CAPTURED / "README.md").read_text()
    for tree in extract.TREES:
        assert f"`{tree.name}`" in readme and tree.archive in readme


def test_the_extractor_finds_the_stored_tree_again_in_an_archive_of_it(tmp_path: Path) -> None:
    """An archive laid out as hwloc's, holding the stored tree, gives that tree back (`--check`
    exits 0); one changed file makes `--check` exit 1."""
    extract = _extractor()
    (tree,) = (t for t in extract.TREES if t.name == R910.name)
    archive = tmp_path / tree.archive
    with tarfile.open(archive, "w:bz2") as tar:
        tar.add(R910, arcname=tree.root)
    assert extract.main([str(archive), "--check"]) == 0
    changed = _copy(R910, tmp_path / "stored")
    (changed / "class" / "net" / "ib0" / "operstate").write_text("down\n")
    assert extract.main([str(archive), "--check", "--out", str(changed.parent)]) == 1


def test_the_extractor_reads_ttar_archives(tmp_path: Path) -> None:
    archive = tmp_path / "sys.ttar"
    archive.write_text(
        "# a ttar archive\nDirectory: sys\nMode: 755\n"
        "Path: sys/a\nLines: 2\nInfiniBand\n\nMode: 644\n"
        "Path: sys/b\nLines: 1\nno newlineEOF\nMode: 644\n"
        "Path: sys/c\nLines: 1\nvimNULLBYTEx\nMode: 644\n"
        "Path: sys/d\nSymlinkTo: ../devices/x/\n"
    )
    entries = _extractor().read_ttar(archive)
    assert entries["sys"].data is None and entries["sys"].target is None
    assert entries["sys/a"].data == b"InfiniBand\n\n"
    assert entries["sys/b"].data == b"no newline"
    assert entries["sys/c"].data == b"vim\0x\n"
    assert entries["sys/d"].target == "../devices/x/"


# ---- discovery ----


@pytest.mark.parametrize("tree", TREES, ids=lambda t: t.name)
def test_discovery_finds_every_rdma_port_and_interface_the_tree_holds(
    tree: Path, tmp_path: Path
) -> None:
    """Dangling entries (scif0, lo, the virtual interfaces) and `bonding_masters` are no
    device; an IB port's netdev is its function's IPoIB interface, found without `dev_port`
    on the captured hosts, none where the device has no PCI function."""
    found = _discover(tree, tmp_path)
    assert found.rdma == RDMA_PORTS[tree]
    assert {name: physical for name, (physical, _) in found.netdevs.items()} == NETDEVS[tree]
    assert found.gpu_archs == [] and found.default_route is None


def test_before_dev_port_a_second_ports_ipoib_netdev_is_told_by_dev_id(tmp_path: Path) -> None:
    """Kernels before 3.15 (both captured hosts') have no `dev_port`: IPoIB numbered its
    port in `dev_id` (0x0 for port 1, 0x1 for port 2). In a copy of the MIC host, mlx4_0
    gains a second ACTIVE port and `ib1` beside `ib0` on the same function, written as that
    kernel writes them: port 2 gets `ib1`, port 1 keeps `ib0`."""
    tree = _copy(MIC, tmp_path)
    function = (tree / "class" / "infiniband" / "mlx4_0").resolve().parent.parent
    port2 = function / "infiniband" / "mlx4_0" / "ports" / "2"
    shutil.copytree(port2.parent / "1", port2)
    ib1 = function / "net" / "ib1"
    shutil.copytree(function / "net" / "ib0", ib1, symlinks=True)
    (ib1 / "dev_id").write_text("0x1\n")
    (tree / "class" / "net" / "ib1").symlink_to(
        Path("../../devices") / ib1.relative_to(tree / "devices")
    )
    found = _discover(tree, tmp_path)
    assert found.rdma == [RdmaPort("mlx4_0", 1, IB, "ib0"), RdmaPort("mlx4_0", 2, IB, "ib1")]


@pytest.mark.parametrize("tree", TREES, ids=lambda t: t.name)
def test_a_node_listing_no_nic_gets_every_rdma_port_as_an_ib_nic(
    tree: Path, tmp_path: Path
) -> None:
    """Every port is InfiniBand (kind ib), named after its device (`-p2` for port 2), with its
    IPoIB netdev where the tree has one; no Ethernet-only interface becomes a data NIC."""
    merged = merge_node(sysfs_hosts.node([]), _discover(tree, tmp_path))
    nics = [(n.name, n.kind, n.rdma_device, n.port, n.netdev) for n in merged.data_nics]
    expected = [
        (p.device if p.port == 1 else f"{p.device}-p{p.port}", NicKind.IB, p.device, p.port,
         p.netdev)
        for p in RDMA_PORTS[tree]
    ]  # fmt: skip
    assert nics == expected


@pytest.mark.parametrize(("tree", "device"), HCAS, ids=[t.name for t, _ in HCAS])
def test_a_manifest_nic_named_by_its_ipoib_netdev_becomes_its_hca(
    tree: Path, device: str, tmp_path: Path
) -> None:
    """A placeholder NIC listed by its netdev (`ib0`, kind eth as a manifest writes it) is the
    HCA's port: renamed after the device, kind ib; the listed management NIC stays Ethernet."""
    listed: list[dict[str, object]] = [
        {"name": "rail0", "kind": "eth", "netdev": "ib0"},
        {"name": "mgmt", "kind": "eth", "netdev": "eth0", "management": True},
    ]
    merged = merge_node(sysfs_hosts.node(listed), _discover(tree, tmp_path))
    nics = [(n.name, n.kind, n.rdma_device, n.port, n.netdev, n.management) for n in merged.nics]
    assert nics == [
        (device, NicKind.IB, device, 1, "ib0", False),
        ("mgmt", NicKind.ETH, None, 1, "eth0", True),
    ]


def test_a_bond_of_no_rdma_device_stays_ethernet(tmp_path: Path) -> None:
    """node_exporter's bonds carry no RDMA device: a NIC on `dmz` is Ethernet and gets none."""
    listed: list[dict[str, object]] = [{"name": "dmz", "kind": "roce", "netdev": "dmz"}]
    merged = merge_node(sysfs_hosts.node(listed), _discover(NODE_EXPORTER, tmp_path))
    dmz = next(n for n in merged.nics if n.name == "dmz")
    assert (dmz.kind, dmz.rdma_device, dmz.netdev) == (NicKind.ETH, None, "dmz")


# ---- preflight ----


@pytest.mark.parametrize("tree", TREES, ids=lambda t: t.name)
def test_the_discovered_nics_pass_preflight_and_a_down_port_fails_it(
    tree: Path, tmp_path: Path
) -> None:
    """What discovery made of the tree passes preflight there (every port ACTIVE); in a copy
    with one port's `state` set to `1: DOWN`, preflight names that port and no other."""
    merged = merge_node(sysfs_hosts.node([]), _discover(tree, tmp_path))
    script = node_check_script(merged, "/nonexistent-work-dir")
    assert [ln for ln in sysfs_hosts.run_bash(script, tree).splitlines() if "problem" in ln] == []
    last = RDMA_PORTS[tree][-1]
    copy = _copy(tree, tmp_path)
    (copy / "class" / "infiniband" / last.device / "ports" / str(last.port) / "state").write_text(
        "1: DOWN\n"
    )
    name = last.device if last.port == 1 else f"{last.device}-p{last.port}"
    problems = [ln for ln in sysfs_hosts.run_bash(script, copy).splitlines() if "problem" in ln]
    assert problems == [f"problem: {name} ({last.device}/{last.port}) is not ACTIVE"]


@pytest.mark.parametrize(("tree", "device"), HCAS, ids=[t.name for t, _ in HCAS])
def test_preflight_takes_an_active_ib_port_whatever_its_ipoib_netdev_says(
    tree: Path, device: str, tmp_path: Path
) -> None:
    """The IB NIC names `ib0`: up as captured, down (its `operstate` changed in a copy) or
    gone (its `class/net` entry removed in another): the port is ACTIVE, nothing is wrong."""
    nics: list[dict[str, object]] = [
        {"name": device, "kind": "ib", "rdma_device": device, "netdev": "ib0"}
    ]
    assert (tree / "class" / "net" / "ib0" / "operstate").read_text() == "up\n"
    assert sysfs_hosts.preflight_problems(nics, tree) == []
    down = _copy(tree, tmp_path / "down")
    (down / "class" / "net" / "ib0" / "operstate").write_text("down\n")
    assert sysfs_hosts.preflight_problems(nics, down) == []
    gone = _copy(tree, tmp_path / "gone")
    (gone / "class" / "net" / "ib0").unlink()
    assert sysfs_hosts.preflight_problems(nics, gone) == []


def test_preflight_on_the_mic_host_reports_what_is_down_or_missing() -> None:
    """`eth1` is down in the capture; `scif0`'s device folder was not captured; mlx4_0 has no
    port 2: each is reported once; `eth0` (up) and the ACTIVE port are not."""
    nics: list[dict[str, object]] = [
        {"name": "fdr", "kind": "ib", "rdma_device": "mlx4_0", "netdev": "ib0"},
        {"name": "e0", "kind": "eth", "netdev": "eth0"},
        {"name": "e1", "kind": "eth", "netdev": "eth1"},
        {"name": "phi", "kind": "ib", "rdma_device": "scif0"},
        {"name": "p2", "kind": "ib", "rdma_device": "mlx4_0", "port": 2},
    ]
    assert sysfs_hosts.preflight_problems(nics, MIC) == [
        "problem: e1 (eth1) is not up",
        "problem: phi (scif0/1) is not ACTIVE",
        "problem: p2 (mlx4_0/2) is not ACTIVE",
    ]


def test_preflight_on_the_r910_reports_its_three_down_ethernet_ports() -> None:
    nics: list[dict[str, object]] = [
        {"name": "qdr", "kind": "ib", "rdma_device": "qib0", "netdev": "ib0"}
    ]
    nics += [{"name": f"e{i}", "kind": "eth", "netdev": f"eth{i}"} for i in range(4)]
    assert sysfs_hosts.preflight_problems(nics, R910) == [
        f"problem: e{i} (eth{i}) is not up" for i in (1, 2, 3)
    ]


def test_preflight_on_the_fixtures_judges_ports_by_state_and_bonds_by_operstate() -> None:
    """procfs's mlx5_0 reads `4: ACTIVE` in `phys_state` too (a fixture's slip): its `state`
    decides. An IB NIC naming an IPoIB netdev the host lacks is fine; a NIC on the bond `dmz`
    (up) is fine, one on its slave `eth4`, which the fixture does not hold, is not up."""
    procfs: list[dict[str, object]] = [
        {"name": "edr", "kind": "ib", "rdma_device": "mlx5_0", "netdev": "ib0"},
        {"name": "opa", "kind": "ib", "rdma_device": "hfi1_0"},
        {"name": "qdr2", "kind": "ib", "rdma_device": "mlx4_0", "port": 2},
    ]
    assert sysfs_hosts.preflight_problems(procfs, PROCFS) == []
    bonds: list[dict[str, object]] = [
        {"name": "dmz", "kind": "eth", "netdev": "dmz"},
        {"name": "slave", "kind": "eth", "netdev": "eth4"},
    ]
    assert (NODE_EXPORTER / "class" / "net" / "dmz" / "bonding" / "slaves").read_text() == (
        "eth0 eth4\n"
    )
    assert sysfs_hosts.preflight_problems(bonds, NODE_EXPORTER) == [
        "problem: slave (eth4) is not up"
    ]
