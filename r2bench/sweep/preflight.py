"""Before each run: the run's nodes are as a fresh run needs them, or are put back so.

Three conditions on every node of the run: its data links are up (an RDMA port `ACTIVE`, a
netdev `up`; an IB port's IPoIB interface is not required), no process of any r2bench run is left (found by the R2B_RUN marker in its
environment), and no fault is recorded as active. Left-overs of this sweep's own runs (a
controller killed mid-run) are cleaned once (end the processes, `heal.sh`); anything else is
reported, and the sweep stops rather than measure on a damaged testbed.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from r2bench.config.testbed import NicKind, Testbed
from r2bench.config.testbed import Node as NodeModel
from r2bench.nodes import NodeError, NodePool
from r2bench.plan.model import PlannedRun
from r2bench.sweep.agent import NodeAgent
from r2bench.sweep.nodeside import own_records_script

CHECK_TIMEOUT_S = 30.0


def node_check_script(model: NodeModel, work_dir: str) -> str:
    """A bash line printing `problem: ...` for each data link down and each active fault.

    An RDMA NIC is judged by its port (`state` ACTIVE), whatever its link layer; a netdev must
    be `up` too, except an InfiniBand port's IPoIB interface, which RDMA does not use (often
    not configured at all on IB fabrics). R2B_SYSFS (default /sys) is where sysfs is. The
    files are read with bash's `read` (a check runs before every run: no `cat` or `grep`
    started for them)."""
    checks = []
    for nic in model.data_nics:
        if nic.rdma_device:
            path = f"/class/infiniband/{nic.rdma_device}/ports/{nic.port}/state"
            problem = f"problem: {nic.name} ({nic.rdma_device}/{nic.port}) is not ACTIVE"
            checks.append(
                f's=; read -r s < "${{R2B_SYSFS:-/sys}}"{shlex.quote(path)} 2>/dev/null; '
                f"[[ $s == *ACTIVE* ]] || echo {shlex.quote(problem)}"
            )
        if nic.netdev and nic.kind is not NicKind.IB:
            path = f"/class/net/{nic.netdev}/operstate"
            problem = f"problem: {nic.name} ({nic.netdev}) is not up"
            checks.append(
                f's=; read -r s < "${{R2B_SYSFS:-/sys}}"{shlex.quote(path)} 2>/dev/null; '
                f"[[ $s == up ]] || echo {shlex.quote(problem)}"
            )
    checks.append(
        f"for r in $({own_records_script(work_dir)}); do "
        'echo "problem: fault record $r is active"; done'
    )
    return "; ".join(checks)


@dataclass(frozen=True)
class _NodeState:
    problems: list[str]  # links down, faults recorded
    strays: dict[int, str]  # pid -> run id of every process of any r2bench run


def _survey(
    pool: NodePool, agents: Mapping[str, NodeAgent], testbed: Testbed, names: list[str]
) -> dict[str, _NodeState]:
    """Each node's state, all nodes at once (runs wait on preflight)."""
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

    # every node's two questions at once: a run waits on the slowest answer, not their sum
    with ThreadPoolExecutor(max_workers=2 * len(names) or 1) as threads:
        links = {name: threads.submit(problems, name) for name in names}
        procs = {name: threads.submit(agents[name].run_processes) for name in names}
        return {name: _NodeState(links[name].result(), procs[name].result()) for name in names}


def preflight_problems(
    testbed: Testbed,
    pool: NodePool,
    agents: Mapping[str, NodeAgent],
    run: PlannedRun,
    own_runs: frozenset[str] = frozenset(),
) -> list[str]:
    """What keeps `run` from starting on a clean testbed, after one attempt to clean up."""
    names = sorted({*run.spec.nodes, *(f.inject.node for f in run.faults)})
    found = _survey(pool, agents, testbed, names)
    if not _clean(testbed, agents, found, own_runs | {run.spec.run_id}):
        return []
    problems = []
    for name, node in _survey(pool, agents, testbed, names).items():
        problems += [f"{name}: {p}" for p in node.problems]
        if node.strays:
            listing = ", ".join(f"pid {pid} (run {r})" for pid, r in sorted(node.strays.items()))
            problems.append(f"{name}: processes of another r2bench run are running: {listing}")
    return problems


def _clean(
    testbed: Testbed,
    agents: Mapping[str, NodeAgent],
    states: Mapping[str, _NodeState],
    own_runs: frozenset[str],
) -> bool:
    """Clean what this sweep left behind; True when there was anything wrong at all."""
    if not any(node.problems or node.strays for node in states.values()):
        return False
    for name, node in states.items():
        for run_id in sorted(set(node.strays.values()) & own_runs):
            agents[name].kill_run(run_id)
    heal = ["bash", f"{testbed.paths.work_dir}/injectors/heal.sh"]
    for name, node in states.items():
        if node.problems:
            agents[name].run(heal, timeout=180)
    return True
