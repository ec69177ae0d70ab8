"""`r2bench doctor --discover`: fill a testbed in with what only the nodes know.

One bash script per node (one round trip) prints tagged lines (the netdev of an RDMA port: see
`SCRIPT`'s note):
`gpu <compute capability>`, `rdma <device> <port> <link layer> <netdev or ->`,
`net <netdev> <physical 0|1> <ipv4,...>`, `route <netdev of the default route>`.
`merge_node` (pure) then sets the node's GPUs and architecture, fixes each listed NIC's netdev
(found by its address, else by name), RDMA device, port and kind (InfiniBand -> ib, Ethernet
with RDMA -> roce, no RDMA -> eth), names NICs that carry a placeholder name (`railN` from a
manifest) after their RDMA device, adds RDMA ports the file does not list, and marks the
management NIC (the one the file marks, else the default route's) and the launcher's bootstrap
interface. `r2bench.commands.doctor.discover_command` shows the diff and rewrites the file
only when something changed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from r2bench.config.testbed import Nic, NicKind, Testbed
from r2bench.config.testbed import Node as NodeModel
from r2bench.nodes import Node, NodeError, NodePool

DISCOVER_TIMEOUT_S = 60.0
PLACEHOLDER = re.compile(r"^rail\d+$")
"""NIC names a manifest gives (one per LAN); discovery renames them after the hardware."""

SCRIPT = r"""
S=${R2B_SYSFS:-/sys}
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | tr -d ' .' | sed 's/^/gpu /'
fi
for d in "$S"/class/infiniband/*; do
  [ -d "$d/ports" ] || continue
  for p in "$d"/ports/*; do
    n=${p##*/}
    ll=$(cat "$p/link_layer" 2>/dev/null || echo unknown)
    nd=$(cat "$p/gid_attrs/ndevs/0" 2>/dev/null)
    if [ -z "$nd" ]; then
      for c in "$d"/device/net/*; do
        [ -e "$c" ] || continue
        # before Linux 3.15 (no dev_port) IPoIB numbered its port in dev_id (0x0, 0x1)
        if [ -e "$c/dev_port" ]; then dp=$(cat "$c/dev_port" 2>/dev/null)
        else dp=$(printf '%d' "$(cat "$c/dev_id" 2>/dev/null)" 2>/dev/null) || dp=0; fi
        [ "$dp" = "$((n - 1))" ] || continue
        t=$(cat "$c/type" 2>/dev/null)
        if [ "$ll" = InfiniBand ] && [ "$t" != 32 ]; then continue; fi
        if [ "$ll" = Ethernet ] && [ "$t" = 32 ]; then continue; fi
        nd=${c##*/}
        break
      done
    fi
    echo "rdma ${d##*/} $n $ll ${nd:--}"
  done
done
for n in "$S"/class/net/*; do
  name=${n##*/}; [ "$name" = lo ] && continue
  [ -d "$n" ] || continue  # an interface is a folder (not bonding_masters, a file)
  phys=0; [ -e "$n/device" ] && phys=1
  addrs=$(ip -o -4 addr show dev "$name" 2>/dev/null | awk '{split($4, a, "/"); print a[1]}' | paste -sd, -)
  echo "net $name $phys ${addrs:--}"
done
ip route show default 2>/dev/null | awk '{for (i = 1; i < NF; i++) if ($i == "dev") print "route", $(i + 1)}' | head -n 1
"""
"""Each RDMA port's netdev: the RoCE GID table's (`gid_attrs/ndevs/0`, the bond master on a
LAG), else the PCI function's netdev whose `dev_port` is the port's (ports count from 1,
`dev_port` from 0; `dev_id` on kernels before 3.15, which have no `dev_port`) and whose type
fits the link layer (32 IPoIB for InfiniBand, Ethernet otherwise): a dual-port HCA's second
port gets its own netdev, and an IB port without IPoIB gets none (`-`). R2B_SYSFS (default /sys) is where sysfs is."""


@dataclass(frozen=True)
class RdmaPort:
    device: str
    port: int
    link_layer: str
    netdev: str | None


@dataclass
class Discovered:
    """What one node reported."""

    gpu_archs: list[str] = field(default_factory=list)
    rdma: list[RdmaPort] = field(default_factory=list)
    netdevs: dict[str, tuple[bool, list[str]]] = field(default_factory=dict)
    default_route: str | None = None

    def netdev_with(self, address: str) -> str | None:
        return next((n for n, (_, addrs) in self.netdevs.items() if address in addrs), None)

    def rdma_of(self, netdev: str | None) -> RdmaPort | None:
        return next((r for r in self.rdma if netdev and r.netdev == netdev), None)


def parse_discovery(text: str) -> Discovered:
    """The script's output, parsed; unknown lines are ignored."""
    found = Discovered()
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "gpu" and _ascii_digits(parts[1]):
            found.gpu_archs.append(parts[1])
        elif len(parts) == 5 and parts[0] == "rdma" and _ascii_digits(parts[2]):
            netdev = None if parts[4] == "-" else parts[4]
            found.rdma.append(RdmaPort(parts[1], int(parts[2]), parts[3], netdev))
        elif len(parts) == 4 and parts[0] == "net":
            addrs = [] if parts[3] == "-" else parts[3].split(",")
            found.netdevs[parts[1]] = (parts[2] == "1", addrs)
        elif len(parts) == 2 and parts[0] == "route":
            found.default_route = parts[1]
    return found


