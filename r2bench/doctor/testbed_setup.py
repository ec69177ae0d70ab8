"""Doctor's checks of what a testbed keeps in place itself (pure, plus the script lines that
gather the facts): NIC rate limits held with `mlnx_qos` (`nics[].shaping`), the NCCL topology
file every compute node holds (`setup.topology_file`), and each SmartNIC's Open vSwitch, which a
`flow_drop` fault run there needs; and the checks a host that runs no rank is held to
(`host_checks`: a SmartNIC needs no GPU, MPI or the GPU nodes' OS).

R-2CCL's r7525 testbed is only a fair testbed while all three NICs are held at the same rate and
the topology file declares that rate: a port whose limit was lost at a reboot (mlnx_qos settings
do not survive one) turns a "Balance costs 1.5x" figure into a measurement of unequal NICs.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator

from r2bench.config.testbed import Nic, NicShaping, Testbed
from r2bench.config.testbed import Node as NodeModel
from r2bench.doctor.checks import (
    CheckResult,
    Status,
    check_clock,
    check_faults,
    check_processes,
    check_reachable,
)
from r2bench.doctor.facts import ABSENT, MARKER, NodeFacts, node_path

TOPOLOGY_BYTES = 262_144
"""Most of a topology file read (NCCL's own dumps are a few KiB)."""
_RATE = re.compile(r"tc:\s*(\d+)\s+ratelimit:\s*([^,\n]+)")
_NET = re.compile(r"<net\b[^>]*>")
_ATTR = re.compile(r'(\w+)="([^"]*)"')


def _section(name: str, body: str) -> str:
    return f"echo '{MARKER}{name}@@'\n{body}\n"


def _root(node: NodeModel, command: str) -> str:
    return f"sudo -n {command}" if node.sudo else command


def _shaped_here(testbed: Testbed, host: NodeModel) -> Iterator[tuple[NodeModel, Nic, NicShaping]]:
    """(node, NIC, shaping) of every limit `host` holds (its own ports, or a BlueField's)."""
    for node in testbed.nodes:
        for nic in node.nics:
            if nic.shaping and (nic.shaping.on or node.name) == host.name:
                yield node, nic, nic.shaping


def setup_sections(testbed: Testbed, node: NodeModel) -> str:
    """Script lines that print what this module checks on `node`."""
    text = ""
    for owner, nic, shaping in _shaped_here(testbed, node):
        port = shlex.quote(shaping.interface)
        body = (
            f"if command -v mlnx_qos >/dev/null; then {_root(node, f'mlnx_qos -i {port}')} 2>&1;"
            f" else echo {ABSENT}; fi"
        )
        text += _section(f"qos.{owner.name}.{nic.name}", body)
    topology = testbed.setup.topology_file
    if topology and node.runs_ranks:
        path = node_path(topology)
        text += _section(
            "topology",
            f"if [ -r {path} ]; then head -c {TOPOLOGY_BYTES} {path}; else echo {ABSENT}; fi",
        )
    if not node.runs_ranks:
        text += _section(
            "ovs",
            f"if command -v ovs-ofctl >/dev/null; then {_root(node, 'ovs-vsctl list-br')} 2>&1;"
            f" else echo {ABSENT}; fi",
        )
    return text


def parse_rate_limits(text: str) -> dict[int, float | None]:
    """{traffic class: limit in Gb/s (None: unlimited)} from `mlnx_qos -i PORT`."""
    limits: dict[int, float | None] = {}
    for tc, value in _RATE.findall(text):
        number = re.match(r"\s*([0-9.]+)\s*([GM])bps", value)
        if number is None:
            limits[int(tc)] = None
        else:
            scale = 1.0 if number.group(2) == "G" else 0.001
            limits[int(tc)] = float(number.group(1)) * scale
    return limits


def _limit_command(shaping: NicShaping) -> str:
    rates = ["0"] * 8
    for tc in shaping.traffic_classes:
        rates[tc] = str(shaping.gbps)
    return f"sudo mlnx_qos -i {shaping.interface} -r {','.join(rates)}"


def check_shaping(host: str, owner: str, nic: Nic, shaping: NicShaping, text: str) -> CheckResult:
    """The port's limit is what the testbed declares, on every declared traffic class."""
    name = f"rate limit {owner}/{nic.name}"
    fix = f"on {host}: {_limit_command(shaping)}"
    if not text or text.strip() == ABSENT:
        return CheckResult(
            host, name, Status.FAIL, "mlnx_qos not found", "install MLNX_OFED's tools; " + fix
        )
    limits = parse_rate_limits(text)
    if not limits:
        first = text.strip().splitlines()[0][:120]
        return CheckResult(
            host, name, Status.FAIL, f"mlnx_qos -i {shaping.interface}: {first}", fix
        )
    wrong = {
        tc: limits.get(tc)
        for tc in shaping.traffic_classes
        if limits.get(tc) is None or abs((limits.get(tc) or 0.0) - shaping.gbps) > 0.01
    }
    if wrong:
        seen = ", ".join(
            f"tc{tc} {'unlimited' if v is None else f'{v:g} Gb/s'}"
            for tc, v in sorted(wrong.items())
        )
        return CheckResult(
            host, name, Status.FAIL, f"{shaping.interface}: {seen}, want {shaping.gbps} Gb/s", fix
        )
    return CheckResult(host, name, Status.OK, f"{shaping.interface}: {shaping.gbps} Gb/s")


def check_topology(testbed: Testbed, node: NodeModel, text: str) -> CheckResult:
    """The topology file is there and declares each RDMA data NIC (at its shaped speed)."""
    path = testbed.setup.topology_file or ""
    name = "topology file"
    if not text or text.strip() == ABSENT:
        return CheckResult(
            node.name,
            name,
            Status.FAIL,
            f"{path} not found",
            f"copy the testbed's topology XML to {path} on {node.name} (NCCL_TOPO_FILE names it)",
        )
    nets = {}
    for tag in _NET.findall(text):
        attrs = dict(_ATTR.findall(tag))
        if "name" in attrs:
            nets[attrs["name"]] = attrs
    problems = []
    for nic in node.data_nics:
        device = nic.rdma_device
        if device is None:
            continue
        net = nets.get(device)
        if net is None:
            problems.append(f'no <net name="{device}">')
        elif nic.shaping and net.get("speed") != str(nic.shaping.gbps * 1000):
            problems.append(
                f"{device} speed={net.get('speed', '?')}, want {nic.shaping.gbps * 1000} "
                f"(its {nic.shaping.gbps} Gb/s limit)"
            )
    if problems:
        return CheckResult(
            node.name,
            name,
            Status.FAIL,
            f"{path}: " + "; ".join(problems),
            "correct the file: NCCL plans its rings by these speeds",
        )
    return CheckResult(node.name, name, Status.OK, f"{path}: {len(nets)} NICs declared")


def check_ovs(node: NodeModel, text: str) -> CheckResult:
    """A SmartNIC that runs flow_drop faults has ovs-ofctl and its bridges."""
    if not text or text.strip() == ABSENT:
        return CheckResult(
            node.name,
            "open vswitch",
            Status.FAIL,
            "ovs-ofctl not found: flow_drop faults cannot run here",
            f"install openvswitch on {node.name} (a BlueField in DPU mode has it)",
        )
    bridges = text.split()
    return CheckResult(
        node.name, "open vswitch", Status.OK, "bridges: " + (", ".join(bridges) or "none")
    )


def setup_checks(testbed: Testbed, all_facts: list[NodeFacts]) -> list[CheckResult]:
    """Every check of this module, on the reachable nodes (unreachable ones are reported by
    the reachability check already)."""
    results = []
    for facts in all_facts:
        host = testbed.node(facts.node)
        if host is None or not facts.reachable:
            continue
        for owner, nic, shaping in _shaped_here(testbed, host):
            text = facts.section(f"qos.{owner.name}.{nic.name}")
            results.append(check_shaping(host.name, owner.name, nic, shaping, text))
        if testbed.setup.topology_file and host.runs_ranks:
            results.append(check_topology(testbed, host, facts.section("topology")))
        if not host.runs_ranks:
            results.append(check_ovs(host, facts.section("ovs")))
    return results


def host_checks(testbed: Testbed, all_facts: list[NodeFacts]) -> list[CheckResult]:
    """The checks a host that runs no rank (a SmartNIC) is held to: reachable, its clock (fault
    times are read on it), no stray process, no fault left behind."""
    results = []
    for facts in all_facts:
        model = testbed.node(facts.node)
        if model is None:
            continue
        results.append(check_reachable(facts, model))
        if facts.reachable:
            results.append(check_clock(facts))
            results.append(check_processes(facts))
            results.append(check_faults(facts, testbed.paths.work_dir, model.sudo))
    return results
