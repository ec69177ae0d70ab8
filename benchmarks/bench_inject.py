"""Fault trigger latency through the sweep's fault path, against a fresh ssh (root; Linux).

    python benchmarks/bench_inject.py [--testbed TESTBED.yaml] [--count 50]

Each of `--count` injections goes the way a sweep's does: the node's agent (one open ssh
channel, started once) arms `link.sh inject --armed` on node1's nic1, the controller fires it
and reads the injector's event line; latency = applied (node clock, corrected by the offset
measured over the same channel) - request sent (controller clock). The link is reverted after
each. As the reference, in the same run, a fresh `ssh node1 ip link set dev nic1 down` (then up)
is timed from start to exit. Without --testbed it brings up (and takes down) its own 2-node
virtual testbed. The last lines are

    inject p50_ms=<x> p99_ms=<y> fresh_ssh_p50_ms=<z> ratio=<z/x>
    target p50 <= 2 ms, p99 <= 5 ms, ratio >= 20: met|NOT met

Exit code: 0 when every target is met, 1 otherwise.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from r2bench.config.load import load_testbed
from r2bench.nodes import NodePool
from r2bench.sweep.agent import NodeAgent
from r2bench.sweep.nodeside import injectors_dir, install_injectors
from r2bench.testbeds.virtual.lifecycle import throwaway_testbed

NODE, NIC = "node1", "nic1"
FRESH_SSH_SAMPLES = 20
ARM_LEAD_S = 0.2
# The targets (docs/sweep.md): request-to-applied milliseconds, and fresh ssh / agent.
P50_TARGET_MS = 2.0
P99_TARGET_MS = 5.0
RATIO_TARGET = 20.0


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered)) - 1))]


@dataclass
class Legs:
    """Where each injection's milliseconds go: the trigger's way to the injector (the
    controller's write, the ssh channel, the agent's read and its FIFO, the injector's read),
    and the injector's own work from there (`ip link set`, a process of its own)."""

    to_injector: list[float] = field(default_factory=list)
    applying: list[float] = field(default_factory=list)

    def show(self) -> None:
        """Median and p99 of each leg."""
        for name, values in (
            ("trigger -> injector", self.to_injector),
            ("injector -> applied", self.applying),
        ):
            if values:
                print(
                    f"  {name}: p50 {statistics.median(values):.2f} ms, p99 {percentile(values, 99):.2f} ms"
                )


def agent_latencies(testbed_file: Path, count: int, legs: Legs) -> list[float]:
    """Request-to-applied milliseconds of `count` armed injections through the agent."""
    testbed = load_testbed(testbed_file)
    target = injectors_dir(testbed)
    script = f"{target}/link.sh"
    with NodePool.from_testbed(testbed) as pool:
        install_injectors(pool[NODE], target)
        agent = NodeAgent(pool[NODE], target).start()
        try:
            offset = agent.clock_offset(5).offset
            latencies = []
            for i in range(count):
                tag = f"r2b-bench-{i}"
                seen = agent.fault_count
                armed = agent.arm(
                    [
                        "bash",
                        script,
                        "inject",
                        "--armed",
                        "--tag",
                        tag,
                        "--lease-s",
                        "60",
                        "--dev",
                        NIC,
                    ]
                )
                line, _ = agent.wait_fault(tag, ("armed",), seen, 30)
                assert line is not None and line.ok, f"not armed: {line}"
                time.sleep(ARM_LEAD_S)  # a sweep arms before the launch, well ahead of the trigger
                sent = agent.fire(armed)
                line, _ = agent.wait_fault(tag, ("inject",), seen, 30)
                assert line is not None and line.result == "ok", f"not injected: {line}"
                applied = line.time_field("applied")
                requested = line.time_field("requested")
                assert applied is not None
                latencies.append((applied - offset - sent) * 1000)
                if requested is not None:
                    legs.to_injector.append((requested - offset - sent) * 1000)
                    legs.applying.append((applied - requested) * 1000)
                code = agent.run(["bash", script, "revert", "--tag", tag, "--dev", NIC])
                assert code == 0, "revert failed"
            return latencies
        finally:
            agent.close()


def fresh_ssh_ms(testbed_file: Path) -> list[float]:
    """Wall milliseconds of a fresh `ssh node ip link set dev nic down` (the reference)."""
    config = load_testbed(testbed_file).nodes[0].ssh.config_file or ""
    times = []
    for _ in range(FRESH_SSH_SAMPLES):
        start = time.perf_counter()
        subprocess.run(["ssh", "-F", config, NODE, f"ip link set dev {NIC} down"], check=True)
        times.append((time.perf_counter() - start) * 1000)
        subprocess.run(["ssh", "-F", config, NODE, f"ip link set dev {NIC} up"], check=True)
        time.sleep(0.05)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--testbed", type=Path, help="a virtual testbed file (default: own)")
    parser.add_argument("--count", type=int, default=50)
    args = parser.parse_args()
    with throwaway_testbed(args.testbed, "bi") as testbed_file:
        legs = Legs()
        latencies = agent_latencies(testbed_file, args.count, legs)
        fresh = fresh_ssh_ms(testbed_file)
    p50, p99 = statistics.median(latencies), percentile(latencies, 99)
    fresh_p50 = statistics.median(fresh)
    ratio = fresh_p50 / p50
    print(f"agent: n={len(latencies)} min={min(latencies):.2f} ms max={max(latencies):.2f} ms")
    print(f"fresh ssh: n={len(fresh)} min={min(fresh):.1f} ms max={max(fresh):.1f} ms")
    print("where an injection's time goes:")
    legs.show()
    print(
        f"inject p50_ms={p50:.2f} p99_ms={p99:.2f} fresh_ssh_p50_ms={fresh_p50:.1f} ratio={ratio:.1f}"
    )
    met = p50 <= P50_TARGET_MS and p99 <= P99_TARGET_MS and ratio >= RATIO_TARGET
    print(
        f"target p50 <= {P50_TARGET_MS:g} ms, p99 <= {P99_TARGET_MS:g} ms, ratio >= "
        f"{RATIO_TARGET:g}: {'met' if met else 'NOT met'}"
    )
    return 0 if met else 1


if __name__ == "__main__":
    if sys.platform != "linux":
        sys.exit("Linux only (network namespaces)")
    sys.exit(main())