def _kind(port: RdmaPort | None) -> NicKind:
    if port is None:
        return NicKind.ETH
    return NicKind.IB if port.link_layer == "InfiniBand" else NicKind.ROCE


def _port_name(port: RdmaPort) -> str:
    return port.device if port.port == 1 else f"{port.device}-p{port.port}"


def _update_nic(nic: Nic, found: Discovered) -> Nic:
    netdev = (found.netdev_with(nic.address) if nic.address else None) or nic.netdev
    if netdev not in found.netdevs:
        own = (nic.rdma_device, nic.port)
        port = next((r for r in found.rdma if (r.device, r.port) == own), None)
        # the port's own netdev, none for an IB port without IPoIB; a name the node does not
        # have is kept only where no RDMA port tells otherwise (a manifest's guess)
        netdev = port.netdev if port else nic.netdev
    port = found.rdma_of(netdev) or next(
        (r for r in found.rdma if r.device == nic.rdma_device and r.port == nic.port), None
    )
    name = nic.name
    if PLACEHOLDER.match(name) and (port or netdev in found.netdevs):
        name = _port_name(port) if port else str(netdev)
    update: dict[str, object] = {"name": name, "netdev": netdev, "kind": _kind(port)}
    if port is not None:
        update.update(rdma_device=port.device, port=port.port)
    return nic.model_copy(update=update)


def merge_node(node: NodeModel, found: Discovered) -> NodeModel:
    """The node with the discovered facts filled in (pure)."""
    nics = [_update_nic(nic, found) for nic in node.nics]
    covered = {(n.rdma_device, n.port) for n in nics} | {(None, 0)}
    used_names = {n.name for n in nics}
    for port in found.rdma:
        if (port.device, port.port) in covered or _port_name(port) in used_names:
            continue
        if _kind(port) is not NicKind.IB and port.netdev is None:
            continue  # a RoCE port is reached through its netdev, and the node shows none
        nics.append(Nic(name=_port_name(port), kind=_kind(port), rdma_device=port.device,
                        port=port.port, netdev=port.netdev))  # fmt: skip
    if not any(n.management for n in nics) and found.default_route:
        route = found.default_route
        index = next((i for i, n in enumerate(nics) if n.netdev == route), None)
        if index is None:
            addrs = found.netdevs.get(route, (False, []))[1]
            nics.insert(0, Nic(name=route, kind=NicKind.ETH, netdev=route,
                               address=addrs[0] if addrs else None, management=True))  # fmt: skip
        else:
            nics[index] = nics[index].model_copy(update={"management": True})
    update: dict[str, object] = {"nics": nics}
    if found.gpu_archs:
        update.update(gpus=len(found.gpu_archs), gpu_arch=found.gpu_archs[0])
    merged = node.model_copy(update=update)
    return NodeModel.model_validate(merged.model_dump())


def merge_testbed(testbed: Testbed, found: dict[str, Discovered]) -> Testbed:
    """The testbed with every reachable node merged; the bootstrap interface set, if unset,
    only when every node answered and all name the same management interface (the file's own
    netdevs, e.g. a manifest's NIC names, are not evidence)."""
    nodes = [merge_node(n, found[n.name]) if n.name in found else n for n in testbed.nodes]
    launcher = testbed.launcher
    if launcher.bootstrap_interface is None and all(n.name in found for n in testbed.nodes):
        mgmt = {nic.netdev for node in nodes for nic in node.nics if nic.management}
        if len(mgmt) == 1 and None not in mgmt:
            launcher = launcher.model_copy(update={"bootstrap_interface": mgmt.pop()})
    merged = testbed.model_copy(update={"nodes": nodes, "launcher": launcher})
    return Testbed.model_validate(merged.model_dump())


def discover_node(node: Node) -> Discovered:
    """Run the script on one node."""
    result = node.run(SCRIPT, timeout=DISCOVER_TIMEOUT_S)
    if not result.ok:
        raise NodeError(node.name, "discovery script", result.stderr.strip()[-300:])
    return parse_discovery(result.stdout)


def discover(testbed: Testbed, pool: NodePool) -> tuple[Testbed, dict[str, str]]:
    """(merged testbed, {node: error} for nodes that could not be asked)."""
    answers = pool.map(discover_node)
    found = {name: a for name, a in answers.items() if isinstance(a, Discovered)}
    errors = {name: str(a) for name, a in answers.items() if isinstance(a, NodeError)}
    return merge_testbed(testbed, found), errors


def header_of(text: str) -> str:
    """The leading comment lines of a YAML file (kept when it is written back)."""
    lines = []
    for line in text.splitlines(keepends=True):
        if not line.startswith("#"):
            break
        lines.append(line)
    return "".join(lines)


def _ascii_digits(text: str) -> bool:
    """Whether `text` is a plain decimal number (`str.isdigit` also takes `²`, which `int`
    refuses)."""
    return text.isascii() and text.isdigit()
