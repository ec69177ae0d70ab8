"""The fault kinds r2bench knows, what each needs, and the node-side command that does it.

Each kind maps to one script in `injectors/` with the same shape:
`<script> inject|revert|status --tag TAG [--lease-s S] <kind options>`. Inject arms a detached
timer on the node that reverts after the lease, so a lost controller never leaves a fault behind.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from r2bench.config.testbed import Nic, NicKind
from r2bench.config.types import rate_problem
from r2bench.shellwords import seconds


@dataclass(frozen=True)
class FaultKind:
    """A kind of fault: which injector runs it and what it needs from the NIC."""

    name: str
    script: str
    summary: str
    nic_kinds: frozenset[NicKind]
    needs_rdma_device: bool = False
    needs_netdev: bool = False
    kernel_features: tuple[str, ...] = ()
    required_params: tuple[str, ...] = ()
    optional_params: tuple[str, ...] = ()
    target_args: Callable[[Nic, Mapping[str, str]], list[str]] = field(
        default=lambda nic, params: [], repr=False
    )
    targets_nic: bool = True
    """False for faults of a process (a rank of the run), which name no NIC."""
    signal: str | None = None
    """The signal a process fault sends the rank (STOP, KILL); None for NIC faults."""
    on_smartnic: bool = False
    """Runs on the SmartNIC that carries the NIC (the fault's `executor`), never on the node."""


def _ib_port_args(nic: Nic, params: Mapping[str, str]) -> list[str]:
    return ["--ca", nic.rdma_device or "", "--port", str(nic.port)]


def _netdev_args(nic: Nic, params: Mapping[str, str]) -> list[str]:
    return ["--dev", nic.netdev or ""]


def _drop_args(nic: Nic, params: Mapping[str, str]) -> list[str]:
    args = _netdev_args(nic, params)
    if "peer" in params:
        args += ["--peer", params["peer"]]
    return args


def _rate_args(nic: Nic, params: Mapping[str, str]) -> list[str]:
    return [*_netdev_args(nic, params), "--rate", params["rate"]]


def _rank_args(nic: Nic, params: Mapping[str, str]) -> list[str]:
    return ["--rank", params["rank"]]


def _ovs_args(nic: Nic, params: Mapping[str, str]) -> list[str]:
    args = ["--bridge", params["bridge"]]
    if "peer" in params:
        args += ["--peer", params["peer"]]
    if "port" in params:
        args += ["--udp-port", params["port"]]
    if "priority" in params:
        args += ["--priority", params["priority"]]
    return args


_PARAM_RULES: Mapping[str, tuple[re.Pattern[str], str]] = MappingProxyType(
    {
        "peer": (
            re.compile(r"[0-9a-fA-F.:]{2,45}(/[0-9]{1,3})?"),
            "invalid peer: use an IPv4 or IPv6 address or prefix, like 198.18.1.11",
        ),
        "bridge": (
            re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,14}"),
            "invalid bridge: use an OVS bridge name (letters, digits, _ . -)",
        ),
        "port": (
            re.compile(r"[1-9][0-9]{0,4}"),
            "invalid port: use a UDP port number (4791 for RoCEv2)",
        ),
        "priority": (
            re.compile(r"[0-9]{1,5}"),
            "invalid priority: use an OpenFlow priority, 0-65535 (65000 is above forwarding)",
        ),
    }
)


def check_params(params: Mapping[str, str]) -> list[tuple[str, str]]:
    """(parameter, problem) for each value that an injector would refuse (or that could pass
    for an option): each reaches the node as one argument and must match its kind's shape."""
    problems = []
    for name, value in params.items():
        rule = _PARAM_RULES.get(name)
        if name == "rate" and (problem := rate_problem(value)):
            problems.append((name, problem))
        elif rule is not None and not rule[0].fullmatch(value):
            problems.append((name, rule[1]))
        elif name in ("port", "priority") and int(value) > 65535:
            problems.append((name, _PARAM_RULES[name][1]))
    return problems


