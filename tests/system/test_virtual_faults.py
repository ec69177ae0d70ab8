"""A NIC dies in the middle of the emulated ring all_reduce on the virtual testbed.

Two nodes x two data NICs; the real mpirun runs on node0 (reached with ssh) and starts one rank
per node through r2bench's launcher and the testbed's settings; each rank's data goes over its
node's ``nic0``/``nic1`` (R2B_NIC_MAP). Once the timed loop has started, node1's ``nic1`` is taken
down: the emulated stock NCCL must fail; the emulated R-2CCL in modes 0 and 1 must finish with 0
wrong values after a visible stall (hot repair onto nic0, then mode 2); in mode 2 nic1, the last
NIC, is masked off from the start, so its loss costs nothing.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from r2bench.config.load import load_testbed
from r2bench.config.testbed import Testbed
from r2bench.launch.launchers import Job, launch_command
from r2bench.testbeds.virtual.lifecycle import UpResult
from tests.support import paths

pytestmark = [
    pytest.mark.root,
    pytest.mark.slow,
    pytest.mark.needs_mpirun,
    pytest.mark.needs_mpi4py,
]

FAILOVER_MS = 500
ARGS = ["-b", "8M", "-e", "8M", "-n", "60", "-w", "1", "-I", "1"]
HEADER = "#       size"
REPO = paths.REPO


@dataclass(frozen=True)
class Bed:
    """The testbed of this module."""

    name: str
    testbed: Testbed


@dataclass(frozen=True)
class Outcome:
    """One mpirun, with the fault injected in its middle."""

    rc: int
    stdout: str
    stderr: str
    report: dict | None


@pytest.fixture(scope="module")
def bed(virtual_testbed: UpResult) -> Bed:
    testbed = load_testbed(virtual_testbed.testbed_yaml)
    return Bed(testbed.name, testbed)


def mpirun_command(testbed: Testbed, env: dict[str, str], report: Path) -> str:
    """r2bench's own mpirun line for one rank per node; each rank finds its node's data NICs
    in R2B_NIC_MAP by hostname."""
    nic_map = ";".join(
        f"{node.name}=" + ",".join(nic.address or "" for nic in node.data_nics)
        for node in testbed.nodes
    )
    program = [
        testbed.paths.python,
        "-m",
        "r2bench.workloads.ring_allreduce",
        *ARGS,
        "-J",
        str(report),
    ]
    job = Job(program, [node.name for node in testbed.nodes], 1, {**env, "R2B_NIC_MAP": nic_map})
    return launch_command(testbed, job).shell()


def set_link(bed: Bed, node: str, ifname: str, state: str) -> None:
    """`ip link set IF up|down` inside a node's namespace."""
    netns = f"r2b-{bed.name}-{node}"
    subprocess.run(["ip", "netns", "exec", netns, "ip", "link", "set", ifname, state], check=True)


def run_with_fault(bed: Bed, mode: int, report: Path, library: str = "r2ccl") -> Outcome:
    """Start the job on node0, take node1's nic1 down once timing starts, collect the outcome."""
    env = {
        "R2CC_MODE": str(mode),
        "NCCL_R2CC_FAILOVER_TIMEOUT_MS": str(FAILOVER_MS),
        "NCCL_DEBUG": "INFO",
        "R2B_EMULATED_LIBRARY": library,
        "NCCL_IB_TIMEOUT": "14",  # stock NCCL's dead-link timeout: ~0.27 s
        "NCCL_IB_RETRY_CNT": "3",
    }
    node0 = bed.testbed.nodes[0]
    remote = f"cd {shlex.quote(str(REPO))} && " + mpirun_command(bed.testbed, env, report)
    ssh = ["ssh", "-F", node0.ssh.config_file or "", node0.name, remote]
    proc = subprocess.Popen(ssh, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if line.startswith(HEADER):
                break
        time.sleep(1.0)  # past the warm-up (up to ~0.3 s on a loaded host): in the timed loop
        set_link(bed, "node1", "nic1", "down")
        out, err = proc.communicate(timeout=90)
    finally:
        set_link(bed, "node1", "nic1", "up")
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    data = json.loads(report.read_text()) if report.is_file() else None
    return Outcome(proc.returncode, "".join(lines) + out, err, data)


def _stall_us(report: dict) -> float:
    result = report["results"][0]
    return max(max(result[f"{kind}_per_iter"]["times_us"]) for kind in ("out_of_place", "in_place"))


def test_stock_nccl_fails_when_a_nic_dies(bed: Bed, tmp_path: Path) -> None:
    outcome = run_with_fault(bed, 0, tmp_path / "r.json", library="nccl")
    assert outcome.rc != 0, outcome.stdout + outcome.stderr
    assert "Test NCCL failure" in outcome.stdout, outcome.stdout + outcome.stderr


@pytest.mark.parametrize("mode", [0, 1])
def test_r2ccl_completes_after_a_stall_in_modes_0_and_1(
    bed: Bed, mode: int, tmp_path: Path
) -> None:
    outcome = run_with_fault(bed, mode, tmp_path / "r.json")
    assert outcome.rc == 0, outcome.stdout + outcome.stderr
    assert "# Out of bounds values : 0 OK" in outcome.stdout
    assert outcome.report is not None
    result = outcome.report["results"][0]
    assert result["out_of_place"]["nwrong"] == 0 and result["in_place"]["nwrong"] == 0
    assert _stall_us(outcome.report) >= 0.9 * FAILOVER_MS * 1000, outcome.report
    # mode 1's simulation (nic0's channel on its backup, nic1) is logged at setup
    assert ("will simulate disable of device 0 (nic0)" in outcome.stderr) == (mode == 1)
    # Traffic moves onto nic0, nic1's pair. In mode 1 nic1 carries two connections (channel
    # 0's backup, channel 1's primary); whichever had units in flight when the link died is
    # switched first, and the gather then masks channel 1 off, so either line may be the one.
    switch = "switch to backup dev=0 (nic0)"
    if mode == 1:
        assert re.search(r"switch to (backup|primary) dev=0 \(nic0\)", outcome.stderr)
    else:
        assert switch in outcome.stderr
    assert "hot-repair gather complete: localMask=0x2 globalMask=0x2" in outcome.stderr
    assert "forcing R2CC_MODE=2" in outcome.stderr


def test_r2ccl_mode2_never_uses_the_last_nic(bed: Bed, tmp_path: Path) -> None:
    outcome = run_with_fault(bed, 2, tmp_path / "r.json")
    assert outcome.rc == 0, outcome.stdout + outcome.stderr
    assert "# Out of bounds values : 0 OK" in outcome.stdout
    assert "NCCL WARN" not in outcome.stderr and "HOT_REPAIR" not in outcome.stderr
