"""Per-NIC counters of a run: `injectors/sampler.sh` on every node of the run, started through
the node's agent just before the launch, stopped at teardown, fetched into the run folder as
`node/<node>/counters.tsv`.

The sampler runs with `R2B_RUN=<run id>` in its environment, so the run's kill-by-run clean-up
ends it too. `R2BENCH_COUNTERS_MS` (controller environment) sets the interval: 10 to 100 ms,
default 50; 0 turns the sampler off.
"""

from __future__ import annotations

import os

from r2bench.config.testbed import Testbed
from r2bench.nodes import NodeError, NodePool
from r2bench.parse.nictraffic import COUNTERS_FILE
from r2bench.plan.model import PlannedRun
from r2bench.runfolder import store as st
from r2bench.safeio import writable
from r2bench.sweep.agent import NodeAgent

DEFAULT_INTERVAL_MS = 50
INTERVAL_RANGE_MS = (10, 100)
ENV = "R2BENCH_COUNTERS_MS"


def interval_ms() -> int:
    """The sampling interval (0: off), from R2BENCH_COUNTERS_MS, clamped to 10..100 ms."""
    raw = os.environ.get(ENV, "").strip()
    try:
        value = int(raw) if raw else DEFAULT_INTERVAL_MS
    except ValueError:
        return DEFAULT_INTERVAL_MS
    if value <= 0:
        return 0
    return min(max(value, INTERVAL_RANGE_MS[0]), INTERVAL_RANGE_MS[1])


def nic_args(testbed: Testbed, node: str) -> list[str]:
    """`NAME:NETDEV:RDMA_DEVICE:PORT` of every data NIC of a node."""
    model = testbed.node(node)
    if model is None:
        return []
    return [
        f"{n.name}:{n.netdev or ''}:{n.rdma_device or ''}:{n.port}"
        for n in model.data_nics
        if n.netdev or n.rdma_device
    ]


def remote_paths(run: PlannedRun, node: str) -> tuple[str, str]:
    """The node-side counters file and pid file (nodes may share the run folder)."""
    return f"{run.run_dir}/counters.{node}.tsv", f"{run.run_dir}/.sampler.{node}.pid"


def start(agent: NodeAgent, run: PlannedRun, testbed: Testbed) -> int | None:
    """Start the node's sampler (it returns at once); None when off or the node is not in
    the run, else the start command's exit code."""
    ms = interval_ms()
    nics = nic_args(testbed, agent.name)
    if not ms or agent.name not in run.spec.nodes or not nics:
        return None
    out, pidfile = remote_paths(run, agent.name)
    script = f"{agent.injectors_dir}/sampler.sh"
    argv = ["env", f"R2B_RUN={run.spec.run_id}", "bash", "--noprofile", "--norc", script]
    return agent.run([*argv, "start", out, pidfile, str(ms), *nics])


def stop(agent: NodeAgent, run: PlannedRun) -> int | None:
    """Stop the node's sampler (the run's kill-by-run would end it anyway)."""
    if agent.name not in run.spec.nodes:
        return None
    _, pidfile = remote_paths(run, agent.name)
    script = f"{agent.injectors_dir}/sampler.sh"
    return agent.run(["bash", "--noprofile", "--norc", script, "stop", pidfile])


def fetch(run: PlannedRun, pool: NodePool, folder: st.RunFolder) -> list[str]:
    """Copy each node's counters into `node/<node>/counters.tsv`; returns the nodes done.
    Nothing when the sampler is off (a file left by an earlier run of the same spec, in the
    same node-side run folder, is not this run's)."""
    done: list[str] = []
    if not interval_ms():
        return done
    for name in run.spec.nodes:
        remote, _ = remote_paths(run, name)
        local = writable(folder.path, folder.path / f".counters.{name}.tmp")
        try:
            pool[name].get(remote, local)
            data = local.read_bytes()
            if not data:
                continue
            folder.write_node_file(name, COUNTERS_FILE, data)
            done.append(name)
        except (NodeError, OSError, KeyError):
            continue
        finally:
            local.unlink(missing_ok=True)
    return done
