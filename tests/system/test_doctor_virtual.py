"""`r2bench doctor` on a real virtual testbed: passes, fails when a data NIC is taken down by
hand (naming the node, the NIC and the fix), and passes again once it is back up."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from r2bench.cli import app
from r2bench.testbeds.virtual.lifecycle import UpResult

pytestmark = [pytest.mark.root, pytest.mark.needs_mpirun]


@pytest.fixture(scope="module")
def testbed(virtual_testbed: UpResult) -> tuple[str, Path]:
    return virtual_testbed.testbed.name, virtual_testbed.testbed_yaml


def doctor(testbed_file: Path) -> tuple[int, dict]:
    result = CliRunner().invoke(app, ["doctor", "--testbed", str(testbed_file), "--json"])
    return result.exit_code, json.loads(result.stdout)


def wait_for_state_up(netns: str, ifname: str, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while (
        " state UP "
        not in subprocess.run(
            ["ip", "-n", netns, "-o", "link", "show", ifname], capture_output=True, text=True
        ).stdout
    ):
        assert time.monotonic() < deadline, f"{ifname} never came back up"
        time.sleep(0.05)


def failures(report: dict) -> list[str]:
    return [json.dumps(r) for r in report["results"] if r["status"] == "fail"]


def test_doctor_passes_fails_on_a_downed_nic_and_recovers(testbed: tuple[str, Path]) -> None:
    name, testbed_file = testbed
    code, report = doctor(testbed_file)
    assert code == 0, failures(report)
    subprocess.run(
        ["ip", "netns", "exec", f"r2b-{name}-node1", "ip", "link", "set", "nic1", "down"],
        check=True,
    )
    try:
        code, report = doctor(testbed_file)
        assert code == 1
        failed = failures(report)
        assert report["ok"] is False and len(failed) == 1, failed
        assert (
            '"node": "node1"' in failed[0] and "nic1" in failed[0] and '"fix": ""' not in failed[0]
        )
    finally:
        subprocess.run(
            ["ip", "netns", "exec", f"r2b-{name}-node1", "ip", "link", "set", "nic1", "up"],
            check=True,
        )
    wait_for_state_up(f"r2b-{name}-node1", "nic1")
    code, report = doctor(testbed_file)
    assert code == 0, failures(report)
