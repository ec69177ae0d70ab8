"""Launch lines (pure): turn (testbed, job) into the argv to run on the launch node plus the
environment that argv needs, through the testbed's launcher (`registry.launcher_for`).

The launchers themselves are `mpirun.py` (Open MPI / HPC-X), `srun.py` (Slurm) and `local.py`
(one process); `base.py` says what each must define.
"""

from __future__ import annotations

from r2bench.config.testbed import Testbed
from r2bench.launch.base import Job, LaunchCommand
from r2bench.launch.registry import launcher_for

__all__ = ["Job", "LaunchCommand", "launch_command"]


def launch_command(testbed: Testbed, job: Job, *, as_root: bool = False) -> LaunchCommand:
    """The launch line of `job` by the testbed's launcher; `as_root`: run as root."""
    return launcher_for(testbed.launcher.kind).launch(testbed, job, as_root)
