"""Gather doctor's facts from every node in parallel, then run the checks.

Per node: three clock probes (`date +%s.%N`; the one with the shortest round trip gives the
latency and the clock offset, NTP style) and one facts script. The first probe also opens the
ssh connection, which all later commands reuse.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from r2bench.config.testbed import Node as NodeModel
from r2bench.config.testbed import Testbed, TestbedKind
from r2bench.doctor.checks import CheckResult, run_checks
from r2bench.doctor.facts import NodeFacts, facts_script, parse_sections
from r2bench.doctor.holder import attribute_to_holder
from r2bench.doctor.testbed_setup import host_checks, setup_checks, setup_sections
from r2bench.nodes import Node, NodeError, NodePool

CLOCK_PROBES = 3
PROBE_TIMEOUT_S = 15.0
FACTS_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class ClockSample:
    """One `date` probe: controller times around the request and the node's answer."""

    sent: float
    received: float
    node_time: float

    @property
    def round_trip(self) -> float:
        """Seconds from request to answer."""
        return self.received - self.sent

    @property
    def offset(self) -> float:
        """Node clock minus controller clock, assuming symmetric delays."""
        return self.node_time - (self.sent + self.received) / 2


def probe_clock(node: Node) -> ClockSample:
    """Ask the node for its time once."""
    sent = time.time()
    result = node.run(["date", "+%s.%N"], timeout=PROBE_TIMEOUT_S)
    received = time.time()
    try:
        node_time = float(result.stdout.strip())
    except ValueError as exc:
        raise NodeError(
            node.name, result.command, f"unexpected date output {result.stdout!r}"
        ) from exc
    return ClockSample(sent, received, node_time)


def gather_node(node: Node, testbed: Testbed, ssh_peers: list[NodeModel]) -> NodeFacts:
    """All facts from one node; an unreachable node gives facts with the error."""
    model = testbed.node(node.name)
    assert model is not None
    script = facts_script(testbed, model, ssh_peers) + setup_sections(testbed, model)
    try:
        samples = [probe_clock(node)]  # opens the connection the others reuse
        # The other probes go while the facts script runs (its ssh to the peers is the
        # slowest part of the doctor); the shortest round trip is kept all the same.
        with ThreadPoolExecutor(max_workers=1) as facts_thread:
            facts = facts_thread.submit(node.run, script, timeout=FACTS_TIMEOUT_S, check=False)
            samples += [probe_clock(node) for _ in range(CLOCK_PROBES - 1)]
            output = facts.result()
    except NodeError as exc:
        return NodeFacts(node.name, reachable=False, error=exc.message)
    best = min(samples, key=lambda sample: sample.round_trip)
    return NodeFacts(
        node.name,
        reachable=True,
        latency_s=best.round_trip,
        clock_offset_s=best.offset,
        sections=parse_sections(output.stdout),
    )


def ssh_peers_of(testbed: Testbed, model: NodeModel) -> list[NodeModel]:
    """Nodes the first node must reach by passwordless ssh (none on a local testbed)."""
    compute = testbed.compute_nodes  # mpirun reaches the nodes that run ranks, not SmartNICs
    if testbed.kind is TestbedKind.LOCAL or model is not compute[0]:
        return []
    return compute[1:]


def gather(testbed: Testbed, pool: NodePool) -> list[NodeFacts]:
    """Facts from every node, in testbed order."""
    peers = {model.name: ssh_peers_of(testbed, model) for model in testbed.nodes}
    gathered = pool.map(lambda node: gather_node(node, testbed, peers[node.name]))
    return [_as_facts(name, gathered[name]) for name in (m.name for m in testbed.nodes)]


def _as_facts(name: str, value: NodeFacts | NodeError) -> NodeFacts:
    if isinstance(value, NodeError):
        return NodeFacts(name, reachable=False, error=value.message)
    return value


def diagnose(testbed: Testbed, pool: NodePool | None = None) -> list[CheckResult]:
    """Gather facts and run every check (opens and closes a pool unless one is given)."""
    if pool is not None:
        facts = gather(testbed, pool)
    else:
        with NodePool.from_testbed(testbed) as own_pool:
            facts = gather(testbed, own_pool)
    # A host that runs no rank (a SmartNIC) is held to what it does: reachable, its clock, no
    # fault left behind; GPUs, MPI and the same OS as the GPU nodes are not asked of it.
    ranks = [f for f in facts if (model := testbed.node(f.node)) and model.runs_ranks]
    others = [f for f in facts if f not in ranks]
    results = run_checks(testbed, ranks) + host_checks(testbed, others)
    # Another live sweep's runs are named as its own, never as strays to kill.
    return attribute_to_holder(testbed, results + setup_checks(testbed, facts))
