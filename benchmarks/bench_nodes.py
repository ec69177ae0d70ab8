"""Per-command cost: r2bench's SshNode (one persistent connection) vs a fresh `ssh` per command.

Usage:
    python benchmarks/bench_nodes.py                      # against a throwaway sshd on 127.0.0.1
    python benchmarks/bench_nodes.py testbed.yaml [--node NAME] [-n 50]

Both sides run `true` N times on the same host with the same key and host-key checking.
The fresh-ssh side uses BatchMode and the node's ssh_config (for the loopback server, the
generated config that names the key and known_hosts).

Target: the persistent connection at least 10x faster per command (median against median);
exit code 0 when it is met, 1 otherwise.
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from r2bench.config.load import load_testbed
from r2bench.config.testbed import Node as NodeModel
from r2bench.nodes import SshNode

TARGET_RATIO = 10.0  # median fresh-ssh seconds per command / median persistent ones, at least


@dataclass(frozen=True)
class Timing:
    """Seconds per command for one way of running it."""

    label: str
    samples: list[float]

    def line(self) -> str:
        """A one-line summary in milliseconds."""
        ms = sorted(s * 1000 for s in self.samples)
        p95 = ms[min(len(ms) - 1, int(len(ms) * 0.95))]
        return (
            f"{self.label:<34} mean {statistics.fmean(ms):7.2f} ms  median "
            f"{statistics.median(ms):7.2f} ms  p95 {p95:7.2f} ms  (n={len(ms)})"
        )


def time_each(label: str, count: int, action: Callable[[], object]) -> Timing:
    """Run `action` `count` times, timing each call."""
    samples = []
    for _ in range(count):
        started = time.perf_counter()
        action()
        samples.append(time.perf_counter() - started)
    return Timing(label, samples)


def ssh_argv(model: NodeModel) -> list[str]:
    """A fresh `ssh ... true` for the node, with the same options SshNode uses."""
    options = model.ssh
    argv = ["ssh", "-o", "BatchMode=yes"]
    if options.config_file:
        argv += ["-F", options.config_file]
    if options.known_hosts:
        argv += ["-o", f"UserKnownHostsFile={options.known_hosts}"]
    argv += ["-o", f"StrictHostKeyChecking={'yes' if options.strict_host_key_checking else 'no'}"]
    if options.key:
        argv += ["-i", options.key, "-o", "IdentitiesOnly=yes"]
    if options.jump_host:
        argv += ["-J", options.jump_host]
    if options.user:
        argv += ["-l", options.user]
    return [*argv, "-p", str(options.port), model.address, "true"]


def bench(model: NodeModel, count: int) -> tuple[Timing, Timing]:
    """Time both ways of running `true` on the node."""
    argv = ssh_argv(model)
    print(f"fresh ssh command: {shlex.join(argv)}")
    with SshNode.from_model(model) as node:
        node.run("true")  # connect once; the sweep keeps this connection
        persistent = time_each("SshNode.run (persistent)", count, lambda: node.run("true"))
    fresh = time_each(
        "fresh ssh process per command", count, lambda: subprocess.run(argv, check=True)
    )
    return persistent, fresh


@contextmanager
def loopback_node() -> Iterator[NodeModel]:
    """A throwaway sshd on 127.0.0.1 (the test helper) and a node model reaching it."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from tests.support.helpers_sshd import SshServer

    with tempfile.TemporaryDirectory(prefix="r2bench-bench-") as tmp:
        server = SshServer(Path(tmp)).prepare().start()
        try:
            node = {"name": "loopback", "address": "127.0.0.1", "ssh": server.ssh_settings()}
            yield NodeModel.model_validate(node)
        finally:
            server.stop()


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; exit 1 if the persistent connection is less than TARGET_RATIO times
    faster."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("testbed", nargs="?", type=Path, help="testbed YAML (default: loopback)")
    parser.add_argument("--node", help="node of the testbed (default: the first)")
    parser.add_argument("-n", "--count", type=int, default=50, help="commands per side")
    args = parser.parse_args(argv)
    if args.testbed is None:
        with loopback_node() as model:
            persistent, fresh = bench(model, args.count)
    else:
        testbed = load_testbed(args.testbed)
        chosen = testbed.node(args.node) if args.node else testbed.nodes[0]
        if chosen is None:
            parser.error(f"no node {args.node!r} in {args.testbed}")
        persistent, fresh = bench(chosen, args.count)
    ratio = statistics.median(fresh.samples) / statistics.median(persistent.samples)
    print(persistent.line())
    print(fresh.line())
    print(f"ratio (median fresh / median persistent): {ratio:.1f}x (target >= {TARGET_RATIO:.0f}x)")
    return 0 if ratio >= TARGET_RATIO else 1


if __name__ == "__main__":
    sys.exit(main())
