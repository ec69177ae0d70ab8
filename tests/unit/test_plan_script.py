"""`plan --script DIR`: per-node bash scripts that can be read, pasted and run.

This module holds its pure tests; the same subject's other tests:
tests/integration/test_plan_script.py (those with real processes).
"""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from r2bench.cli import app
from r2bench.plan.model import Plan
from tests.support import paths

ROOT = paths.REPO
EXPERIMENT = ROOT / "experiments" / "quickstart.yaml"
TESTBED = ROOT / "experiments" / "testbeds" / "virtual-example.yaml"


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
