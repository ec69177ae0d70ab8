"""Interlocks on interfaces, not on NIC entry names (pure).

A fault may never take down the path the controller, MPI or NCCL use to reach a node. The NIC
entry a fault names is resolved to the node's real interface (its netdev, and for an RDMA NIC
its device port and that port's netdev when the node reported one) and refused when that
interface is the management interface under any name, carries the node's ssh/testbed address,
holds the default route, carries a live ssh session, or is a bootstrap interface: one the
launcher's settings pin its own traffic to (`LauncherSpec.bootstrap`: Open MPI's if_include
settings for mpirun), or NCCL's.

The same decision is taken again on the node by the injectors (`r2b_guard_interface` in
`injectors/lib.sh`), with the interfaces named here passed as `--protect-if`.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from r2bench.config.testbed import Nic, Node, Testbed, TestbedKind
from r2bench.launch.base import BootstrapSetting
from r2bench.launch.registry import launcher_for


@dataclass(frozen=True)
class InterfaceFacts:
    """What a node itself says about its interfaces (from a probe), beyond the testbed file."""

    default_route: frozenset[str] = frozenset()
    """Interfaces that hold a default route (IPv4 or IPv6)."""
    addresses: Mapping[str, frozenset[str]] = field(default_factory=dict)
    """Addresses on each interface."""
    rdma_netdevs: Mapping[str, str] = field(default_factory=dict)
    """`mlx5_1/1` (RDMA device/port) -> the netdev of that port."""
    ssh_interfaces: frozenset[str] = frozenset()
    """Interfaces that carry a live ssh session."""


@dataclass(frozen=True)
class Refusal:
    """Why a fault target is refused: what it is, which setting protects it, what to do."""

    node: str
    target: str
    interface: str
    message: str
    source: str
    """The setting that makes the interface protected, as a located name (e.g.
    `nodes[1].nics[0] (management: true)`, `env.NCCL_SOCKET_IFNAME`)."""
    hint: str = "faulting it would cut off the controller or the job's bootstrap; pick a data NIC"

    def render(self) -> str:
        """One line: `refused: ... (source; hint)`."""
        return f"{self.message} (set by {self.source}; {self.hint})"


@dataclass(frozen=True)
class _Target:
    name: str
    netdevs: frozenset[str]
    rdma_port: tuple[str, int] | None
    address: str | None
    nic: Nic | None


def _target(node: Node, target: Nic | str, facts: InterfaceFacts | None) -> _Target:
    if isinstance(target, str):
        nic = next((n for n in node.nics if n.netdev == target), None)
        netdevs = {target}
        port = (nic.rdma_device, nic.port) if nic and nic.rdma_device else None
        return _Target(target, frozenset(netdevs), port, nic.address if nic else None, None)
    netdevs = {target.netdev} if target.netdev else set()
    port = (target.rdma_device, target.port) if target.rdma_device else None
    if port and facts is not None and (dev := facts.rdma_netdevs.get(f"{port[0]}/{port[1]}")):
        netdevs.add(dev)
    return _Target(target.name, frozenset(netdevs), port, target.address, target)


def _nic_netdevs(nic: Nic, facts: InterfaceFacts | None) -> set[str]:
    names = {nic.netdev} if nic.netdev else set()
    if nic.rdma_device and facts is not None:
        dev = facts.rdma_netdevs.get(f"{nic.rdma_device}/{nic.port}")
        if dev:
            names.add(dev)
    return names


def _if_list_matches(value: str, names: frozenset[str], address: str | None) -> str | None:
    """The first interface of `names` an Open MPI if_include list (names or subnets) selects."""
    for item in (part.strip() for part in value.split(",")):
        if not item:
            continue
        if "/" in item:
            try:
                network = ipaddress.ip_network(item, strict=False)
                if address and ipaddress.ip_address(address) in network:
                    return next(iter(sorted(names)), address)
            except ValueError:
                continue
        elif item in names:
            return item
    return None


def nccl_socket_ifname_matches(value: str, interface: str) -> bool:
    """Whether NCCL_SOCKET_IFNAME selects `interface`: a comma list of prefixes, `=` for exact
    names; a list starting with `^` excludes (it selects nothing by itself)."""
    value = value.strip()
    if not value or value.startswith("^"):
        return False
    exact = value.startswith("=")
    items = [item.strip() for item in value.lstrip("=").split(",") if item.strip()]
    return any(interface == item if exact else interface.startswith(item) for item in items)


def _management_reasons(
    testbed: Testbed, node: Node, target: _Target, facts: InterfaceFacts | None
) -> Iterator[tuple[str, str, str]]:
    """(interface, message, source) for every reason `target` is the management path."""
    index = next(i for i, n in enumerate(testbed.nodes) if n.name == node.name)
    where = f"nodes[{index}]"
    for i, nic in enumerate(node.nics):
        if not nic.management:
            continue
        source = f"{where}.nics[{i}] (management: true)"
        if target.nic is not None and nic.name == target.nic.name:
            yield (
                next(iter(sorted(target.netdevs)), target.name),
                f"refused: '{nic.name}' is the management interface of '{node.name}'",
                source,
            )
            continue
        shared = target.netdevs & _nic_netdevs(nic, facts)
        if shared:
            interface = sorted(shared)[0]
            yield (
                interface,
                f"refused: '{target.name}' is interface {interface}, the management interface"
                f" of '{node.name}' (NIC '{nic.name}')",
                source,
            )
        elif target.rdma_port and target.rdma_port == (nic.rdma_device, nic.port):
            dev, port = target.rdma_port
            yield (
                f"{dev}/{port}",
                f"refused: '{target.name}' is on the same port as management NIC '{nic.name}'"
                f" of '{node.name}' ({dev} port {port})",
                source,
            )
        elif target.address and nic.address and target.address == nic.address:
            yield (
                target.address,
                f"refused: '{target.name}' carries {target.address}, the address of management"
                f" NIC '{nic.name}' of '{node.name}'",
                source,
            )


def _address_reasons(
    testbed: Testbed, node: Node, target: _Target, facts: InterfaceFacts | None
) -> Iterator[tuple[str, str, str]]:
    index = next(i for i, n in enumerate(testbed.nodes) if n.name == node.name)
    if target.address and target.address == node.address:
        yield (
            next(iter(sorted(target.netdevs)), target.name),
            f"refused: '{target.name}' carries {node.name}'s address {node.address}"
            " (the controller's ssh path)",
            f"nodes[{index}].address",
        )
    if facts is None:
        return
    for interface in sorted(target.netdevs):
        if node.address in facts.addresses.get(interface, frozenset()):
            yield (
                interface,
                f"refused: '{target.name}' (interface {interface}) carries {node.name}'s address"
                f" {node.address} (the controller's ssh path)",
                f"nodes[{index}].address",
            )
        if interface in facts.default_route:
            yield (
                interface,
                f"refused: '{target.name}' (interface {interface}) holds {node.name}'s default"
                " route",
                f"{node.name}'s routing table",
            )
        if interface in facts.ssh_interfaces:
            yield (
                interface,
                f"refused: '{target.name}' (interface {interface}) carries a live ssh session"
                f" to {node.name}",
                f"{node.name}'s open ssh connections",
            )


def nccl_bootstrap_candidates(testbed: Testbed, node: Node, value: str) -> list[str] | None:
    """The node's interfaces NCCL's bootstrap may take under NCCL_SOCKET_IFNAME=`value`, or None
    when any interface it selects may be the one.

    NCCL's bootstrap takes the FIRST interface the variable selects in the host's interface
    order, which r2bench knows only on a virtual testbed: it creates the NICs in the order the
    testbed file lists them. Elsewhere every selected interface is protected."""
    if testbed.kind is not TestbedKind.VIRTUAL:
        return None
    selected = [
        n.netdev for n in node.nics if n.netdev and nccl_socket_ifname_matches(value, n.netdev)
    ]
    return selected[:1]


def _launcher_bootstrap(testbed: Testbed, env: Mapping[str, str]) -> list[BootstrapSetting]:
    return launcher_for(testbed.launcher.kind).bootstrap(testbed, env)


def _bootstrap_reasons(
    testbed: Testbed, node: Node, target: _Target, env: Mapping[str, str]
) -> Iterator[tuple[str, str, str]]:
    for setting in _launcher_bootstrap(testbed, env):
        if setting.exact and setting.value in target.netdevs:
            yield (
                setting.value,
                f"refused: '{target.name}' is interface {setting.value}, the {setting.owner}"
                " bootstrap interface",
                setting.source,
            )
        elif not setting.exact and (
            hit := _if_list_matches(setting.value, target.netdevs, target.address)
        ):
            name = setting.source.rsplit(".", 1)[-1]
            yield (
                hit,
                f"refused: '{target.name}' is interface {hit}, which {name}={setting.value}"
                f" gives {setting.owner}",
                setting.source,
            )
    value = env.get("NCCL_SOCKET_IFNAME")
    candidates = nccl_bootstrap_candidates(testbed, node, value) if value else None
    for interface in sorted(target.netdevs):
        if candidates is not None and interface not in candidates:
            continue
        if value and nccl_socket_ifname_matches(value, interface):
            yield (
                interface,
                f"refused: '{target.name}' is interface {interface}, which NCCL_SOCKET_IFNAME="
                f"{value} gives NCCL's bootstrap",
                "env.NCCL_SOCKET_IFNAME",
            )


def interface_refusal(
    testbed: Testbed,
    node: Node,
    target: Nic | str,
    facts: InterfaceFacts | None = None,
    env: Mapping[str, str] | None = None,
) -> Refusal | None:
    """Why faulting `target` (a NIC entry of `node`, or an interface name) would cut off the
    controller, MPI or NCCL; None when it is safe. `facts` is what the node reported about its
    interfaces (None: the testbed file alone); `env` is the run's environment."""
    resolved = _target(node, target, facts)
    reasons = [
        *_management_reasons(testbed, node, resolved, facts),
        *_address_reasons(testbed, node, resolved, facts),
        *_bootstrap_reasons(testbed, node, resolved, env or {}),
    ]
    if not reasons:
        return None
    interface, message, source = reasons[0]
    return Refusal(node.name, resolved.name, interface, message, source)


def protected_interfaces(
    testbed: Testbed,
    node: Node,
    facts: InterfaceFacts | None = None,
    env: Mapping[str, str] | None = None,
) -> list[str]:
    """Interface names of `node` the injectors must refuse, whatever a fault names: the
    management NICs' netdevs, the interfaces the launcher's bootstrap settings name (a subnet
    in an if_include list names none), and netdevs of NIC entries that are refused for any
    other reason."""
    names: set[str] = set()
    for nic in node.nics:
        if nic.management:
            names |= _nic_netdevs(nic, facts)
    environment = env or {}
    for setting in _launcher_bootstrap(testbed, environment):
        if setting.exact:
            names.add(setting.value)
        else:
            names |= {item.strip() for item in setting.value.split(",") if _plain_if(item)}
    for nic in node.nics:
        if interface_refusal(testbed, node, nic, facts, environment) is not None:
            names |= _nic_netdevs(nic, facts)
    return sorted(names)


def _plain_if(item: str) -> bool:
    item = item.strip()
    return bool(item) and "/" not in item and not item.startswith("^")