_ALL_KINDS = (
    FaultKind(
        name="ib_port_down",
        script="ib_port.sh",
        summary="Disable the local HCA port with ibportstate (link goes down).",
        nic_kinds=frozenset({NicKind.IB}),
        needs_rdma_device=True,
        target_args=_ib_port_args,
    ),
    FaultKind(
        name="link_down",
        script="link.sh",
        summary="ip link set dev DEV down (RoCE/Ethernet port admin-down).",
        nic_kinds=frozenset({NicKind.ROCE, NicKind.ETH}),
        needs_netdev=True,
        target_args=_netdev_args,
    ),
    FaultKind(
        name="route_drop",
        script="nft_drop.sh",
        summary="Drop traffic leaving DEV (optionally only to `peer`) with a tagged nft table.",
        nic_kinds=frozenset({NicKind.ROCE, NicKind.ETH}),
        needs_netdev=True,
        kernel_features=("nftables",),
        optional_params=("peer",),
        target_args=_drop_args,
    ),
    FaultKind(
        name="bandwidth_cap",
        script="tbf.sh",
        summary="Cap DEV's egress rate with a tbf qdisc (degraded link, not a dead one).",
        nic_kinds=frozenset({NicKind.ROCE, NicKind.ETH}),
        needs_netdev=True,
        kernel_features=("tbf",),
        required_params=("rate",),
        target_args=_rate_args,
    ),
    FaultKind(
        name="flow_drop",
        script="ovs_flow.sh",
        summary="Cut a port on its BlueField: an OVS drop flow on the port's bridge at priority "
        "65000 (all traffic, or RoCEv2 to `peer`), removed by its cookie.",
        nic_kinds=frozenset({NicKind.ROCE}),
        required_params=("bridge",),
        optional_params=("peer", "port", "priority"),
        target_args=_ovs_args,
        on_smartnic=True,
    ),
    FaultKind(
        name="process_stop",
        script="proc.sh",
        summary="SIGSTOP one rank of the run (a hung peer); SIGCONT on heal or when the lease ends.",
        nic_kinds=frozenset(),
        required_params=("rank",),
        target_args=_rank_args,
        targets_nic=False,
        signal="STOP",
    ),
    FaultKind(
        name="process_kill",
        script="proc.sh",
        summary="SIGKILL one rank of the run (a crashed peer); nothing to heal.",
        nic_kinds=frozenset(),
        required_params=("rank",),
        target_args=_rank_args,
        targets_nic=False,
        signal="KILL",
    ),
)

FAULT_KINDS: Mapping[str, FaultKind] = MappingProxyType({kind.name: kind for kind in _ALL_KINDS})


_WRONG_LINK_LAYER: Mapping[tuple[str, NicKind], str] = MappingProxyType(
    {
        ("ib_port_down", NicKind.ROCE): (
            "a RoCE port has no subnet management agent: ibportstate cannot open it "
            "(`mad_rpc_open_port: client_register for mgmt 1 failed`)"
        ),
        ("ib_port_down", NicKind.ETH): "it has no RDMA port for ibportstate to disable",
        ("link_down", NicKind.IB): (
            "taking its IPoIB interface down leaves the InfiniBand port ACTIVE and RDMA traffic "
            "flowing"
        ),
    }
)
"""Why a NIC fault does nothing on a link layer it does not list (checked on real hosts'
outputs: docs/faults.md, "Link layers")."""


def link_layer_refusal(kind: FaultKind, nic: Nic) -> tuple[str, str] | None:
    """(why `kind` cannot work on `nic`, the faults that do) when the NIC's link layer (its
    kind: ib = InfiniBand, roce = Ethernet with RDMA, eth) is not one the fault acts on, else
    None. Faults of a process fit every NIC."""
    if not kind.targets_nic or nic.kind in kind.nic_kinds:
        return None
    why = _WRONG_LINK_LAYER.get((kind.name, nic.kind))
    allowed = "/".join(sorted(k.value for k in kind.nic_kinds))
    message = f"{kind.name} does not apply to {nic.kind.value} NIC '{nic.name}' (needs {allowed})"
    if why:
        message += f": {why}"
    works = [k.name for k in _ALL_KINDS if k.targets_nic and nic.kind in k.nic_kinds]
    return message, f"on {nic.kind.value} NICs use: {', '.join(works)}"


def fault_tag(run_id: str, index: int) -> str:
    """The tag an injector puts on everything it changes for this fault."""
    return f"r2b-{run_id[-10:]}-f{index}"


def format_seconds(value: float) -> str:
    """A duration as the injectors read it: a plain decimal with at most 3 decimals (never
    `1e+06`, `inf` or `nan`), at least 0.001 s (see :func:`r2bench.shellwords.seconds`)."""
    return seconds(value)


def injector_argv(
    kind: FaultKind,
    action: str,
    nic: Nic | None,
    params: Mapping[str, str],
    tag: str,
    injectors_dir: str,
    lease_s: float | None = None,
    protect: Sequence[str] = (),
    run_id: str | None = None,
) -> list[str]:
    """argv of the node-side command for `action` (inject, revert or status). `protect` names
    interfaces the injector must refuse to touch (`--protect-if a,b`, checked on the node
    before anything changes; see faults/interlock.py). A process fault names its run
    (`--run`: the processes carry R2B_RUN=<run id>) and its signal."""
    argv = ["bash", f"{injectors_dir}/{kind.script}", action, "--tag", tag]
    if action == "inject" and lease_s is not None:
        argv += ["--lease-s", format_seconds(lease_s)]
    if action == "inject" and protect:
        argv += ["--protect-if", ",".join(protect)]
    if not kind.targets_nic:
        return [
            *argv,
            "--run",
            run_id or "",
            "--signal",
            kind.signal or "KILL",
            *kind.target_args(Nic.model_construct(name=""), params),
        ]
    assert nic is not None
    return argv + kind.target_args(nic, params)
