"""Launch lines are exact: mpirun, srun and local, from the same job."""

from __future__ import annotations

import shlex

from r2bench.config.testbed import Launcher, LauncherKind, Nic, NicKind, Node, Testbed
from r2bench.launch.launchers import Job, launch_command
from r2bench.launch.registry import LAUNCHERS, launcher_for

PROGRAM = ["/w/nccl-tests/build/all_reduce_perf", "-b", "8", "-e", "1G", "-g", "1"]
ENV = {"R2CC_MODE": "1", "NCCL_SOCKET_IFNAME": "$(reboot) x"}


def make_testbed(kind: LauncherKind, **launcher: object) -> Testbed:
    nics = [Nic(name="eno1", kind=NicKind.ETH, netdev="eno1", management=True)]
    nodes = [Node(name=f"n{i}", address=f"10.0.0.{i + 1}", gpus=8, nics=nics) for i in range(2)]
    return Testbed(name="t", nodes=nodes, launcher=Launcher(kind=kind, **launcher))  # type: ignore[arg-type]


def test_mpirun_line_is_exact() -> None:
    tb = make_testbed(
        LauncherKind.MPIRUN,
        bootstrap_interface="eno1",
        mca={"pml": "ob1"},
        args=["--report-bindings"],
    )
    command = launch_command(tb, Job(PROGRAM, ["n0", "n1"], 8, ENV))
    assert command.node == "n0" and command.env == {}
    assert command.argv == [
        "mpirun",
        "-np",
        "16",
        "-H",
        "10.0.0.1:8,10.0.0.2:8",
        "--map-by",
        "ppr:8:node",
        "--bind-to",
        "none",
        "--mca",
        "pml",
        "ob1",
        "--mca",
        "btl_tcp_if_include",
        "eno1",
        "--mca",
        "oob_tcp_if_include",
        "eno1",
        "-x",
        "R2CC_MODE=1",
        "-x",
        "NCCL_SOCKET_IFNAME=$(reboot) x",
        "--report-bindings",
        *PROGRAM,
    ]
    assert shlex.split(command.shell()) == command.argv  # quoting survives a shell round trip


def test_mpirun_as_root_only_when_asked() -> None:
    job = Job(PROGRAM, ["n0"], 1, {})
    assert "--allow-run-as-root" not in launch_command(make_testbed(LauncherKind.MPIRUN), job).argv
    assert (
        "--allow-run-as-root"
        in launch_command(make_testbed(LauncherKind.MPIRUN, allow_run_as_root=True), job).argv
    )
    assert (
        "--allow-run-as-root"
        in launch_command(make_testbed(LauncherKind.MPIRUN), job, as_root=True).argv
    )


def test_srun_line_is_exact() -> None:
    command = launch_command(
        make_testbed(LauncherKind.SRUN, command="/opt/slurm/bin/srun"),
        Job(PROGRAM, ["n0", "n1"], 8, ENV),
    )
    assert command.argv == [
        "/opt/slurm/bin/srun",
        "--nodes=2",
        "--ntasks-per-node=8",
        "--nodelist=n0,n1",
        "--gpus-per-node=8",
        "--export=ALL",
        *PROGRAM,
    ]
    assert command.env == ENV


def test_local_runs_the_program_with_its_environment() -> None:
    command = launch_command(make_testbed(LauncherKind.LOCAL), Job(PROGRAM, ["n0"], 8, ENV))
    assert command.argv == PROGRAM and command.env == ENV
    assert shlex.split(command.shell()) == [
        "env",
        "R2CC_MODE=1",
        "NCCL_SOCKET_IFNAME=$(reboot) x",
        *PROGRAM,
    ]


def test_every_launcher_kind_has_one_launcher() -> None:
    """The registry knows every kind a testbed file may name, each under its own kind."""
    assert set(LAUNCHERS) == set(LauncherKind)
    assert all(spec.kind is kind for kind, spec in LAUNCHERS.items())


def test_gpus_per_process() -> None:
    """nccl-tests' -g: one GPU per rank process, all of them in the local launcher's one."""
    assert [launcher_for(kind).gpus_per_process(8) for kind in LauncherKind] == [1, 1, 8]
