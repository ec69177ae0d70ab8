"""r2bench doctor: pure checks on realistic outputs, and end to end on local and ssh testbeds.

The development machines have no GPUs, no RDMA devices and no GPU drivers, so the outputs of
`nvidia-smi -L`, `nvidia-smi topo -m`, `lsmod`, the InfiniBand sysfs files and HPC-X/MPICH
`mpirun --version` below are written by hand in the exact formats those tools print. The Open MPI
`mpirun --version`, `ps`, `/etc/os-release` and netdev sysfs outputs were captured on Debian 12.

This module holds those with real processes; the same subject's other tests:
tests/unit/test_doctor.py (its pure tests).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from r2bench.commands.doctor import doctor_command
from r2bench.doctor.facts import (
    NODE_ID_SHELL,
)
from tests.support.helpers_sshd import SshServer, needs_sshd, sshd  # noqa: F401  (sshd is a fixture)

# ---- end to end ------------------------------------------------------------------------------


@pytest.fixture
def stray_process(tmp_path: Path) -> Iterator[int]:
    """A process that looks like a leftover nccl-tests binary; killed by its pid."""
    fake = tmp_path / "fake_reduce_perf"
    shutil.copy(shutil.which("sleep") or "/bin/sleep", fake)
    proc = subprocess.Popen([str(fake), "60"])
    cmdline = Path(f"/proc/{proc.pid}/cmdline")
    while b"fake_reduce_perf" not in cmdline.read_bytes():  # until exec has happened
        time.sleep(0.01)
    try:
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


def write_testbed(path: Path, body: Mapping[str, object]) -> Path:
    """Write a testbed file (JSON is valid YAML)."""
    path.write_text(json.dumps(body))
    return path


def ssh_node_entry(server: SshServer, name: str, **overrides: object) -> dict[str, object]:
    """A testbed node reaching the loopback sshd."""
    ssh = {**server.ssh_settings(), **overrides}
    lo = {"name": "lo", "kind": "eth", "netdev": "lo", "management": True}
    return {"name": name, "address": "127.0.0.1", "sudo": False, "ssh": ssh, "nics": [lo]}


def test_doctor_end_to_end_on_a_local_testbed(
    tmp_path: Path, stray_process: int, capsys: pytest.CaptureFixture[str]
) -> None:
    work = tmp_path / "work"
    node_id = subprocess.run(
        ["bash", "-c", NODE_ID_SHELL + "\nr2b_node_id"], capture_output=True, text=True
    ).stdout.strip()
    (work / "faults" / "active" / node_id).mkdir(parents=True)
    (work / "faults" / "active" / node_id / "link_down.n0.lo").write_text("kind=link_down\n")
    (work / "faults" / "active" / "other.node").mkdir()
    (work / "faults" / "active" / "other.node" / "elsewhere").write_text("kind=link_down\n")
    lo = {"name": "lo", "kind": "eth", "netdev": "lo", "management": True}
    body = {
        "name": "here",
        "kind": "local",
        "paths": {"work_dir": str(work)},
        "nodes": [
            {"name": "n0", "address": "127.0.0.1", "nics": [lo]},
            {"name": "n1", "address": "127.0.0.1"},
        ],
    }
    path = write_testbed(tmp_path / "testbed.yaml", body)
    assert doctor_command(path, json_out=True) == 1
    report = json.loads(capsys.readouterr().out)
    results = {(r["node"], r["check"]): r for r in report["results"]}
    assert report["ok"] is False
    assert results[("n0", "reachable")]["status"] == "ok"
    assert results[("n0", "nic lo")]["status"] == "ok"
    assert results[("n0", "gpus")]["detail"] == "none"
    assert results[("n0", "active faults")]["status"] == "fail"
    assert "link_down.n0.lo" in results[("n0", "active faults")]["detail"]
    assert "elsewhere" not in results[("n0", "active faults")]["detail"]
    assert str(stray_process) in results[("n1", "stray processes")]["fix"]
    assert abs(float(results[("n0", "clock")]["detail"].split()[1])) < 50
    assert doctor_command(path, json_out=False) == 1
    text = capsys.readouterr().out
    assert "r2bench doctor: here" in text and "r2bench heal" in text and "FAILED" in text


@needs_sshd
def test_doctor_end_to_end_over_ssh(
    sshd: SshServer,  # noqa: F811
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    wrong = tmp_path / "known_hosts"
    wrong.write_text("")
    nodes = [
        ssh_node_entry(sshd, "alpha"),
        ssh_node_entry(sshd, "beta"),
        ssh_node_entry(sshd, "gamma", known_hosts=str(wrong)),
    ]
    body = {
        "name": "loop",
        "kind": "ssh",
        "paths": {"work_dir": str(tmp_path / "w")},
        "nodes": nodes,
    }
    path = write_testbed(tmp_path / "testbed.yaml", body)
    assert doctor_command(path, json_out=True) == 1
    results = {(r["node"], r["check"]): r for r in json.loads(capsys.readouterr().out)["results"]}
    for name in ("alpha", "beta"):
        assert results[(name, "reachable")]["status"] == "ok"
        assert results[(name, "nic lo")]["status"] == "ok"
        assert results[(name, "mpirun")]["status"] == "ok"
        assert results[(name, "active faults")]["status"] == "ok"
    assert results[("beta", "ssh from first")]["status"] == "ok"
    gamma = results[("gamma", "reachable")]
    assert gamma["status"] == "fail" and "host key verification failed" in gamma["detail"]


@needs_sshd
def test_doctor_cli_exit_status_for_a_healthy_ssh_node(sshd: SshServer, tmp_path: Path) -> None:  # noqa: F811
    body = {
        "name": "one",
        "kind": "ssh",
        "launcher": {"kind": "local"},
        "paths": {"work_dir": str(tmp_path / "w")},
        "nodes": [ssh_node_entry(sshd, "solo")],
    }
    path = write_testbed(tmp_path / "testbed.yaml", body)
    code = (
        "import sys; from pathlib import Path; from r2bench.commands.doctor import doctor_command;"
    )
    code += f"sys.exit(doctor_command(Path({str(path)!r}), True))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    report = json.loads(done.stdout)
    failures = [r for r in report["results"] if r["status"] == "fail"]
    # Another benchmark running on this machine is a legitimate failure; anything else is not.
    assert all(r["check"] == "stray processes" for r in failures), failures
    assert done.returncode == (1 if failures else 0)
