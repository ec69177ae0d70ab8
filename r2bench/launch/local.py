"""No launcher (pure): one process on the only node drives all its GPUs (nccl-tests' `-g`)."""

from __future__ import annotations

from r2bench.config.testbed import LauncherKind, Testbed
from r2bench.launch.base import Job, LaunchCommand, LauncherSpec
from r2bench.launch.mpirun import open_mpi_bootstrap


def local_command(testbed: Testbed, job: Job, as_root: bool = False) -> LaunchCommand:
    """The program itself, with the launcher's extra words before it and its environment."""
    return LaunchCommand(job.nodes[0], [*testbed.launcher.args, *job.program], dict(job.env))


def all_gpus_in_one_process(ranks_per_node: int) -> int:
    """One process drives every rank's GPU."""
    return ranks_per_node


LOCAL = LauncherSpec(
    kind=LauncherKind.LOCAL,
    launch=local_command,
    gpus_per_process=all_gpus_in_one_process,
    # An MPI build of nccl-tests still starts Open MPI in its one process, which reads the
    # run's OMPI_MCA_* variables; the testbed's MPI settings stay protected too.
    bootstrap=open_mpi_bootstrap,
)
