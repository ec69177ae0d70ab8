"""`plan --script DIR`: per-node bash scripts that can be read, pasted and run."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from r2bench.cli import app
from r2bench.commands.plan_script import node_script, plan_nodes, write_scripts
from r2bench.plan.build import load_inputs, make_plan
from r2bench.plan.model import NodeCommand, Plan

ROOT = Path(__file__).resolve().parents[1]
EXPERIMENT = ROOT / "experiments" / "quickstart.yaml"
TESTBED = ROOT / "experiments" / "testbeds" / "virtual-example.yaml"


@pytest.fixture(scope="module")
def plan() -> Plan:
    return make_plan(load_inputs(EXPERIMENT, TESTBED))


def test_one_script_per_node_with_every_command_in_order(plan: Plan, tmp_path: Path) -> None:
    paths = write_scripts(plan, tmp_path)
    assert [p.name for p in paths] == [f"{n}.sh" for n in plan_nodes(plan)]
    for path in paths:
        subprocess.run(["bash", "-n", str(path)], check=True)
        assert path.stat().st_mode & 0o111
    launch_node = plan.runs[0].launch.node
    text = (tmp_path / f"{launch_node}.sh").read_text()
    positions = [text.index(run.spec.run_id) for run in plan.runs]
    assert positions == sorted(positions)
    for run in plan.runs:
        assert f"bash -c {shlex.quote(run.launch.command)}" in text
    faulted = {f.node for run in plan.runs for f in run.faults}
    for node in faulted:
        body = (tmp_path / f"{node}.sh").read_text()
        for run in plan.runs:
            for fault in run.faults:
                if fault.node == node:
                    inject = body.index(fault.inject.command)
                    assert body.index(fault.revert.command) > inject
                    assert body[:inject].rstrip().endswith("as_root '")
    assert "[root]" not in text


def test_the_script_runs_launches_and_faults_on_time(plan: Plan, tmp_path: Path) -> None:
    if shutil.which("timeout") is None:
        pytest.skip("no timeout(1)")
    log = tmp_path / "log"
    run = next(run for run in plan.runs if run.faults)
    fault = run.faults[0].model_copy(
        update={
            "node": "n",
            "inject_after_s": 0.2,
            "heal_after_s": 0.4,
            "inject": NodeCommand(node="n", command=f"echo inject >> {log}", root=True),
            "revert": NodeCommand(node="n", command=f"echo revert >> {log}", root=True),
        }
    )
    quick = run.model_copy(
        update={
            "run_dir": str(tmp_path / "run"),
            "launch": NodeCommand(node="n", command=f"echo 'launch it' >> {log}; echo out"),
            "faults": [fault],
            "spec": run.spec.model_copy(update={"deadline_s": 1.0}),
        }
    )
    small = plan.model_copy(update={"setup": [], "runs": [quick]})
    script = tmp_path / "n.sh"
    script.write_text(node_script(small, "n"))
    proc = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert log.read_text().split("\n")[:3] == ["launch it", "inject", "revert"]
    assert (tmp_path / "run" / "stdout.txt").read_text() == "out\n"


def test_plan_script_option(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["plan", str(EXPERIMENT), "-t", str(TESTBED), "--script", str(tmp_path / "s")]
    )
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == ["node0.sh", "node1.sh"]


def test_panels_show_root_commands_as_pasteable_lines(plan: Plan) -> None:
    result = CliRunner().invoke(
        app, ["plan", str(EXPERIMENT), "-t", str(TESTBED), "--commands"], env={"COLUMNS": "400"}
    )
    assert result.exit_code == 0
    assert "[root]" not in result.output
    assert "  # as root" in result.output
