"""Pure planning of a virtual testbed: names, addresses and the exact commands that build it.

Layout for testbed NAME with N nodes and K data NICs (rail-optimized, like GPU clusters):

* ``r2b-NAME-node<j>``: one network namespace per node; interfaces ``mgmt0`` and ``nic0..nicK-1``.
* ``r2b-NAME-mgmt``: the management switch (bridge ``br0``); node j is 198.18.0.(10+j)/24 on
  ``mgmt0``; one veth from the root namespace (``r2bm<hash>``, 198.18.0.1/24) reaches it.
* ``r2b-NAME-rail<i>``: the switch of rail i (bridge ``br0``); NIC i of node j is
  198.18.(i+1).(10+j)/24 on ``nic<i>``.
* With ``router``: rail 0's switch carries an nft ``bridge`` table where flow drops are injected.
* With ``rate`` (e.g. ``400mbit``): every data cable is shaped at both ends by a tbf root qdisc
  with the fixed handle ``f2b0:`` (``SHAPING_HANDLE``): on the node's ``nic<i>`` (what the NIC
  sends) and on the switch port ``n<j>`` (what the NIC receives), so each data NIC is a
  ``rate`` bottleneck in both directions. The handle lies outside the range the bandwidth_cap
  injector draws its handles from (0x3e8-0xee48), so checks can tell the testbed's own shaping
  from a fault's qdisc. The management network is never shaped.

Nothing here runs anything: `plan_testbed` returns `Step`s that `lifecycle` executes.
"""

from __future__ import annotations

import hashlib
import ipaddress
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from r2bench.config.types import rate_bits_per_s
from r2bench.errors import InputError

POOL = ipaddress.IPv4Network("198.18.0.0/15")
"""Every address the virtual testbed uses comes from this benchmarking block (RFC 2544)."""

PREFIX = "r2b"
MGMT_IF = "mgmt0"
MAX_GPUS = 16
BRIDGE = "br0"
HOST_PORT = "host"
HOST_ADDRESS = "198.18.0.1"
SUBNET_LEN = 24
FIRST_HOST = 10
MAX_NODES = 64
MAX_NICS = 8
ROUTER_TABLE = "r2b_router"
ROUTER_CHAIN = "forward"
DEFAULT_STATE_ROOT = Path("/var/lib/r2bench/virtual")
SHAPING_HANDLE = "f2b0:"
"""tbf handle of the testbed's own per-NIC bandwidth cap (never used by a fault injector)."""
SHAPING_LATENCY = "100ms"
MIN_BURST_BYTES = 64 * 1024
BURST_SECONDS = 0.004
"""tbf burst: what the rate sends in 4 ms, at least 64 KiB (one GSO packet fits)."""


_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,23}$")
_OBJECT_SUFFIX = r"(node[0-9]+|mgmt|rail[0-9]+|probe)"


class PlanError(InputError, ValueError):
    """The requested testbed cannot be built as asked (bad name, too many nodes...)."""


def check_name(name: str) -> str:
    """Return `name` if it is a valid testbed name (lowercase letters, digits, '-'; <= 24)."""
    if not _NAME_RE.match(name):
        raise PlanError(
            f"invalid testbed name {name!r}: use 1-24 lowercase letters, digits or '-', "
            "starting with a letter or digit"
        )
    return name


def netns_name(name: str, suffix: str) -> str:
    """Namespace name of one object of testbed `name` (`r2b-NAME-node0`, `r2b-NAME-mgmt`)."""
    return f"{PREFIX}-{name}-{suffix}"


def owns_netns(name: str, netns: str) -> bool:
    """True when namespace `netns` is one that testbed `name` creates (exact shape, no prefix
    collision between testbeds `a` and `a-b`)."""
    return re.fullmatch(re.escape(f"{PREFIX}-{name}-") + _OBJECT_SUFFIX, netns) is not None


def host_ifname(name: str) -> str:
    """Root-namespace end of the management veth: `r2bm` + 8 hex digits of the name's hash."""
    return f"{PREFIX}m{hashlib.sha1(name.encode()).hexdigest()[:8]}"


def default_state_dir(name: str) -> Path:
    """Where testbed `name` keeps keys, sshd files, the manifest and testbed.yaml by default."""
    return DEFAULT_STATE_ROOT / name


def rate_bits(rate: str) -> int:
    """Bits per second of a tc rate such as `400mbit`, `1gbit` or `50mbps` (decimal units)."""
    bits = rate_bits_per_s(rate)
    if bits is None:
        raise PlanError(f"invalid rate {rate!r}: use a tc rate such as 400mbit or 1gbit")
    if bits < 1e5:
        raise PlanError(f"rate {rate!r} is below 100kbit")
    return int(bits)


def shaping_burst(rate: str) -> int:
    """tbf burst in bytes for `rate`."""
    return max(MIN_BURST_BYTES, int(rate_bits(rate) / 8 * BURST_SECONDS))


