"""A fault may run on another host than the node whose NIC it affects (the BlueField that
carries the NIC), and a host that runs no rank never gets ranks (the r7525 testbed).

This module holds its pure tests; the same subject's other tests:
tests/integration/test_fault_executor.py (those with real processes).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from r2bench.commands.plan_script import node_script, plan_nodes
from r2bench.config.errors import ConfigError
from r2bench.plan.build import load_inputs, make_plan
from r2bench.plan.model import Plan
from tests.support import paths

ROOT = paths.REPO
R7525 = ROOT / "experiments" / "testbeds" / "cloudlab-r7525.yaml"
BASE = "name: t\nlibraries:\n  r2ccl: {recipe: r2ccl, ref: main}\nsizes: [4G]\n"
CUT = (
    "scenarios:\n  - name: cut\n    faults:\n"
    "      - {{kind: {kind}, node: {node}, nic: {nic}, {extra}trigger: {{after_s: 8}}}}\n"
)


def _plan(tmp_path: Path, body: str, testbed: Path = R7525) -> Plan:
    path = tmp_path / "exp.yaml"
    path.write_text(BASE + body)
    return make_plan(load_inputs(path, testbed))


def _refusal(tmp_path: Path, body: str, testbed: Path = R7525) -> str:
    with pytest.raises(ConfigError) as error:
        _plan(tmp_path, body, testbed)
    return str(error.value)


def test_the_cut_runs_on_the_bluefield_and_ranks_only_on_the_gpu_nodes(tmp_path: Path) -> None:
    extra = "executor: node-1-bf, params: {bridge: ovsbr1}, "
    plan = _plan(tmp_path, CUT.format(kind="flow_drop", node="node-1", nic="mlx5_2", extra=extra))
    run = next(r for r in plan.runs if r.faults)
    assert "mpirun -np 6 " in run.launch.command and "192.168.100.2" not in run.launch.command
    (fault,) = run.faults
    assert (fault.node, fault.nic) == ("node-1", "mlx5_2")
    for command in (fault.inject, fault.revert, fault.status):
        assert command.node == "node-1-bf" and "ovs_flow.sh" in command.command
    assert "--bridge ovsbr1" in fault.inject.command and "--lease-s" in fault.inject.command
    assert "node-1-bf" in plan_nodes(plan)
    assert "ovs_flow.sh inject" in node_script(plan, "node-1-bf")
    assert "ovs_flow.sh" not in node_script(plan, "node-1")
    assert all(step.nodes == ["node-1", "node-2", "node-3"] for step in plan.setup)


def test_a_cut_placed_on_the_host_is_refused_with_the_fix(tmp_path: Path) -> None:
    body = CUT.format(
        kind="flow_drop", node="node-1", nic="mlx5_2", extra="params: {bridge: ovsbr1}, "
    )
    text = _refusal(tmp_path, body)
    assert "runs on the SmartNIC that carries the NIC" in text
    assert "set executor: node-1-bf" in text
    # mlx5_0 is the host's own ConnectX-5: no BlueField carries it
    body = CUT.format(
        kind="flow_drop",
        node="node-2",
        nic="mlx5_3",
        extra="executor: node-1-bf, params: {bridge: ovsbr2}, ",
    )
    text = _refusal(tmp_path, body)
    assert "'node-1-bf' does not carry node-2/mlx5_3" in text and "node-2-bf" in text


def test_a_node_side_fault_cannot_move_to_another_host(tmp_path: Path) -> None:
    body = CUT.format(kind="link_down", node="node-1", nic="mlx5_2", extra="executor: node-1-bf, ")
    text = _refusal(tmp_path, body)
    assert "scenarios[0].faults[0].executor" in text and "remove executor" in text
    unknown = CUT.format(kind="link_down", node="node-1", nic="mlx5_2", extra="executor: node-9, ")
    assert "no host 'node-9'" in _refusal(tmp_path, unknown)


def test_a_smartnic_is_never_a_rank_node_nor_a_fault_node(tmp_path: Path) -> None:
    text = _refusal(tmp_path, "nodes: [node-1, node-1-bf]\n")
    assert "nodes[1]" in text and "is a smartnic (of 'node-1'): it runs no rank" in text
    body = CUT.format(
        kind="flow_drop", node="node-1-bf", nic="mlx5_2", extra="params: {bridge: ovsbr1}, "
    )
    text = _refusal(tmp_path, body)
    assert "node 'node-1-bf' is a smartnic" in text and "node: node-1, executor: node-1-bf" in text
    assert len(_plan(tmp_path, "nodes: 3\n").runs[0].spec.nodes) == 3
    assert "has 3 that run ranks" in _refusal(tmp_path, "nodes: 4\n")


@pytest.mark.parametrize(
    ("old", "new", "problem"),
    [
        ("    host_of: node-1\n", "", "a smartnic needs host_of"),
        ("carries: [mlx5_2, mlx5_3]", "carries: [mlx5_2, mlx5_9]", "carries mlx5_9, which node"),
        ("on: node-1-bf,", "on: node-2-bf,", "shaping.on 'node-2-bf' is neither the node"),
        ("    host_of: node-1\n", "    host_of: node-1\n    gpus: 1\n", "gpus must be 0"),
    ],
)
def test_the_testbed_refuses_a_smartnic_that_cannot_be(
    tmp_path: Path, old: str, new: str, problem: str
) -> None:
    text = R7525.read_text()
    assert old in text
    testbed = tmp_path / "tb.yaml"
    testbed.write_text(text.replace(old, new, 1))
    assert problem in _refusal(tmp_path, "", testbed)


def test_a_cut_by_hand_runs_on_the_smartnic_that_carries_the_nic() -> None:
    from r2bench.commands.handfault import ManualFault, manual_fault_step

    step, _ = manual_fault_step(
        R7525, ManualFault("flow_drop", "node-2", "mlx5_3", {"bridge": "ovsbr2"})
    )
    assert step.inject.node == step.revert.node == "node-2-bf" and step.node == "node-2"
    step, _ = manual_fault_step(R7525, ManualFault("link_down", "node-2", "mlx5_3", {}))
    assert step.inject.node == "node-2"


def test_without_a_declared_bluefield_the_fix_says_how_to_declare_one(tmp_path: Path) -> None:
    text = R7525.read_text()
    text = text[: text.index("  - name: node-1-bf")] + text[text.index("launcher:") :]
    for k in (1, 2, 3):
        text = text.replace(f"on: node-{k}-bf, ", "")
    testbed = tmp_path / "no-bf.yaml"
    testbed.write_text(text)
    body = CUT.format(
        kind="flow_drop", node="node-1", nic="mlx5_2", extra="params: {bridge: ovsbr1}, "
    )
    refusal = _refusal(tmp_path, body, testbed)
    assert "'node-1' is the node itself" in refusal
    assert "declare the BlueField that carries mlx5_2 as a host of the testbed" in refusal
    assert "host_of: node-1, carries: [mlx5_2]" in refusal
