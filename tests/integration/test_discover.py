"""`r2bench doctor --discover`: merge rules (pure), a LocalNode, and the virtual testbed.

This module holds those with real processes; the same subject's other tests:
tests/unit/test_discover.py (its pure tests), tests/system/test_discover.py (those on a virtual
testbed (root)).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import yaml
from typer.testing import CliRunner

from r2bench.cli import app
from r2bench.config.load import load_testbed
from r2bench.config.testbed import Nic, NicKind
from r2bench.testbeds.cloudlab.manifest import manifest_testbed
from r2bench.testbeds.discover import SCRIPT, merge_testbed, parse_discovery
from tests.support import fake_sysfs, paths

DATA = paths.DATA / "cloudlab"
ROOT = paths.REPO


LOCAL = """\
# kept header
name: here
kind: local
nodes:
  - name: me
    address: localhost
launcher: {kind: local}
"""


# ---- the discovery script on sysfs trees laid out from real hosts (tests/support/fake_sysfs.py) ----


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


def test_local_node_discovery_writes_back(tmp_path: Path) -> None:
    path = tmp_path / "[" / "x][bold]testbed.yaml"  # markup in the path: printed as itself
    path.parent.mkdir()
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
    assert again.exit_code == 0 and f"{path}: nothing to change" in again.stdout
    assert "+" not in result.stdout or f"wrote {path}" in result.stdout
    assert yaml.safe_load(path.read_text()) == yaml.safe_load(text)


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