def subnet(index: int) -> ipaddress.IPv4Network:
    """Subnet number `index` of the pool: 0 is management, i+1 is rail i."""
    net = ipaddress.IPv4Network(f"198.18.{index}.0/{SUBNET_LEN}")
    assert net.subnet_of(POOL)
    return net


def node_address(index: int, node: int) -> str:
    """Address of node `node` on subnet `index`."""
    return str(subnet(index).network_address + FIRST_HOST + node)


@dataclass(frozen=True)
class VirtualSpec:
    """What the user asked for."""

    name: str
    nodes: int = 2
    nics: int = 2
    router: bool = False
    state_dir: Path | None = None
    rate: str | None = None
    """Bandwidth cap of every data NIC, both directions (tc rate: `400mbit`); None: unshaped."""
    gpus: int = 0
    """GPUs per node, taken from the host's (shared between nodes when it has too few)."""
    host_gpus: int | None = None
    """The host's GPU count; None: ask nvidia-smi when `gpus` is set."""
    homes: tuple[tuple[str, str], ...] = ()
    """Testbed `paths` to set (cuda_home, mpi_home, nccl_home), as (field, value) pairs."""

    def __post_init__(self) -> None:
        check_name(self.name)
        if self.rate is not None:
            rate_bits(self.rate)
        if not 1 <= self.nodes <= MAX_NODES:
            raise PlanError(f"--nodes must be between 1 and {MAX_NODES}, got {self.nodes}")
        if not 1 <= self.nics <= MAX_NICS:
            raise PlanError(f"--nics must be between 1 and {MAX_NICS}, got {self.nics}")
        if not 0 <= self.gpus <= MAX_GPUS:
            raise PlanError(f"--gpus must be between 0 and {MAX_GPUS}, got {self.gpus}")

    @property
    def state(self) -> Path:
        """The state directory (explicit, or the default for the name)."""
        return self.state_dir or default_state_dir(self.name)


@dataclass(frozen=True)
class NodePlan:
    """One node: its namespace, hostname and addresses."""

    index: int
    hostname: str
    netns: str
    mgmt_address: str
    nic_addresses: tuple[str, ...]

    @property
    def nic_names(self) -> tuple[str, ...]:
        """Data interface names, rail order."""
        return tuple(f"nic{i}" for i in range(len(self.nic_addresses)))


@dataclass(frozen=True)
class SwitchPlan:
    """A switch namespace with one bridge: management (rail None) or a data rail."""

    netns: str
    subnet: str
    rail: int | None


@dataclass(frozen=True)
class Obj:
    """Something `up` creates that `down` must remove: a namespace or a root-namespace link."""

    kind: str  # "netns" | "link"
    name: str


@dataclass(frozen=True)
class Step:
    """Commands that create one thing; `creates` is recorded in the manifest before they run."""

    what: str
    commands: tuple[tuple[str, ...], ...]
    creates: Obj | None = None


@dataclass(frozen=True)
class RouterPlan:
    """Where flow drops between nodes can be injected (rail 0's switch, nft bridge family)."""

    netns: str
    rail: int
    family: str = "bridge"
    table: str = ROUTER_TABLE
    chain: str = ROUTER_CHAIN


@dataclass(frozen=True)
class TestbedPlan:
    """Everything `up` will create, in order."""

    __test__ = False  # not a pytest test class despite the name

    spec: VirtualSpec
    nodes: tuple[NodePlan, ...]
    mgmt: SwitchPlan
    rails: tuple[SwitchPlan, ...]
    host_if: str
    router: RouterPlan | None
    steps: tuple[Step, ...] = field(default=())

    @property
    def namespaces(self) -> tuple[str, ...]:
        """Every namespace of the testbed (switches first, then nodes)."""
        switches = (self.mgmt.netns, *(rail.netns for rail in self.rails))
        return (*switches, *(node.netns for node in self.nodes))

    def interface_names(self) -> dict[str, list[str]]:
        """Interface names per namespace ('' = root namespace), for checks and status."""
        names: dict[str, list[str]] = {"": [self.host_if]}
        names[self.mgmt.netns] = [BRIDGE, HOST_PORT, *(f"n{n.index}" for n in self.nodes)]
        for rail in self.rails:
            names[rail.netns] = [BRIDGE, *(f"n{n.index}" for n in self.nodes)]
        for node in self.nodes:
            names[node.netns] = [MGMT_IF, *node.nic_names]
        return names


def _nodes(spec: VirtualSpec) -> tuple[NodePlan, ...]:
    return tuple(
        NodePlan(
            index=j,
            hostname=f"node{j}",
            netns=netns_name(spec.name, f"node{j}"),
            mgmt_address=node_address(0, j),
            nic_addresses=tuple(node_address(i + 1, j) for i in range(spec.nics)),
        )
        for j in range(spec.nodes)
    )


def _ip(netns: str, *args: str) -> tuple[str, ...]:
    return ("ip", "-n", netns, *args)


