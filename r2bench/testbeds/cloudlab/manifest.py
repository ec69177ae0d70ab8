"""A CloudLab (GENI v3) manifest RSpec -> a testbed (pure: XML text in, Testbed out).

What a manifest says, per node (`<node client_id=...>`): `<host name= ipv4=>` (the node's name in
the experiment and its control-network address), `<services><login authentication="ssh-keys"
hostname= port= username=>` (one per user of the project), and `<interface client_id=
component_id= mac_address=>` with `<ip address= netmask=>` for each experiment LAN the node is
on; `<link client_id=>` lists its members as `<interface_ref client_id=>`.

Which manifests: the portal returns today's manifests with `type="request"` and the request
schema, filled in (sliver ids, MACs, hosts, logins, an `emulab:portal` element naming the
experiment); older ones say `type="manifest"`. Both are read; a request RSpec that no aggregate
has filled in (no `sliver_id` on any node: what a profile prints) is refused. The hardware type
a node got is `emulab:vnode hardware_type=` (Emulab manifests have no `<hardware_type>`, which
is what was asked for). A remote blockstore (`sliver_type emulab-blockstore`) is a pseudo-node:
storage, its `login` a port of the storage host; it is skipped, with the LANs that reach it, and
the testbed's description says so.

What it does not say: GPUs, RDMA devices, kernel interface names, link layers. The testbed gets
placeholders for those (`gpus: 0`, netdev = the interface name CloudLab knows, kind eth) that
`r2bench doctor --discover` replaces with what the nodes report. The control network becomes a
NIC named `control` marked `management: true` (never faulted), with the host's IPv4 address, so
discovery can find its kernel name.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

from pydantic import ValidationError

from r2bench.config.errors import field_problems
from r2bench.config.testbed import (
    Launcher,
    LauncherKind,
    Nic,
    NicKind,
    Node,
    Paths,
    SshOptions,
    Testbed,
)
from r2bench.errors import InputError

GENI_V3 = "http://www.geni.net/resources/rspec/3"
BLOCKSTORE_SLIVER = "emulab-blockstore"
"""sliver_type of a remote blockstore pseudo-node (storage, not a machine to run on)."""
CONTROL_NIC = "control"
CONTROL_NETDEV_PLACEHOLDER = "control"
"""netdev written for the control NIC until discovery finds the real name."""
WORK_DIR = "/local/r2bench"
"""CloudLab nodes have a large local filesystem at /local (the root disk is small)."""

_IFNAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,14}$")
_NAME = re.compile(r"[^A-Za-z0-9_.-]+")


class ManifestError(InputError, ValueError):
    """The text is not a usable manifest; the message is one line for the user."""


@dataclass(frozen=True)
class Login:
    """One `<services><login>` of a node."""

    hostname: str
    port: int
    username: str


@dataclass(frozen=True)
class ManifestInterface:
    """One experiment interface of a node."""

    client_id: str
    component_id: str
    mac: str
    address: str | None
    lan: str | None


@dataclass(frozen=True)
class ManifestNode:
    """What the manifest says about one node."""

    client_id: str
    host_name: str | None
    host_ipv4: str | None
    hardware_type: str | None
    logins: tuple[Login, ...]
    interfaces: tuple[ManifestInterface, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class Manifest:
    """What a manifest says: the nodes to run on, the pseudo-nodes skipped (remote
    blockstores), and the experiment's name where the portal wrote it (`emulab:portal`)."""

    nodes: tuple[ManifestNode, ...]
    skipped: tuple[str, ...] = ()
    experiment: str | None = None


def _tag(element: ET.Element) -> str:
    return element.tag.rsplit("}", 1)[-1]


def _children(element: ET.Element, name: str) -> list[ET.Element]:
    """Direct children called `name` in any namespace (CloudLab mixes v3 and extensions)."""
    return [child for child in element if _tag(child) == name]


def _child(element: ET.Element, name: str) -> ET.Element | None:
    found = _children(element, name)
    return found[0] if found else None


