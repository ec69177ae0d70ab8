"""`r2bench cloudlab testbed`: manifests written from CloudLab's schema -> testbed files.

This module holds its pure tests; the same subject's other tests:
tests/integration/test_cloudlab_manifest.py (those with real processes).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from r2bench.config.testbed import NicKind
from r2bench.testbeds.cloudlab.manifest import ManifestError, manifest_testbed, parse_rspec
from tests.support import paths
from tests.support.cli_runner import invoke_as_main

DATA = paths.DATA / "cloudlab"


def test_two_nodes_one_lan() -> None:
    testbed = manifest_testbed((DATA / "two-nodes-one-lan.xml").read_text())
    assert testbed.name == "r2b-exp"
    assert [n.name for n in testbed.nodes] == ["node0", "node1"]
    node0 = testbed.nodes[0]
    assert node0.address == "d7525-10s10301.wisc.cloudlab.us"
    assert (node0.ssh.user, node0.ssh.port) == ("alice", 22)
    control, rail0 = node0.nics
    assert control.management and control.address == "128.105.145.10"
    assert control.kind is NicKind.ETH
    assert (rail0.name, rail0.netdev, rail0.address) == ("rail0", "eth2", "10.10.0.1")
    assert not rail0.management
    assert node0.data_nics == [rail0]


def test_user_choice() -> None:
    text = (DATA / "two-nodes-one-lan.xml").read_text()
    assert manifest_testbed(text, user="bob").nodes[1].ssh.user == "bob"
    with pytest.raises(ManifestError, match=r"no login for user 'eve' \(it has: alice, bob\)"):
        manifest_testbed(text, user="eve")


def test_four_rails_and_port() -> None:
    four = manifest_testbed((DATA / "two-nodes-four-rails.xml").read_text(), name="paper")
    assert four.name == "paper"
    for i, node in enumerate(four.nodes):
        assert [n.name for n in node.data_nics] == ["rail0", "rail1", "rail2", "rail3"]
        assert [n.address for n in node.data_nics] == [f"10.{10 + k}.0.{i + 1}" for k in range(4)]
    one = manifest_testbed((DATA / "one-node-no-lan.xml").read_text())
    assert one.nodes[0].ssh.port == 2222 and one.nodes[0].data_nics == []


def test_every_truncation_fails_cleanly() -> None:
    text = (DATA / "two-nodes-one-lan.xml").read_text()
    for cut in range(0, len(text) - 10, 37):
        with pytest.raises(ManifestError):
            manifest_testbed(text[:cut])


def test_current_portal_manifest_is_a_request_typed_rspec_with_slivers() -> None:
    """The portal returns `type="request"` (request schema) for a running experiment, with
    sliver ids, logins and hosts: accepted; its `emulab:portal` names the experiment."""
    testbed = manifest_testbed((DATA / "real-utah-2024-m510.xml").read_text())
    assert testbed.name == "cluster-miner"
    assert [n.name for n in testbed.nodes] == ["node0", "node1", "node2"]
    node0 = testbed.nodes[0]
    assert (node0.address, node0.ssh.user) == ("ms1041.utah.cloudlab.us", "probirr")
    assert [(n.name, n.netdev, n.address) for n in node0.data_nics] == [
        ("link-1", "eth1", "10.10.1.1")
    ]
    assert "of type m510" in testbed.description


def test_hardware_type_comes_from_the_vnode() -> None:
    """Emulab manifests carry no <hardware_type>: the allocated type is `emulab:vnode
    hardware_type`; where both exist the vnode's (what was allocated) wins."""
    manifest = parse_rspec((DATA / "real-emulab-2025-blockstore.xml").read_text())
    assert {n.client_id: n.hardware_type for n in manifest.nodes} == {
        "nfs": "d430",
        "node1": "d710",
        "node2": "d710",
    }
    vms = parse_rspec((DATA / "real-geni-2022-vms.xml").read_text())
    assert {n.hardware_type for n in vms.nodes} == {"pcvm"}


def test_remote_blockstore_is_skipped_with_a_note() -> None:
    """A remote blockstore is a pseudo-node (storage, its `login` a console port of the
    storage host): not a node of the testbed, and the LAN to it is storage, not a data NIC."""
    text = (DATA / "real-emulab-2025-blockstore.xml").read_text()
    manifest = parse_rspec(text)
    assert manifest.skipped == ("dsnode",)
    testbed = manifest_testbed(text)
    assert testbed.name == "Exp-n40"
    assert [n.name for n in testbed.nodes] == ["nfs", "node1", "node2"]
    nfs = testbed.nodes[0]
    assert [n.name for n in nfs.data_nics] == ["nfsLan"]
    assert "dsnode (remote blockstore)" in testbed.description
    assert "of type d430, d710" in testbed.description


def test_vm_interface_on_the_hosts_loopback_is_no_netdev_guess() -> None:
    """A GENI VM's interface component is the physical host's `lo0`: not a name inside the VM;
    the placeholder is the interface's own name until discovery finds it by address."""
    testbed = manifest_testbed((DATA / "real-geni-2022-vms.xml").read_text())
    assert testbed.name == "CS655FinalPJNew"
    server = testbed.nodes[0]
    assert [(n.netdev, n.address) for n in server.data_nics] == [("interface-0", "10.10.1.1")]


def test_only_manifest_and_instantiated_request_types() -> None:
    text = (DATA / "two-nodes-one-lan.xml").read_text()
    as_request = text.replace('type="manifest"', 'type="request"')
    assert [n.name for n in manifest_testbed(as_request).nodes] == ["node0", "node1"]
    with pytest.raises(ManifestError, match='type="advertisement"'):
        manifest_testbed(text.replace('type="manifest"', 'type="advertisement"'))


def test_only_a_blockstore_is_no_testbed() -> None:
    text = (DATA / "real-emulab-2025-blockstore.xml").read_text()
    root = ET.fromstring(text)
    for node in root.findall("{http://www.geni.net/resources/rspec/3}node"):
        if node.get("client_id") != "dsnode":
            root.remove(node)
    with pytest.raises(ManifestError, match=r"no node to log in to.*\(dsnode\)"):
        manifest_testbed(ET.tostring(root, encoding="unicode"))


def test_blockstore_lan_found_by_its_interfaces_not_their_names() -> None:
    """Interface ids need not start with the node's name (GENI tools write `interface-0`)."""
    text = (DATA / "real-emulab-2025-blockstore.xml").read_text().replace("dsnode:if0", "bs-0")
    nfs = manifest_testbed(text).nodes[0]
    assert [n.name for n in nfs.data_nics] == ["nfsLan"]


# ---- manifests are read with a size cap ----------------------------------------------------


def test_a_huge_manifest_on_stdin_is_refused_fast() -> None:
    result = invoke_as_main("cloudlab", "testbed", "-", stdin="<" * (40 * 1024 * 1024))
    assert result.exit_code == 2
    assert "larger than" in result.stderr and "Traceback" not in result.output


def test_a_manifest_that_is_a_device_is_refused_unread() -> None:
    result = invoke_as_main("cloudlab", "testbed", "/dev/zero")
    assert result.exit_code == 2
    assert "not a regular file" in result.stderr
