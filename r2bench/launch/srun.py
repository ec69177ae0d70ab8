"""Slurm `srun` (pure): the job's variables are set in srun's own environment.

`--export=ALL` hands them to every task. `--export=ALL,K=V,...` is not used: srun splits that
list at commas, so a value such as `NCCL_IB_HCA=mlx5_0:1,mlx5_1:1` would be cut and a value
containing `,LD_PRELOAD=...` would smuggle in another variable.
"""

from __future__ import annotations

import re

from r2bench.config.testbed import LauncherKind, Testbed
from r2bench.launch.base import (
    CrashKind,
    CrashMessage,
    Job,
    LaunchCommand,
    LauncherSpec,
    one_gpu_per_process,
)
from r2bench.launch.mpirun import open_mpi_bootstrap


def srun_command(testbed: Testbed, job: Job, as_root: bool = False) -> LaunchCommand:
    """One task per rank on the job's nodes; `as_root` changes nothing (srun has no such
    switch)."""
    launcher = testbed.launcher
    argv = [launcher.command or "srun", f"--nodes={len(job.nodes)}"]
    argv += [f"--ntasks-per-node={job.ranks_per_node}", f"--nodelist={','.join(job.nodes)}"]
    if any((node := testbed.node(name)) is not None and node.gpus for name in job.nodes):
        argv.append(f"--gpus-per-node={job.ranks_per_node * job.gpus_per_rank}")
    argv.append("--export=ALL")
    argv += launcher.args
    return LaunchCommand(job.nodes[0], argv + job.program, dict(job.env))


SRUN = LauncherSpec(
    kind=LauncherKind.SRUN,
    launch=srun_command,
    gpus_per_process=one_gpu_per_process,
    # The tasks may be Open MPI processes (nccl-tests built with MPI=1), which read the run's
    # OMPI_MCA_* variables whoever starts them; the testbed's MPI settings stay protected too.
    bootstrap=open_mpi_bootstrap,
    crash_messages=(
        CrashMessage(
            CrashKind.EXITED,
            re.compile(
                r"^srun: error: (?P<host>[^:\s]+): tasks? (?P<rank>\d+)(?:[-,]\S*)?: "
                r"Exited with exit code (?P<exit_code>\d+)"
            ),
        ),
    ),
)
