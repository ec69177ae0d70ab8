"""What of a virtual testbed exists right now: namespaces, sshds, link states."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from r2bench.testbeds.virtual.hold import live_holder
from r2bench.testbeds.virtual.layout import DEFAULT_STATE_ROOT, PREFIX
from r2bench.testbeds.virtual.runner import run
from r2bench.testbeds.virtual.statedir import Manifest
from r2bench.testbeds.virtual.teardown import list_netns, owned_pid


def link_states(netns: str | None) -> dict[str, str]:
    """Interface -> 'up' | 'down' | 'no-carrier' in `netns` (None: root namespace)."""
    argv = (
        ["ip", "-j", "link", "show"] if netns is None else ["ip", "-j", "-n", netns, "link", "show"]
    )
    result = run(argv, check=False)
    if result.returncode != 0 or not result.stdout.strip():
        return {}
    states = {}
    for link in json.loads(result.stdout):
        flags = link.get("flags", [])
        if "UP" not in flags:
            states[link["ifname"]] = "down"
        else:
            states[link["ifname"]] = "up" if "LOWER_UP" in flags else "no-carrier"
    return states


def _node_status(node: dict[str, Any], manifest: Manifest, present: set[str]) -> dict[str, Any]:
    pid = next((e["pid"] for e in manifest.of_kind("pid") if e["node"] == node["hostname"]), None)
    in_ns = node["netns"] in present
    links = link_states(node["netns"]) if in_ns else {}
    return {
        "name": node["hostname"],
        "netns": node["netns"],
        "netns_present": in_ns,
        "mgmt_address": node["mgmt_address"],
        "sshd_pid": pid,
        "sshd_alive": pid is not None and owned_pid(pid, manifest.state_dir),
        "links": {name: links.get(name, "absent") for name in ["mgmt0", *node["nics"]]},
        "nics": node["nics"],
    }


def read_status(name: str, state_dir: Path) -> dict[str, Any]:
    """Status of testbed `name` as plain data (for a table or --json)."""
    manifest = Manifest.load(state_dir)
    present = set(list_netns())
    if manifest is None:
        leftovers = sorted(ns for ns in present if ns.startswith(f"{PREFIX}-{name}-"))
        return {
            "name": name,
            "state_dir": str(state_dir),
            "up": False,
            "leftover_namespaces": leftovers,
        }
    info = manifest.info
    recorded = info.get("namespaces", [])
    host_if = info.get("host_if", "")
    holder = live_holder(state_dir)
    return {
        "name": name,
        "state_dir": str(state_dir),
        "up": True,
        "held_by": holder.describe() if holder else None,
        "namespaces": {ns: ns in present for ns in recorded},
        "host_link": {"name": host_if, "state": link_states(None).get(host_if, "absent")},
        "nodes": [_node_status(node, manifest, present) for node in info.get("nodes", [])],
        "router": info.get("router"),
        "rate": info.get("rate"),
    }


def known_testbeds(root: Path = DEFAULT_STATE_ROOT) -> list[str]:
    """Names of testbeds with a manifest under the default state root."""
    if not root.is_dir():
        return []
    return sorted(p.parent.name for p in root.glob("*/manifest.json"))
