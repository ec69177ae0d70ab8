"""Open MPI / HPC-X `mpirun` (pure): one rank per GPU, every variable passed with `-x`.

Every variable reaches every rank explicitly because R2CCL reads its knobs with getenv on each
rank. MPI's own traffic is pinned to the bootstrap interface (btl/oob `tcp_if_include`), which
the fault interlock therefore protects.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from r2bench.config.testbed import LauncherKind, Testbed
from r2bench.launch.base import (
    BootstrapSetting,
    CrashKind,
    CrashMessage,
    Job,
    LaunchCommand,
    LauncherSpec,
    ToolCheck,
    literal,
    one_gpu_per_process,
)

IF_SETTINGS = ("btl_tcp_if_include", "oob_tcp_if_include")
"""Open MPI settings that pin its own traffic to interfaces (names or CIDR subnets)."""


def mpirun_command(testbed: Testbed, job: Job, as_root: bool = False) -> LaunchCommand:
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
        for key in IF_SETTINGS:
            mca.setdefault(key, launcher.bootstrap_interface)
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


def _address(testbed: Testbed, name: str) -> str:
    node = testbed.node(name)
    return node.address if node else name


def mpirun_path(testbed: Testbed) -> str:
    """The mpirun the launcher will use: launcher.command, else mpi_home/bin, else PATH."""
    if testbed.launcher.command:
        return testbed.launcher.command
    if testbed.paths.mpi_home:
        return testbed.paths.mpi_home.rstrip("/") + "/bin/mpirun"
    return "mpirun"


def mpirun_version(text: str) -> str | None:
    """`Open MPI 4.1.4` from `mpirun --version` (Open MPI, HPC-X or MPICH's Hydra)."""
    if match := re.search(r"\((Open MPI|Intel\(R\) MPI[^)]*)\)\s+(\S+)", text):
        return f"{match.group(1)} {match.group(2)}"
    if match := re.search(r"HYDRA.*?Version:\s+(\S+)", text, re.DOTALL):
        return f"Hydra {match.group(1)}"
    lines = [line.strip() for line in text.splitlines()[1:] if line.strip()]
    return lines[0] if lines else None


def open_mpi_bootstrap(testbed: Testbed, env: Mapping[str, str]) -> list[BootstrapSetting]:
    """The testbed's bootstrap interface, then Open MPI's if_include settings: the launcher's
    `--mca` values first, then the run's `OMPI_MCA_*` variables (ranks read those too)."""
    launcher = testbed.launcher
    settings = []
    if launcher.bootstrap_interface:
        settings.append(
            BootstrapSetting("launcher.bootstrap_interface", launcher.bootstrap_interface, True)
        )
    values = [(f"launcher.mca.{key}", launcher.mca.get(key)) for key in IF_SETTINGS]
    values += [(f"env.OMPI_MCA_{key}", env.get(f"OMPI_MCA_{key}")) for key in IF_SETTINGS]
    return settings + [BootstrapSetting(src, value, False) for src, value in values if value]


_CONTINUATION = (
    # Open MPI 4 `[[26230,1],0]`, Open MPI 5 / PRRTE `[prterun-vm-1234@1,0]`.
    re.compile(r"Process name:\s*\[(?:\[\d+,\d+\]|[^\]\s]*@\d+),(?P<rank>\d+)\]"),
    re.compile(r"Exit code:\s*(?P<exit_code>-?\d+)"),
    re.compile(r"^\s*node\s+(?P<host>\S+)\s+exiting improperly"),
    re.compile(r"^\s*Node:\s*(?P<host>\S+)"),
)
"""The lines of a multi-line exit report that name the rank, its exit code and its node."""

CRASH_MESSAGES = (
    CrashMessage(
        CrashKind.SIGNALED,
        re.compile(
            r"process rank (?P<rank>\d+) with PID (?P<pid>\d+) on node (?P<host>\S+?)\.* "
            r"exited on signal (?P<signal>\d+)(?: \((?P<signal_name>[^)]*)\))?"
        ),
    ),
    CrashMessage(CrashKind.ABORTED, re.compile(r"^Primary job\s+terminated normally")),
    CrashMessage(
        CrashKind.EXITED,
        re.compile(r"due to process rank (?P<rank>\d+) with PID \d+ on\s*$"),
        _CONTINUATION,
    ),
    CrashMessage(CrashKind.EXITED, re.compile(r"exited with non-zero status"), _CONTINUATION),
    *(
        literal(CrashKind.LAUNCH_FAILED, text)
        for text in (
            "mpirun was unable to launch",
            "mpirun was unable to find the specified executable",
            "There are not enough slots available",
            "ORTE was unable to reliably start",
            "ORTE does not know how to route",
            "total processes failed to start",
            # mpirun starts its daemons over ssh
            "Host key verification failed",
            "Permission denied (publickey",
            "Could not resolve hostname",
            "execvp error",
        )
    ),
)

MPIRUN = LauncherSpec(
    kind=LauncherKind.MPIRUN,
    launch=mpirun_command,
    gpus_per_process=one_gpu_per_process,
    bootstrap=open_mpi_bootstrap,
    tool=ToolCheck(
        name="mpirun",
        path=mpirun_path,
        version=mpirun_version,
        missing_fix="install Open MPI/HPC-X so that `{path}` runs, or set "
        "launcher.command / paths.mpi_home in the testbed",
        mixed_fix="install the same MPI version on every node (mpirun refuses mixed versions)",
    ),
    crash_messages=CRASH_MESSAGES,
)
