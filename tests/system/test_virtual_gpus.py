"""Namespace nodes on one GPU host, without a GPU: the GPU layout, the testbed file, the per-node
NCCL_HOSTID in the launch line, doctor's word on shared GPUs, and the experiment's own testbed.

This module holds those on a virtual testbed (root); the same subject's other tests:
tests/unit/test_virtual_gpus.py (its pure tests).
"""

from __future__ import annotations

import shlex
import subprocess

import pytest

from r2bench.config.load import load_testbed
from r2bench.launch.launchers import Job, launch_command
from r2bench.testbeds.virtual.lifecycle import throwaway_testbed


@pytest.mark.root
@pytest.mark.needs_mpirun
def test_real_mpirun_gives_each_namespace_node_its_hostid() -> None:
    """The planned launch line, run for real by mpirun over ssh into two namespace nodes: each
    rank sees its own node's hostname, NCCL_HOSTID and device list, and the job's variables."""
    probe = "echo rank=$OMPI_COMM_WORLD_RANK host=$(hostname) id=$NCCL_HOSTID cvd=$CUDA_VISIBLE_DEVICES m=$R2CC_MODE"
    with throwaway_testbed(None, "gq", nics=2, gpus=1, host_gpus=1) as testbed_file:
        testbed = load_testbed(testbed_file)
        names = [node.name for node in testbed.nodes]
        job = Job(["sh", "-c", probe], names, 1, {"R2CC_MODE": "0"})
        command = launch_command(testbed, job, as_root=True)
        # mpirun runs on the launch node, as the sweep runs it (ssh through the testbed's config).
        ssh = shlex.split(testbed.launcher.mca["plm_rsh_agent"])
        argv = [*ssh, command.node, command.shell()]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = sorted(done.stdout.split("\n"))[-2:]
    assert lines == [
        f"rank={i} host={node.name} id={node.env['NCCL_HOSTID']} cvd=0 m=0"
        for i, node in enumerate(testbed.nodes)
    ]
