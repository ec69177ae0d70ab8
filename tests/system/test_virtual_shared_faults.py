"""Two nodes of the virtual testbed share one work folder (as an NFS home does): a fault injected
on node1 is untouched and still leased after a heal on node0; a heal on node1 reverts it. The
injectors run as they do for real, over ssh, from the shared folder; a hand-run inject on the
interface of the ssh session itself is refused."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from r2bench.config.load import load_testbed
from r2bench.config.testbed import Testbed
from r2bench.testbeds.virtual.lifecycle import UpResult
from tests.support import paths
from tests.support.proc_groups import group_members

pytestmark = [pytest.mark.root, pytest.mark.slow]

REPO = paths.REPO


@dataclass(frozen=True)
class Bed:
    name: str
    testbed: Testbed
    work: Path


@pytest.fixture(scope="module")
def bed(virtual_testbed: UpResult) -> Bed:
    testbed = load_testbed(virtual_testbed.testbed_yaml)
    work = Path(testbed.paths.work_dir)
    shutil.copytree(REPO / "injectors", work / "injectors", dirs_exist_ok=True)
    return Bed(testbed.name, testbed, work)


def ssh(bed: Bed, node: str, command: str) -> subprocess.CompletedProcess[str]:
    config = bed.testbed.nodes[0].ssh.config_file or ""
    return subprocess.run(
        ["ssh", "-F", config, node, command], capture_output=True, text=True, timeout=120
    )


def link_up(bed: Bed, node: str, ifname: str) -> bool:
    out = subprocess.run(
        ["ip", "-n", f"r2b-{bed.name}-{node}", "-o", "link", "show", ifname],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return "UP" in out.split(">")[0]


def test_heal_on_node0_leaves_node1s_fault_and_heal_on_node1_reverts_it(bed: Bed) -> None:
    injectors = bed.work / "injectors"
    inject = ssh(
        bed,
        "node1",
        f"bash {injectors}/link.sh inject --tag shared1 --lease-s 300"
        " --protect-if mgmt0 --dev nic1",
    )
    assert inject.returncode == 0, inject.stdout + inject.stderr
    assert not link_up(bed, "node1", "nic1")
    (record,) = (bed.work / "faults" / "active").glob("node1.*/shared1")
    lease = int(record.read_text().split("lease_pid=")[1].split()[0])
    try:
        deadline = time.monotonic() + 5
        while len(group_members(lease)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(group_members(lease)) == 2, "lease timer not running"

        heal0 = ssh(bed, "node0", f"bash {injectors}/heal.sh")
        assert heal0.returncode == 0, heal0.stdout + heal0.stderr
        assert "node=node0." in heal0.stdout and "reverted 0 fault(s)" in heal0.stdout
        assert record.exists() and not link_up(bed, "node1", "nic1")
        assert len(group_members(lease)) == 2, "node0's heal ended node1's lease"

        heal1 = ssh(bed, "node1", f"bash {injectors}/heal.sh")
        assert heal1.returncode == 0, heal1.stdout + heal1.stderr
        assert "reverted 1 fault(s), 0 failed" in heal1.stdout
        assert not record.exists() and link_up(bed, "node1", "nic1")
        deadline = time.monotonic() + 5
        while group_members(lease) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not group_members(lease)
    finally:
        for member in group_members(lease):
            os.kill(member, 15)
        subprocess.run(
            ["ip", "-n", f"r2b-{bed.name}-node1", "link", "set", "nic1", "up"], check=False
        )


def test_a_hand_run_inject_on_the_ssh_interface_is_refused(bed: Bed) -> None:
    """No --protect-if: the node finds the interface of the live ssh session by itself."""
    refused = ssh(bed, "node1", f"bash {bed.work}/injectors/link.sh inject --tag m1 --dev mgmt0")
    assert refused.returncode == 1 and "refused: mgmt0" in refused.stderr, refused.stderr
    assert "ssh session" in refused.stderr
    assert link_up(bed, "node1", "mgmt0")
