"""Launch lines for mpirun (Open MPI / HPC-X), srun (Slurm) and a local single process (pure).

Each launcher turns (testbed, job) into the argv to run on the launch node plus the environment
that argv needs. Every variable reaches every rank explicitly (mpirun `-x`; srun: set in srun's
environment, handed on by `--export=ALL`), because R2CCL reads its knobs with getenv on each
rank.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field

from r2bench.config.testbed import LauncherKind, Testbed


@dataclass(frozen=True)
class Job:
    """What to launch: the program argv per rank, where, and its environment."""

    program: list[str]
    nodes: list[str]
    ranks_per_node: int
    env: dict[str, str]
    gpus_per_rank: int = 1


@dataclass(frozen=True)
class LaunchCommand:
    """The argv to run on `node` (the launch node) and environment set for it there."""

    node: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)

    def shell(self) -> str:
        """One copy-pasteable shell line, every word quoted."""
        prefix = ["env", *(f"{k}={v}" for k, v in self.env.items())] if self.env else []
        return shlex.join(prefix + self.argv)


def launch_command(testbed: Testbed, job: Job, *, as_root: bool = False) -> LaunchCommand:
    """Dispatch to the testbed's launcher."""
    kind = testbed.launcher.kind
    if kind is LauncherKind.MPIRUN:
        return mpirun_command(testbed, job, as_root=as_root)
    if kind is LauncherKind.SRUN:
        return srun_command(testbed, job)
    return local_command(testbed, job)


def mpirun_command(testbed: Testbed, job: Job, *, as_root: bool = False) -> LaunchCommand:
    """Open MPI / HPC-X: one rank per GPU, `-x` for every variable, bootstrap on management.

    Where some node has variables of its own (`Node.env`: NCCL_HOSTID where namespace nodes
    share one host's GPUs), each node becomes one app context (`-np n -H host:n -x ... prog`,
    separated by `:`); Open MPI applies `-x` per context, so the job's variables repeat."""
    launcher = testbed.launcher
    argv = [launcher.command or "mpirun"]
    if launcher.allow_run_as_root or as_root:
        argv.append("--allow-run-as-root")
    per_node = {name: node.env for name in job.nodes if (node := testbed.node(name)) and node.env}
    if not per_node:
        hosts = ",".join(f"{_address(testbed, name)}:{job.ranks_per_node}" for name in job.nodes)
        argv += ["-np", str(job.ranks_per_node * len(job.nodes)), "-H", hosts]
    argv += ["--map-by", f"ppr:{job.ranks_per_node}:node", "--bind-to", launcher.bind_to]
    mca = dict(launcher.mca)
    if launcher.bootstrap_interface:
        mca.setdefault("btl_tcp_if_include", launcher.bootstrap_interface)
        mca.setdefault("oob_tcp_if_include", launcher.bootstrap_interface)
    for key, value in mca.items():
        argv += ["--mca", key, value]
    if not per_node:
        return LaunchCommand(job.nodes[0], argv + _exports(job.env) + launcher.args + job.program)
    argv += launcher.args
    for index, name in enumerate(job.nodes):
        host = f"{_address(testbed, name)}:{job.ranks_per_node}"
        argv += [":"] if index else []
        argv += ["-np", str(job.ranks_per_node), "-H", host]
        argv += _exports({**job.env, **per_node.get(name, {})}) + job.program
    return LaunchCommand(job.nodes[0], argv)


def _exports(env: dict[str, str]) -> list[str]:
    return [word for key, value in env.items() for word in ("-x", f"{key}={value}")]


def srun_command(testbed: Testbed, job: Job) -> LaunchCommand:
    """Slurm: the variables are set in srun's own environment and `--export=ALL` hands them
    to every task. `--export=ALL,K=V,...` is not used: srun splits that list at commas, so
    a value such as `NCCL_IB_HCA=mlx5_0:1,mlx5_1:1` would be cut and a value containing
    `,LD_PRELOAD=...` would smuggle in another variable."""
    launcher = testbed.launcher
    argv = [launcher.command or "srun", f"--nodes={len(job.nodes)}"]
    argv += [f"--ntasks-per-node={job.ranks_per_node}", f"--nodelist={','.join(job.nodes)}"]
    if any((node := testbed.node(name)) is not None and node.gpus for name in job.nodes):
        argv.append(f"--gpus-per-node={job.ranks_per_node * job.gpus_per_rank}")
    argv.append("--export=ALL")
    argv += launcher.args
    return LaunchCommand(job.nodes[0], argv + job.program, dict(job.env))


def local_command(testbed: Testbed, job: Job) -> LaunchCommand:
    """One process on the only node; nccl-tests drives all its GPUs with -g (set by the caller)."""
    return LaunchCommand(job.nodes[0], [*testbed.launcher.args, *job.program], dict(job.env))


def _address(testbed: Testbed, name: str) -> str:
    node = testbed.node(name)
    return node.address if node else name
