"""doctor's stray-process check counts a node's own processes: on a namespace node, those in its
network namespace, not every workload of the host it shares (another sweep's or a test's job
failed a healthy testbed's doctor)."""

from __future__ import annotations

import subprocess
import time

import pytest

from r2bench.doctor.checks import stray_processes
from r2bench.doctor.facts import PROCS_SHELL

pytestmark = [pytest.mark.root]


def procs(*prefix: str) -> list[tuple[int, str]]:
    out = subprocess.run([*prefix, "bash", "-c", PROCS_SHELL], capture_output=True, text=True)
    return stray_processes(out.stdout)


def test_a_workload_outside_the_nodes_namespace_is_not_its_stray() -> None:
    job = subprocess.Popen(["bash", "-c", "exec -a r2bench.workloads.leftover sleep 30"])
    try:
        time.sleep(0.3)
        assert job.pid in [pid for pid, _ in procs()]  # the host's own namespace: its stray
        assert job.pid not in [pid for pid, _ in procs("unshare", "-n")]  # another node's
    finally:
        job.kill()
        job.wait()