def parse_xml(text: str) -> ET.Element:
    """The root element, or ManifestError for text that is not XML (malformed, truncated)."""
    if not text.strip():
        raise ManifestError("the manifest is empty")
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        line, column = exc.position
        reason = str(exc).split(":", 1)[0]
        hint = " (truncated?)" if "no element found" in str(exc) else ""
        raise ManifestError(
            f"not well-formed XML at line {line}, column {column + 1}: {reason}{hint}"
        ) from None
    if _tag(root) != "rspec":
        raise ManifestError(f"the root element is <{_tag(root)}>, not <rspec>")
    kind = root.get("type")
    where = "`geni-get manifest` on a node, or the portal's Manifest tab"
    if kind not in ("manifest", "request"):
        got = f'type="{kind}"' if kind else "no type attribute"
        raise ManifestError(
            f"this RSpec has {got}, not the manifest of a running experiment ({where})"
        )
    if kind == "request" and not any(n.get("sliver_id") for n in _children(root, "node")):
        raise ManifestError(
            "this is a request RSpec (what a profile prints: no sliver_id on any node), not the "
            f"manifest of a running experiment: give that ({where})"
        )
    return root


def _login(element: ET.Element, node: str) -> Login:
    hostname = element.get("hostname")
    username = element.get("username")
    if not hostname or not username:
        raise ManifestError(f"node {node}: a <login> without hostname or username")
    port_text = element.get("port", "22")
    if not (port_text.isascii() and port_text.isdigit()) or not 1 <= int(port_text) <= 65535:
        raise ManifestError(f"node {node}: login port {port_text!r} is not a port number")
    return Login(hostname, int(port_text), username)


def _lan_of(root: ET.Element) -> dict[str, str]:
    """interface client_id -> link client_id."""
    member: dict[str, str] = {}
    for link in _children(root, "link"):
        name = link.get("client_id")
        if not name:
            raise ManifestError("a <link> without client_id")
        for ref in _children(link, "interface_ref"):
            if ref.get("client_id"):
                member[ref.get("client_id", "")] = name
    return member


def _interface(element: ET.Element, node: str, lans: dict[str, str]) -> ManifestInterface:
    client_id = element.get("client_id")
    if not client_id:
        raise ManifestError(f"node {node}: an <interface> without client_id")
    ips = [ip for ip in _children(element, "ip") if ip.get("type", "ipv4") == "ipv4"]
    return ManifestInterface(
        client_id=client_id,
        component_id=element.get("component_id", ""),
        mac=element.get("mac_address", ""),
        address=ips[0].get("address") if ips else None,
        lan=lans.get(client_id),
    )


def _is_blockstore(node: ET.Element) -> bool:
    sliver = _child(node, "sliver_type")
    return sliver is not None and sliver.get("name") == BLOCKSTORE_SLIVER


def _hardware_type(node: ET.Element) -> str | None:
    """The type the node got (`emulab:vnode hardware_type`), else the one asked for."""
    vnode = _child(node, "vnode")
    if vnode is not None and vnode.get("hardware_type"):
        return vnode.get("hardware_type")
    hardware = _child(node, "hardware_type")
    return hardware.get("name") if hardware is not None else None


def parse_rspec(text: str) -> Manifest:
    """The manifest's nodes in document order (blockstores skipped), and what else it says."""
    root = parse_xml(text)
    lans = _lan_of(root)
    blockstores = [e for e in _children(root, "node") if _is_blockstore(e)]
    skipped = [e.get("client_id") or "?" for e in blockstores]
    # The LANs to a blockstore carry its storage traffic: never a data NIC.
    storage = {
        lans[i.get("client_id", "")]
        for e in blockstores
        for i in _children(e, "interface")
        if i.get("client_id", "") in lans
    }
    nodes = []
    for element in _children(root, "node"):
        name = element.get("client_id")
        if not name:
            raise ManifestError("a <node> without client_id")
        if _is_blockstore(element):
            continue
        host = _child(element, "host")
        services = _child(element, "services")
        # `is not None`, not truth: an Element's truth is its child count, deprecated in 3.12
        found = _children(services, "login") if services is not None else []
        logins = [_login(e, name) for e in found]
        if not logins:
            raise ManifestError(
                f"node {name} has no <services><login>: the experiment is not ready yet, "
                "or this is not a manifest"
            )
        interfaces = [_interface(e, name, lans) for e in _children(element, "interface")]
        nodes.append(
            ManifestNode(
                client_id=name,
                host_name=host.get("name") if host is not None else None,
                host_ipv4=host.get("ipv4") if host is not None else None,
                hardware_type=_hardware_type(element),
                logins=tuple(logins),
                interfaces=tuple(i for i in interfaces if i.lan not in storage),
            )
        )
    if not nodes and skipped:
        raise ManifestError(f"no node to log in to: only remote blockstores ({', '.join(skipped)})")
    if not nodes:
        raise ManifestError("the manifest has no <node>")
    portal = _child(root, "portal")
    experiment = portal.get("experiment") if portal is not None else None
    return Manifest(tuple(nodes), tuple(skipped), experiment or None)


