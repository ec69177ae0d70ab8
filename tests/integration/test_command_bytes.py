"""Every value that reaches a node's command line arrives byte for byte: the launch line
(mpirun `-x`, srun's environment, local) and the fault commands, run through a real bash with
stand-in launchers and injectors that write down exactly what they received."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml

from r2bench.config.testbed import Launcher, LauncherKind, Nic, NicKind, Node, Testbed
from r2bench.launch.launchers import Job, launch_command
from r2bench.plan.build import load_inputs, make_plan
from tests.support import paths

ROOT = paths.REPO
HOSTILE_ENV = {
    "NCCL_IB_HCA": "mlx5_0:1,mlx5_1:1",
    "NIC_LIST": "node0=198.18.1.10,198.18.2.10;node1=198.18.1.11,198.18.2.11",
    "SMUGGLE": "x,LD_PRELOAD=/tmp/evil.so",
    "EQUALS": "a=b=c",
    "QUOTES": 'it\'s "quoted" `id` $(reboot) ${HOME} \\ ;|&',
    "NEWLINES": "line1\nline2\n",
    "SPACES": "  two  spaces  ",
    "UNICODE": "é→✓",
    "EMPTY": "",
}
# Dumps its argv and the HOSTILE_ENV variables it sees, NUL-separated, next to itself.
RECORDER = """#!/usr/bin/env bash
out="$(dirname "$0")/$(basename "$0").out"
{ printf '%s\\0' "$@"; printf '\\1\\0'; for k in $R2B_TEST_KEYS; do
    if [[ -v $k ]]; then printf '%s=%s\\0' "$k" "${!k}"; fi; done; } >"$out"
"""


def _recorder(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(RECORDER)
    path.chmod(0o755)
    return path


def _run(shell_line: str, recorder: Path) -> tuple[list[str], dict[str, str]]:
    """Run one planned shell line in bash; return what the recorder received."""
    env = {"PATH": os.environ["PATH"], "R2B_TEST_KEYS": " ".join(HOSTILE_ENV)}
    subprocess.run(["bash", "-c", shell_line], check=True, env=env, timeout=30)
    raw = recorder.with_name(recorder.name + ".out").read_bytes().decode()
    argv_part, _, env_part = raw.partition("\1\0")
    argv = argv_part.split("\0")[:-1]
    seen = dict(item.split("=", 1) for item in env_part.split("\0")[:-1])
    return argv, seen


def _testbed(kind: LauncherKind, command: Path) -> Testbed:
    nics = [Nic(name="eno1", kind=NicKind.ETH, netdev="eno1", management=True)]
    nodes = [Node(name=f"n{i}", address=f"10.0.0.{i + 1}", nics=nics) for i in range(2)]
    launcher = Launcher(kind=kind, command=str(command))
    return Testbed(name="t", nodes=nodes, launcher=launcher)


def test_srun_environment_cannot_be_split_or_smuggled(tmp_path: Path) -> None:
    """Before: `--export=ALL,SMUGGLE=x,LD_PRELOAD=/tmp/evil.so,...` (split at every comma)."""
    srun = _recorder(tmp_path / "srun")
    job = Job(["prog", "arg"], ["n0", "n1"], 1, HOSTILE_ENV)
    line = launch_command(_testbed(LauncherKind.SRUN, srun), job).shell()
    argv, seen = _run(line, srun)
    assert seen == HOSTILE_ENV
    exports = [arg for arg in argv if arg.startswith("--export")]
    assert exports == ["--export=ALL"]
    assert not any("LD_PRELOAD" in arg for arg in argv)


@pytest.mark.parametrize("kind", [LauncherKind.MPIRUN, LauncherKind.LOCAL])
def test_mpirun_and_local_pass_values_byte_for_byte(tmp_path: Path, kind: LauncherKind) -> None:
    launcher = _recorder(tmp_path / "launcher")
    program = [str(launcher)] if kind is LauncherKind.LOCAL else ["prog"]
    job = Job(program, ["n0", "n1"], 1, HOSTILE_ENV)
    argv, seen = _run(launch_command(_testbed(kind, launcher), job).shell(), launcher)
    if kind is LauncherKind.MPIRUN:
        passed = [argv[i + 1] for i, arg in enumerate(argv) if arg == "-x"]
        assert passed == [f"{k}={v}" for k, v in HOSTILE_ENV.items()]
    else:
        assert seen == HOSTILE_ENV


def test_planned_commands_reach_the_node_byte_for_byte(tmp_path: Path) -> None:
    """From YAML to the node: env values in the launch line and fault options in the injector
    command arrive unchanged."""
    work = tmp_path / "work"
    testbed = yaml.safe_load((ROOT / "experiments/testbeds/virtual-example.yaml").read_text())
    testbed["paths"]["work_dir"] = str(work)
    testbed["launcher"]["command"] = str(_recorder(tmp_path / "mpirun"))
    experiment = yaml.safe_load((ROOT / "experiments/quickstart.yaml").read_text())
    experiment["env"] = dict(HOSTILE_ENV)
    fault = experiment["scenarios"][0]["faults"][0]
    fault.update(kind="bandwidth_cap", params={"rate": "12.5mbit"})
    (tmp_path / "tb.yaml").write_text(yaml.safe_dump(testbed))
    (tmp_path / "exp.yaml").write_text(yaml.safe_dump(experiment, allow_unicode=True))
    plan = make_plan(load_inputs(tmp_path / "exp.yaml", tmp_path / "tb.yaml"))
    run = next(run for run in plan.runs if run.faults)
    argv, _ = _run(run.launch.command, tmp_path / "mpirun")
    passed = dict(argv[i + 1].split("=", 1) for i, arg in enumerate(argv) if arg == "-x")
    assert {k: passed[k] for k in HOSTILE_ENV} == HOSTILE_ENV
    injector = _recorder(work / "injectors" / "tbf.sh")
    step = run.faults[0]
    for command, action in ((step.inject, "inject"), (step.revert, "revert")):
        argv, _ = _run(command.command, injector)
        assert argv[:3] == [action, "--tag", step.tag]
        assert argv[argv.index("--dev") + 1] == "nic1"
        assert argv[argv.index("--rate") + 1] == "12.5mbit"
    argv, _ = _run(step.inject.command, injector)
    assert argv[argv.index("--protect-if") + 1] == "mgmt0"
    assert argv[argv.index("--lease-s") + 1] == f"{step.lease_s:g}"
