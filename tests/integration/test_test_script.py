"""scripts/test.sh, CI's test command: every tier runs, a failed tier or one that collects
nothing fails the command, and each tier is named with its verdict. A stand-in Python records
how each tier's pytest was called and exits with the status the test gives that tier."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.support import paths

SCRIPT = paths.REPO / "scripts" / "test.sh"
FAKE_PYTHON = """#!/usr/bin/env bash
# `python -c 'import xdist'`: xdist is there; `python -m pytest ... tests/TIER`: log, then exit
# with $STATUS_<TIER> (0 where unset).
[[ $1 == -c ]] && exit 0
echo "$*" >>"$CALLS"
tier=${!#}
tier=${tier#tests/}
status_var=STATUS_${tier^^}
exit "${!status_var:-0}"
"""


def run_tests(
    tmp_path: Path, *tiers: str, **statuses: int
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    fake = tmp_path / "python"
    fake.write_text(FAKE_PYTHON)
    fake.chmod(0o755)
    calls = tmp_path / "calls"
    env = {
        **os.environ,
        "R2BENCH_TEST_PYTHON": str(fake),
        "CALLS": str(calls),
        **{f"STATUS_{tier.upper()}": str(code) for tier, code in statuses.items()},
    }
    proc = subprocess.run(
        ["bash", str(SCRIPT), *tiers],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    return proc, calls.read_text().splitlines() if calls.exists() else []


def test_every_tier_runs_unit_and_integration_in_parallel_system_alone(tmp_path: Path) -> None:
    proc, calls = run_tests(tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert [call.split()[-1] for call in calls] == [
        "tests/unit",
        "tests/integration",
        "tests/system",
    ]
    unit, integration, system = calls
    assert "-n auto" in unit and "-n auto" in integration and "-n" not in system.split()
    assert all("--durations=20" in call for call in calls)


def test_a_failed_tier_fails_the_command_and_the_next_tiers_still_run(tmp_path: Path) -> None:
    proc, calls = run_tests(tmp_path, unit=1)
    assert proc.returncode == 1
    assert len(calls) == 3
    assert "FAILED: unit tier (exit 1" in proc.stderr and "failed tiers: unit" in proc.stderr


def test_a_tier_that_collects_nothing_fails(tmp_path: Path) -> None:
    proc, _ = run_tests(tmp_path, "system", system=5)
    assert proc.returncode == 1
    assert "the system tier collected no tests" in proc.stderr


def test_a_tier_that_is_not_a_folder_is_refused(tmp_path: Path) -> None:
    proc, calls = run_tests(tmp_path, "nosuch")
    assert proc.returncode == 1 and calls == []
    assert "no tier 'nosuch'" in proc.stderr