def parse_manifest(text: str) -> list[ManifestNode]:
    """Every node of a manifest to run on, in document order."""
    return list(parse_rspec(text).nodes)


def _safe_name(text: str) -> str:
    name = _NAME.sub("-", text).strip("-.")[:63]
    return name if name and name[0].isalnum() else f"n{name}"[:63]


def _netdev_guess(iface: ManifestInterface) -> str:
    """CloudLab's name of the interface (`...:eth2` at the end of component_id) when it looks
    like a kernel name, else the interface's own short name; discovery fixes it."""
    tail = iface.component_id.rsplit(":", 1)[-1] if ":" in iface.component_id else ""
    # A VM's interface is named after its host's loopback (`pc2:lo0`): no name inside the VM.
    if tail and _IFNAME.match(tail) and not tail.startswith("lo"):
        return tail
    short = iface.client_id.rsplit(":", 1)[-1]
    return short[:15] if _IFNAME.match(short[:15]) else "eth0"


def choose_login(node: ManifestNode, user: str | None) -> Login:
    """The login of `user` (ManifestError when the node has none), else the first one listed."""
    if user is None:
        return node.logins[0]
    for login in node.logins:
        if login.username == user:
            return login
    users = ", ".join(sorted({login.username for login in node.logins}))
    raise ManifestError(f"node {node.client_id} has no login for user {user!r} (it has: {users})")


def _nics(node: ManifestNode) -> list[Nic]:
    nics = [
        Nic(
            name=CONTROL_NIC,
            kind=NicKind.ETH,
            netdev=CONTROL_NETDEV_PLACEHOLDER,
            address=node.host_ipv4,
            management=True,
        )
    ]
    for iface in node.interfaces:
        name = _safe_name(iface.lan or iface.client_id.rsplit(":", 1)[-1])
        if name == CONTROL_NIC or any(nic.name == name for nic in nics):
            name = _safe_name(iface.client_id)
        nics.append(Nic(name=name, kind=NicKind.ETH, netdev=_netdev_guess(iface),
                        address=iface.address))  # fmt: skip
    return nics


def experiment_name(nodes: list[ManifestNode], portal: str | None = None) -> str:
    """The experiment's name: the portal's (`emulab:portal experiment=`), else from host names
    (`node0.<experiment>.<project>.<cluster>`)."""
    if portal:
        return _safe_name(portal)
    labels = {
        n.host_name.split(".")[1] for n in nodes if n.host_name and n.host_name.count(".") > 2
    }
    return _safe_name(labels.pop()) if len(labels) == 1 else "cloudlab"


def manifest_testbed(text: str, name: str | None = None, user: str | None = None) -> Testbed:
    """The testbed a manifest describes (placeholders where only the nodes know)."""
    manifest = parse_rspec(text)
    try:
        return _testbed(manifest, name, user)
    except ValidationError as exc:
        first = field_problems(exc)[0]
        raise ManifestError(f"the manifest gives an invalid testbed: {first.describe()}") from None


def _testbed(manifest: Manifest, name: str | None, user: str | None) -> Testbed:
    nodes = list(manifest.nodes)
    models = []
    for node in nodes:
        login = choose_login(node, user)
        models.append(
            Node(
                name=_safe_name(node.client_id),
                address=login.hostname,
                ssh=SshOptions(user=login.username, port=login.port),
                nics=_nics(node),
            )
        )
    types = sorted({n.hardware_type for n in nodes if n.hardware_type})
    description = (
        f"CloudLab experiment, {len(nodes)} node(s)"
        + (f" of type {', '.join(types)}" if types else "")
        + "; GPUs, RDMA devices and interface names: run `r2bench doctor --discover`"
        + "".join(f"; skipped {s} (remote blockstore)" for s in manifest.skipped)
    )
    return Testbed(
        name=_safe_name(name) if name else experiment_name(nodes, manifest.experiment),
        description=description,
        nodes=models,
        launcher=Launcher(kind=LauncherKind.MPIRUN),
        paths=Paths(work_dir=WORK_DIR),
    )
