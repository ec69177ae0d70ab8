"""Namespace nodes on one GPU host, without a GPU: the GPU layout, the testbed file, the per-node
NCCL_HOSTID in the launch line, doctor's word on shared GPUs, and the experiment's own testbed.

This module holds its pure tests; the same subject's other tests:
tests/system/test_virtual_gpus.py (those on a virtual testbed (root)).
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
import yaml

from r2bench.config.experiment import Experiment, VirtualTestbedSpec
from r2bench.config.testbed import Testbed
from r2bench.doctor.checks import Status, check_gpus
from r2bench.doctor.facts import NodeFacts
from r2bench.launch.launchers import Job, launch_command
from r2bench.sweep.embedded import embedded_description, virtual_spec
from r2bench.testbeds.virtual.describe import build_testbed, to_yaml
from r2bench.testbeds.virtual.gpus import assign_gpus, count_host_gpus, gpu_arch
from r2bench.testbeds.virtual.layout import PlanError, VirtualSpec, plan_testbed

NVIDIA_SMI_ONE = "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-2f5c0e1a-0000-0000-0000-000000000000)\n"


def _gpu_testbed(tmp_path: Path, gpus: int = 1, host_gpus: int = 1) -> Testbed:
    spec = VirtualSpec(
        "gt", 2, 4, state_dir=tmp_path, rate="4gbit", gpus=gpus, homes=(("nccl_home", "/n"),)
    )
    testbed = build_testbed(
        plan_testbed(spec), {"tbf": True}, python="python3", host_gpus=host_gpus
    )
    # The testbed file round-trips: what `up` writes is what the other commands read.
    return Testbed.model_validate(yaml.safe_load(to_yaml(testbed)))


def test_host_gpu_count_from_nvidia_smi() -> None:
    assert count_host_gpus(NVIDIA_SMI_ONE) == 1
    assert count_host_gpus(NVIDIA_SMI_ONE + NVIDIA_SMI_ONE.replace("GPU 0", "GPU 1")) == 2
    assert count_host_gpus("No devices were found\n") == 0


def test_one_gpu_is_shared_by_both_nodes_with_their_own_hostid() -> None:
    layout = assign_gpus("gt", ["node1", "node2"], 1, host_gpus=1)
    assert [n.devices for n in layout] == [(0,), (0,)]
    assert all(n.shared for n in layout)
    assert [n.env["NCCL_HOSTID"] for n in layout] == ["gt-node1", "gt-node2"]  # names as given
    assert [n.env["CUDA_VISIBLE_DEVICES"] for n in layout] == ["0", "0"]


def test_enough_gpus_gives_each_node_its_own() -> None:
    layout = assign_gpus("gt", ["node1", "node2"], 4, host_gpus=8)
    assert [n.devices for n in layout] == [(0, 1, 2, 3), (4, 5, 6, 7)]
    assert not any(n.shared for n in layout)
    assert layout[1].env["CUDA_VISIBLE_DEVICES"] == "4,5,6,7"


def test_more_gpus_per_node_than_the_host_has_is_refused() -> None:
    with pytest.raises(PlanError, match="this host has 1 GPU"):
        assign_gpus("gt", ["node1", "node2"], 2, host_gpus=1)


def test_testbed_file_of_a_shared_gpu(tmp_path: Path) -> None:
    testbed = _gpu_testbed(tmp_path)
    node1, node2 = testbed.nodes
    assert node1.gpus == node2.gpus == 1 and node1.gpus_shared and node2.gpus_shared
    assert node1.env["NCCL_HOSTID"] != node2.env["NCCL_HOSTID"]
    assert testbed.paths.nccl_home == "/n"
    assert "shared by every node" in testbed.description


def test_launch_line_gives_each_node_its_hostid(tmp_path: Path) -> None:
    testbed = _gpu_testbed(tmp_path)
    program = ["/w/all_reduce_perf", "-g", "1"]
    env = {"R2CC_MODE": "0", "NCCL_SOCKET_IFNAME": "nic0,nic1,nic2,nic3"}
    names = [node.name for node in testbed.nodes]
    argv = launch_command(testbed, Job(program, names, 1, env)).argv
    contexts = " ".join(argv).split(" : ")
    assert len(contexts) == 2
    for context, node in zip(contexts, testbed.nodes, strict=True):
        words = shlex.split(context)
        assert f"NCCL_HOSTID={node.env['NCCL_HOSTID']}" in words
        assert f"{node.address}:1" in words and "R2CC_MODE=0" in words
        assert words[-3:] == program
    # Global options come once, before the first context.
    assert argv.count("--map-by") == 1 and argv.index("--map-by") < argv.index("-np")


def test_launch_line_without_node_env_is_one_context(tmp_path: Path) -> None:
    testbed = _gpu_testbed(tmp_path, gpus=0, host_gpus=0)
    names = [node.name for node in testbed.nodes]
    argv = launch_command(testbed, Job(["/w/p"], names, 1, {"A": "1"})).argv
    assert ":" not in argv and argv[argv.index("-np") + 1] == "2"


def test_doctor_says_when_gpus_are_shared(tmp_path: Path) -> None:
    testbed = _gpu_testbed(tmp_path)
    facts = NodeFacts("node1", True, sections={"gpus": NVIDIA_SMI_ONE})
    result = check_gpus(facts, testbed.nodes[0])
    assert result.status is Status.WARN
    assert "SHARED" in result.detail and "only the network path is measured" in result.detail
    own = _gpu_testbed(tmp_path, gpus=1, host_gpus=2)
    two = NVIDIA_SMI_ONE + NVIDIA_SMI_ONE.replace("GPU 0", "GPU 1")
    result = check_gpus(NodeFacts("node2", True, sections={"gpus": two}), own.nodes[1])
    assert result.status is Status.OK and "GPU(s) 1 of the host's 2" in result.detail


def test_experiment_names_its_own_virtual_testbed(tmp_path: Path) -> None:
    wanted = VirtualTestbedSpec(nics=4, rate="4gbit", gpus=1, nccl_home="/opt/nccl")
    spec = virtual_spec(wanted)
    assert (spec.nics, spec.rate, spec.gpus) == (4, "4gbit", 1)
    testbed = Testbed.model_validate(
        yaml.safe_load(embedded_description(tmp_path, wanted).read_text())
    )
    assert testbed.paths.nccl_home == "/opt/nccl"
    assert all(node.gpus == 1 and node.env.get("NCCL_HOSTID") for node in testbed.nodes)
    # Without the section: the quickstart's 2 nodes x 4 NICs at 250 Mbit/s, no GPU.
    default = Experiment.model_validate({"name": "e", "libraries": {"l": {"recipe": "r"}}})
    assert (default.virtual_testbed.nics, default.virtual_testbed.rate) == (4, "250mbit")


def test_gpu_arch_from_nvidia_smi() -> None:
    assert gpu_arch("9.0\n9.0\n") == "90"
    assert gpu_arch("10.0\n") == "100"
    assert gpu_arch("[N/A]\n") is None and gpu_arch("") is None
