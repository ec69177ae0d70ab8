"""`plan` and `doctor` need no -t, as `sweep` does not: plan describes the embedded virtual
testbed a sweep would bring up (and brings nothing up); `sweep --dry-run` is the same plan."""

from __future__ import annotations

import json
from pathlib import Path

from r2bench.testbeds.virtual.status import known_testbeds
from tests.support import paths
from tests.support.cli_runner import invoke_as_main

ROOT = paths.REPO
QUICKSTART = ROOT / "experiments" / "quickstart.yaml"
WIDE = {"COLUMNS": "250"}


def _one_line(text: str) -> str:
    return " ".join(text.split())


def test_plan_with_no_testbed_plans_on_the_embedded_one_and_brings_nothing_up() -> None:
    before = known_testbeds()
    ran = invoke_as_main("plan", str(QUICKSTART), env=WIDE)
    assert ran.exit_code == 0, ran.output
    said = _one_line(ran.stderr)
    assert "the embedded virtual testbed r2bench that `r2bench sweep` brings up" in said
    assert "2 nodes x 4 data NICs" in said and "capped at 250mbit" in said
    assert "plan brings nothing up" in said
    assert "quickstart on r2bench: 8 runs" in ran.output
    assert "warning:" not in ran.output  # the flagship example plans clean
    assert known_testbeds() == before


def test_plan_json_and_commands_with_no_testbed_match_sweep_dry_run(tmp_path: Path) -> None:
    ran = invoke_as_main("plan", str(QUICKSTART), "--json")
    assert ran.exit_code == 0, ran.output
    plan = json.loads(ran.output)
    assert plan["testbed"] == "r2bench" and len(plan["runs"]) == 8
    assert plan["testbed_file"].startswith("the embedded virtual testbed r2bench")
    commands = invoke_as_main("plan", str(QUICKSTART), "--commands", env=WIDE)
    dry = invoke_as_main("sweep", str(QUICKSTART), "--dry-run", env=WIDE)
    assert commands.exit_code == dry.exit_code == 0, dry.output
    assert commands.output == dry.output
    scripts = invoke_as_main("plan", str(QUICKSTART), "--script", str(tmp_path))
    assert scripts.exit_code == 0, scripts.output
    node0 = (tmp_path / "node0.sh").read_text()
    assert "Testbed: the embedded virtual testbed r2bench" in node0


def test_plan_help_says_testbed_is_optional_and_names_sweep_dry_run() -> None:
    ran = invoke_as_main("plan", "--help", env=WIDE)
    text = _one_line(ran.output)
    assert "default: the embedded virtual testbed `sweep` brings up" in text
    assert "r2bench sweep EXP.yaml --dry-run" in text


def test_doctor_discover_needs_a_testbed_file() -> None:
    ran = invoke_as_main("doctor", "--discover")
    assert ran.exit_code == 2
    assert "--discover needs the testbed file to fill in: -t TESTBED.yaml" in ran.output
