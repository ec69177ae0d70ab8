"""`plan --script DIR`: per-node bash scripts that can be read, pasted and run.

This module holds those with real processes; the same subject's other tests:
tests/unit/test_plan_script.py (its pure tests).
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from r2bench.commands.plan_script import node_script, plan_nodes, write_scripts
from r2bench.plan.build import load_inputs, make_plan
from r2bench.plan.model import NodeCommand, Plan
from tests.support import paths

ROOT = paths.REPO
EXPERIMENT = ROOT / "experiments" / "quickstart.yaml"
TESTBED = ROOT / "experiments" / "testbeds" / "virtual-example.yaml"


# ---- hostile text never becomes a command ----------------------------------------------------

INJECTED = "r2b_injected"
HOSTILE = (
    f"x\n{INJECTED} newline\n$({INJECTED} sub)`{INJECTED} tick`'; {INJECTED} quote; '\r\x1b[2J"
)
HOSTILE_REF = f"x$({INJECTED})`{INJECTED}`';{INJECTED};'"
"""Shell text in a name git takes (no space, line break or control character: a ref holding
one of those is refused when the experiment is read)."""


def _hostile_inputs(tmp_path: Path) -> tuple[Path, Path]:
    """The quickstart experiment and testbed with hostile text in every free-text field that
    reaches a script: a library ref, an env value, the work folder, the experiment file name."""
    text = EXPERIMENT.read_text()
    text = text.replace(
        "  r2ccl-m1: {recipe: emulated-lib",
        f"  r2: {{recipe: r2ccl, ref: {_yaml_str(HOSTILE_REF)}}}\n  r2ccl-m1: {{recipe: emulated-lib",
    )
    text = text.replace("NCCL_DEBUG: INFO", f"NCCL_DEBUG: {_yaml_str(HOSTILE)}")
    experiment = tmp_path / f"exp{HOSTILE.replace(chr(0), '')}.yaml"
    experiment.write_text(text)
    testbed = tmp_path / "testbed.yaml"
    testbed.write_text(
        TESTBED.read_text().replace(
            "work_dir: /var/lib/r2bench/example/work",
            f"work_dir: {_yaml_str('/w' + HOSTILE)}",
        )
    )
    return experiment, testbed


def _yaml_str(value: str) -> str:
    import json

    return json.dumps(value)


def _stubs(folder: Path, calls: Path) -> Path:
    """A PATH of stubs: every program the script may run only records its name."""
    folder.mkdir()
    names = ["bash", "sudo", "id", "date", "awk", "sleep", "timeout", "mkdir", "git", "test"]
    names += ["make", "rsync", "cp", INJECTED]
    for name in names:
        stub = folder / name
        stub.write_text(f"#!/bin/sh\necho {name} >> {shlex.quote(str(calls))}\n")
        stub.chmod(0o755)
    return folder


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


def test_hostile_text_in_any_field_never_runs_as_a_command(tmp_path: Path) -> None:
    experiment, testbed = _hostile_inputs(tmp_path)
    plan = make_plan(load_inputs(experiment, testbed))
    assert any(step.ref == HOSTILE_REF for step in plan.setup), "the hostile ref reaches setup"
    calls = tmp_path / "calls"
    stubs = _stubs(tmp_path / "bin", calls)
    for path in write_scripts(plan, tmp_path / "scripts"):
        text = path.read_text()
        comments = [line for line in text.splitlines() if line.lstrip().startswith("#")]
        assert not [c for c in comments if "\x1b" in c or "\r" in c], "comments are escaped"
        subprocess.run(["bash", "-n", str(path)], check=True)
        proc = subprocess.run(
            ["/bin/bash", str(path)],
            env={"PATH": str(stubs), "HOME": str(tmp_path)},
            capture_output=True,
            text=True,
            timeout=60,
        )
        ran = calls.read_text().splitlines()
        assert INJECTED not in ran, f"{path.name} ran the injected command:\n{proc.stderr}"
        assert "command not found" not in proc.stderr, proc.stderr
        assert "mkdir" in ran, "the script did reach its launch lines"
