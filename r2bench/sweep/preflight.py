"""Before each run: the run's nodes are as a fresh run needs them, or are put back so.

Three conditions on every node of the run: its data links are up (operstate `up`, or an IB
port `ACTIVE`), no process of any r2bench run is left (found by the R2B_RUN marker in its
environment), and no fault is recorded as active. Left-overs of this sweep's own runs (a
controller killed mid-run) are cleaned once (end the processes, `heal.sh`); anything else is
reported, and the sweep stops rather than measure on a damaged testbed.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from r2bench.config.testbed import Node as NodeModel
from r2bench.config.testbed import Testbed
from r2bench.nodes import NodeError, NodePool
from r2bench.plan.model import PlannedRun
from r2bench.sweep.agent import NodeAgent
from r2bench.sweep.nodeside import own_records_script

CHECK_TIMEOUT_S = 30.0

T = TypeVar("T")


def node_check_script(model: NodeModel, work_dir: str) -> str:
    """A bash line printing `problem: ...` for each data link down and each active fault."""
    checks = []
    for nic in model.data_nics:
        if nic.netdev:
            path = shlex.quote(f"/sys/class/net/{nic.netdev}/operstate")
            checks.append(
                f'[ "$(cat {path} 2>/dev/null)" = up ] || '
                f"echo {shlex.quote(f'problem: {nic.name} ({nic.netdev}) is not up')}"
            )
        elif nic.rdma_device:
            path = shlex.quote(f"/sys/class/infiniband/{nic.rdma_device}/ports/{nic.port}/state")
            checks.append(
                f"grep -q ACTIVE {path} 2>/dev/null || "
                f"echo {shlex.quote(f'problem: {nic.name} ({nic.rdma_device}/{nic.port}) is not ACTIVE')}"
            )
    checks.append(
        f"for r in $({own_records_script(work_dir)}); do "
        'echo "problem: fault record $r is active"; done'
    )
    return "; ".join(checks)


def _per_node(names: list[str], check: Callable[[str], T]) -> dict[str, T]:
    """`check` on every node at once: each costs a round trip, and runs wait on preflight."""
    if len(names) <= 1:
        return {name: check(name) for name in names}
    with ThreadPoolExecutor(max_workers=len(names)) as threads:
        return dict(zip(names, threads.map(check, names), strict=True))


def _node_problems(
    pool: NodePool, agents: Mapping[str, NodeAgent], testbed: Testbed, names: list[str]
) -> dict[str, list[str]]:
    work = testbed.paths.work_dir

    def problems(name: str) -> list[str]:
        model = testbed.node(name)
        assert model is not None
        script = node_check_script(model, work)
        try:
            # The usual answer, "nothing wrong", through the open agent (one round trip);
            # the listing of what is wrong through a command of its own.
            quiet = ["bash", "--noprofile", "--norc", "-c", f'[ -z "$({script})" ]']
            if agents[name].run(quiet, timeout=CHECK_TIMEOUT_S) == 0:
                return []
            out = pool[name].run(script, timeout=CHECK_TIMEOUT_S, check=False)
        except NodeError as exc:
            return [f"unreachable: {exc.message}"]
        prefix = "problem: "
        return [ln[len(prefix) :] for ln in out.stdout.splitlines() if ln.startswith(prefix)]

    return {name: lines for name, lines in _per_node(names, problems).items() if lines}


def _strays(agents: Mapping[str, NodeAgent], names: list[str]) -> dict[str, dict[int, str]]:
    found = _per_node(names, lambda name: agents[name].run_processes())
    return {name: procs for name, procs in found.items() if procs}


def preflight_problems(
    testbed: Testbed,
    pool: NodePool,
    agents: Mapping[str, NodeAgent],
    run: PlannedRun,
    own_runs: frozenset[str] = frozenset(),
) -> list[str]:
    """What keeps `run` from starting on a clean testbed, after one attempt to clean up."""
    names = sorted({*run.spec.nodes, *(f.node for f in run.faults)})
    if not _clean(testbed, pool, agents, names, own_runs | {run.spec.run_id}):
        return []
    problems = [
        f"{n}: {p}" for n, ps in _node_problems(pool, agents, testbed, names).items() for p in ps
    ]
    for name, procs in _strays(agents, names).items():
        listing = ", ".join(f"pid {pid} (run {run_id})" for pid, run_id in sorted(procs.items()))
        problems.append(f"{name}: processes of another r2bench run are running: {listing}")
    return problems


def _clean(
    testbed: Testbed,
    pool: NodePool,
    agents: Mapping[str, NodeAgent],
    names: list[str],
    own_runs: frozenset[str],
) -> bool:
    """Clean what this sweep left behind; True when there was anything wrong at all."""
    faulty = _node_problems(pool, agents, testbed, names)
    strays = _strays(agents, names)
    if not faulty and not strays:
        return False
    for name, procs in strays.items():
        for run_id in sorted(set(procs.values()) & own_runs):
            agents[name].kill_run(run_id)
    heal = ["bash", f"{testbed.paths.work_dir}/injectors/heal.sh"]
    for name in faulty:
        agents[name].run(heal, timeout=180)
    return True
