"""The interface interlock resolves a fault target to the node's real interface and refuses the
management path under any name (pure)."""

from __future__ import annotations

from r2bench.config.testbed import Launcher, Nic, NicKind, Node, Testbed
from r2bench.config.testbed import TestbedKind as Kind
from r2bench.faults.interlock import (
    InterfaceFacts,
    interface_refusal,
    nccl_socket_ifname_matches,
    protected_interfaces,
)

MGMT = Nic(name="eno1", kind=NicKind.ETH, netdev="eno1", address="10.0.0.2", management=True)
IB1 = Nic(name="mlx5_1", kind=NicKind.IB, rdma_device="mlx5_1", port=1)
ETH1 = Nic(name="eth1", kind=NicKind.ETH, netdev="eth1", address="10.1.0.2")


def bed(*nics: Nic, **launcher: object) -> tuple[Testbed, Node]:
    node = Node(name="node1", address="10.0.0.2", nics=[MGMT, *nics])
    other = Node(name="node0", address="10.0.0.1", nics=[MGMT])
    return Testbed(name="t", nodes=[other, node], launcher=Launcher(**launcher)), node  # type: ignore[arg-type]


def test_a_data_entry_naming_the_management_netdev_is_refused() -> None:
    alias = Nic(name="data9", kind=NicKind.ETH, netdev="eno1")
    testbed, node = bed(alias)
    refusal = interface_refusal(testbed, node, alias)
    assert refusal is not None and refusal.interface == "eno1"
    assert refusal.source == "nodes[1].nics[0] (management: true)"
    assert "the management interface of 'node1'" in refusal.message


def test_an_interface_name_is_resolved_too() -> None:
    testbed, node = bed(ETH1)
    assert interface_refusal(testbed, node, "eno1") is not None
    assert interface_refusal(testbed, node, "eth1") is None


def test_the_ssh_address_on_an_unmarked_nic_is_refused() -> None:
    carrier = Nic(name="data0", kind=NicKind.ETH, netdev="ens2", address="10.0.0.2")
    testbed, node = bed(carrier)
    refusal = interface_refusal(testbed, node, carrier)
    assert refusal is not None and "address" in refusal.message


def test_the_hca_netdev_reported_by_the_node_is_checked() -> None:
    testbed, node = bed(IB1)
    assert interface_refusal(testbed, node, IB1) is None
    facts = InterfaceFacts(rdma_netdevs={"mlx5_1/1": "ib1"}, default_route=frozenset({"ib1"}))
    refusal = interface_refusal(testbed, node, IB1, facts)
    assert refusal is not None and refusal.interface == "ib1" and "default" in refusal.message


def test_node_facts_default_route_ssh_session_and_addresses() -> None:
    testbed, node = bed(ETH1)
    for facts, word in (
        (InterfaceFacts(default_route=frozenset({"eth1"})), "default route"),
        (InterfaceFacts(ssh_interfaces=frozenset({"eth1"})), "ssh session"),
        (InterfaceFacts(addresses={"eth1": frozenset({"10.0.0.2"})}), "address"),
    ):
        refusal = interface_refusal(testbed, node, ETH1, facts)
        assert refusal is not None and word in refusal.message, facts


def test_bootstrap_settings_protect_their_interfaces() -> None:
    testbed, node = bed(ETH1, bootstrap_interface="eth1")
    assert interface_refusal(testbed, node, ETH1) is not None
    testbed, node = bed(ETH1, mca={"oob_tcp_if_include": "10.1.0.0/16"})
    refusal = interface_refusal(testbed, node, ETH1)
    assert refusal is not None and refusal.source == "launcher.mca.oob_tcp_if_include"
    testbed, node = bed(ETH1)
    env = {"NCCL_SOCKET_IFNAME": "=eth1"}
    assert interface_refusal(testbed, node, ETH1, env=env) is not None
    assert interface_refusal(testbed, node, ETH1, env={"NCCL_SOCKET_IFNAME": "^eth"}) is None


def test_nccl_socket_ifname_grammar() -> None:
    assert nccl_socket_ifname_matches("eth", "eth1")
    assert nccl_socket_ifname_matches("ib,eth", "eth1")
    assert not nccl_socket_ifname_matches("=eth", "eth1")
    assert nccl_socket_ifname_matches("=eth1", "eth1")
    assert not nccl_socket_ifname_matches("^eth", "eth1")
    assert not nccl_socket_ifname_matches("", "eth1")


def test_the_node_side_guard_protects_the_bootstrap_and_mpi_interfaces() -> None:
    """What the injectors get as --protect-if: the management netdev, a bootstrap interface
    that is not the management one, Open MPI's if_include names, and any refused entry's."""
    alias = Nic(name="data9", kind=NicKind.ETH, netdev="ens9")
    testbed, node = bed(ETH1, alias, bootstrap_interface="ens9", mca={"btl_tcp_if_include": "ens7"})
    protected = protected_interfaces(testbed, node)
    assert protected == ["eno1", "ens7", "ens9"]
    assert "eth1" not in protected  # an ordinary data NIC stays faultable


def test_on_a_virtual_testbed_only_the_first_selected_nic_is_nccls_bootstrap() -> None:
    """NCCL's bootstrap takes the first interface NCCL_SOCKET_IFNAME selects in the host's
    order; a virtual testbed creates its NICs in the listed order, so the others can be
    faulted; on other testbeds every selected interface stays protected."""
    data = [Nic(name=f"nic{i}", kind=NicKind.ETH, netdev=f"nic{i}") for i in range(4)]
    testbed, node = bed(*data)
    env = {"NCCL_SOCKET_IFNAME": "nic0,nic1,nic2,nic3"}
    assert interface_refusal(testbed, node, data[3], env=env) is not None
    virtual = testbed.model_copy(update={"kind": Kind.VIRTUAL})
    assert interface_refusal(virtual, node, data[3], env=env) is None
    refusal = interface_refusal(virtual, node, data[0], env=env)
    assert refusal is not None and "gives NCCL's bootstrap" in refusal.message