def _switch_steps(switch: SwitchPlan) -> list[Step]:
    return [
        Step(
            f"namespace {switch.netns}",
            (("ip", "netns", "add", switch.netns),),
            Obj("netns", switch.netns),
        ),
        Step(
            f"bridge in {switch.netns}",
            (
                _ip(switch.netns, "link", "set", "lo", "up"),
                _ip(switch.netns, "link", "add", BRIDGE, "type", "bridge", "stp_state", "0"),
                _ip(switch.netns, "link", "set", BRIDGE, "up"),
            ),
        ),
    ]


def _cable(node: NodePlan, switch: SwitchPlan, ifname: str, address: str) -> Step:
    """A veth from the node's `ifname` to port `n<j>` of the switch's bridge."""
    port = f"n{node.index}"
    return Step(
        f"{node.hostname}:{ifname} -> {switch.netns}",
        (
            _ip(
                node.netns,
                "link",
                "add",
                ifname,
                "type",
                "veth",
                "peer",
                "name",
                port,
                "netns",
                switch.netns,
            ),
            _ip(switch.netns, "link", "set", port, "master", BRIDGE, "up"),
            _ip(node.netns, "addr", "add", f"{address}/{SUBNET_LEN}", "dev", ifname),
            _ip(node.netns, "link", "set", ifname, "up"),
        ),
    )


def shaping_command(netns: str, dev: str, rate: str) -> tuple[str, ...]:
    """tc command that caps `dev`'s egress in `netns` at `rate` (handle SHAPING_HANDLE)."""
    return (
        *("tc", "-n", netns, "qdisc", "add", "dev", dev, "root", "handle", SHAPING_HANDLE),
        *("tbf", "rate", rate, "burst", str(shaping_burst(rate)), "latency", SHAPING_LATENCY),
    )


def _shaping(node: NodePlan, rail: SwitchPlan, ifname: str, rate: str) -> Step:
    """Cap one data cable at both ends: the node's NIC (send) and its switch port (receive)."""
    return Step(
        f"{node.hostname}:{ifname} capped at {rate}",
        (
            shaping_command(node.netns, ifname, rate),
            shaping_command(rail.netns, f"n{node.index}", rate),
        ),
    )


def _host_steps(host_if: str, mgmt: SwitchPlan) -> list[Step]:
    return [
        Step(
            f"host link {host_if} -> {mgmt.netns}",
            (
                (
                    "ip",
                    "link",
                    "add",
                    host_if,
                    "type",
                    "veth",
                    "peer",
                    "name",
                    HOST_PORT,
                    "netns",
                    mgmt.netns,
                ),
            ),
            Obj("link", host_if),
        ),
        Step(
            f"address {HOST_ADDRESS} on {host_if}",
            (
                _ip(mgmt.netns, "link", "set", HOST_PORT, "master", BRIDGE, "up"),
                ("ip", "addr", "add", f"{HOST_ADDRESS}/{SUBNET_LEN}", "dev", host_if),
                ("ip", "link", "set", host_if, "up"),
            ),
        ),
    ]


def router_commands(router: RouterPlan) -> tuple[tuple[str, ...], ...]:
    """nft commands that put the (accept-all, counting) filter table into rail 0's switch."""
    nft = ("ip", "netns", "exec", router.netns, "nft")
    hook = "{ type filter hook forward priority 0 ; policy accept ; }"
    return (
        (*nft, "add", "table", router.family, router.table),
        (*nft, "add", "chain", router.family, router.table, router.chain, hook),
        (*nft, "add", "rule", router.family, router.table, router.chain, "counter"),
    )


def _steps(plan: TestbedPlan) -> tuple[Step, ...]:
    steps: list[Step] = []
    for switch in (plan.mgmt, *plan.rails):
        steps += _switch_steps(switch)
    for node in plan.nodes:
        steps.append(
            Step(
                f"namespace {node.netns}",
                (("ip", "netns", "add", node.netns),),
                Obj("netns", node.netns),
            )
        )
        steps.append(
            Step(f"{node.hostname} loopback", (_ip(node.netns, "link", "set", "lo", "up"),))
        )
        steps.append(_cable(node, plan.mgmt, MGMT_IF, node.mgmt_address))
        for rail, name, address in zip(plan.rails, node.nic_names, node.nic_addresses, strict=True):
            steps.append(_cable(node, rail, name, address))
            if plan.spec.rate is not None:
                steps.append(_shaping(node, rail, name, plan.spec.rate))
    steps += _host_steps(plan.host_if, plan.mgmt)
    if plan.router is not None:
        steps.append(Step(f"router table in {plan.router.netns}", router_commands(plan.router)))
    return tuple(steps)


def plan_testbed(spec: VirtualSpec) -> TestbedPlan:
    """The complete, ordered plan for `spec` (pure)."""
    mgmt = SwitchPlan(netns_name(spec.name, "mgmt"), str(subnet(0)), None)
    rails = tuple(
        SwitchPlan(netns_name(spec.name, f"rail{i}"), str(subnet(i + 1)), i)
        for i in range(spec.nics)
    )
    router = RouterPlan(rails[0].netns, 0) if spec.router else None
    plan = TestbedPlan(spec, _nodes(spec), mgmt, rails, host_ifname(spec.name), router)
    return replace(plan, steps=_steps(plan))
