"""Which kernel features the host offers, tried inside a throwaway network namespace.

The root namespace is never touched. Modules whose loading creates devices in the root namespace
(dummy makes dummy0, bonding makes bond0) are only tried when already loaded or built in;
otherwise they are reported missing with that reason.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from r2bench.testbeds.virtual.runner import Argv, run, succeeds

FEATURES = (
    "veth",
    "bridge",
    "tbf",
    "htb",
    "netem",
    "nftables",
    "nft_bridge",
    "flower",
    "blackhole",
    "dummy",
    "bonding",
)
"""Every feature recorded in a virtual testbed's `features`."""

_TBF = ("rate", "1mbit", "burst", "32kb", "latency", "50ms")
_FLOWER = ("ip_proto", "tcp", "action", "drop")

# Modules that create a device in the root namespace when they are loaded.
_DEVICE_MODULES = {"dummy": "dummy", "bonding": "bonding"}


@dataclass
class ProbeResult:
    """Feature -> available, plus why each missing one is missing."""

    features: dict[str, bool] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)


def _checks(netns: str) -> dict[str, list[Argv]]:
    """Commands whose success shows a feature (run in order; later ones build on earlier)."""
    ip = ("ip", "-n", netns)
    tc = ("tc", "-n", netns)
    nft = ("ip", "netns", "exec", netns, "nft")
    hook = "{ type filter hook forward priority 0 ; policy accept ; }"
    return {
        "veth": [(*ip, "link", "add", "pa", "type", "veth", "peer", "name", "pb")],
        "bridge": [(*ip, "link", "add", "pbr", "type", "bridge")],
        "tbf": [(*tc, "qdisc", "add", "dev", "pa", "root", "tbf", *_TBF)],
        "htb": [(*tc, "qdisc", "replace", "dev", "pa", "root", "handle", "1:", "htb")],
        "netem": [(*tc, "qdisc", "replace", "dev", "pa", "root", "netem", "delay", "1ms")],
        "nftables": [(*nft, "add", "table", "inet", "r2b_probe")],
        "nft_bridge": [
            (*nft, "add", "table", "bridge", "r2b_probe"),
            (*nft, "add", "chain", "bridge", "r2b_probe", "r2b_fwd", hook),
        ],
        "flower": [
            (*tc, "qdisc", "add", "dev", "pb", "clsact"),
            (*tc, "filter", "add", "dev", "pb", "ingress", "protocol", "ip", "flower", *_FLOWER),
        ],
        "blackhole": [(*ip, "route", "add", "blackhole", "198.19.255.0/24")],
        "dummy": [(*ip, "link", "add", "pdm", "type", "dummy")],
        "bonding": [(*ip, "link", "add", "pbo", "type", "bond")],
    }  # fmt: skip


def _module_loaded(module: str, sys_module: Path) -> bool:
    return (sys_module / module).exists()


def _try(commands: list[Argv]) -> str:
    """'' when every command succeeds, else the first failure's stderr."""
    for argv in commands:
        result = run(argv, check=False, timeout=10)
        if result.returncode != 0:
            return result.stderr.strip() or f"exit {result.returncode}"
    return ""


def probe_features(
    netns: str,
    record: Callable[[], None] = lambda: None,
    sys_module: Path = Path("/sys/module"),
) -> ProbeResult:
    """Create `netns`, try each feature in it, delete it. `record` runs before creation."""
    result = ProbeResult()
    record()
    run(["ip", "netns", "add", netns])
    try:
        for feature, commands in _checks(netns).items():
            module = _DEVICE_MODULES.get(feature)
            if module and not _module_loaded(module, sys_module):
                error = f"module {module} not loaded (loading it would add a root-namespace device)"
            else:
                error = _try(commands)
            result.features[feature] = not error
            if error:
                result.reasons[feature] = error
    finally:
        succeeds(["ip", "netns", "del", netns])
    return result
