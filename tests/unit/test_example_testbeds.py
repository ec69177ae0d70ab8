"""The example InfiniBand testbed names what a real 8-GPU H100 host has.

The host is the DGX H100 of tests/data/hardware/dgx-h100-ibdev2netdev.txt, laid out as sysfs by
`fake_sysfs.dgx_h100()`: eight IB HCAs whose device numbers skip the three Ethernet ports
(mlx5_1, mlx5_2, mlx5_7) and whose IPoIB interfaces are named after the PCI bus (ibp24s0).
Discovery on that host must leave the example as it is (every NIC found, same link layer, same
interface), and every experiment written for the example must still plan on what discovery
wrote: a fault aimed at a device that is Ethernet there would be refused.

This module holds its pure tests; the same subject's other tests:
tests/integration/test_example_testbeds.py (those with real processes).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from r2bench.config.load import load_testbed
from r2bench.config.testbed import NicKind, Testbed
from r2bench.plan.build import load_inputs, make_plan
from tests.support import paths

ROOT = paths.REPO
EXAMPLE = ROOT / "experiments" / "testbeds" / "dgx-h100-2node.yaml"
HARDWARE = ROOT / "tests" / "data" / "hardware" / "dgx-h100-ibdev2netdev.txt"
CLUSTER_FIRST = ROOT / "experiments" / "cluster-first.yaml"
# Every experiment whose comment says it runs as is on the example.
ON_THE_EXAMPLE = [
    *sorted((ROOT / "experiments" / "paper").glob("*.yaml")),
    ROOT / "experiments" / "ci" / "real-2node.yaml",
    CLUSTER_FIRST,
]


def _captured_devices() -> dict[str, str]:
    """device -> interface, from the real `ibdev2netdev` output."""
    pairs = {}
    for line in HARDWARE.read_text().splitlines():
        if line.startswith("mlx5_"):
            device, _port, _number, _arrow, interface, _state = line.split()
            pairs[device] = interface
    return pairs


def test_every_ib_nic_is_an_infiniband_device_of_the_real_host() -> None:
    captured = _captured_devices()
    for node in load_testbed(EXAMPLE).nodes:
        ib = [nic for nic in node.data_nics if nic.kind is NicKind.IB]
        assert len(ib) == 8, node.name
        for nic in ib:
            assert nic.rdma_device in captured, nic.rdma_device
            assert captured[nic.rdma_device].startswith("ibp"), (nic.name, "is Ethernet there")
            assert nic.netdev in (None, captured[nic.rdma_device]), nic.name


@pytest.mark.parametrize("experiment", ON_THE_EXAMPLE, ids=lambda p: p.name)
def test_experiments_plan_on_the_discovered_example(
    experiment: Path, discovered: Testbed, tmp_path: Path
) -> None:
    testbed = tmp_path / "discovered.yaml"
    testbed.write_text(discovered.model_dump_json(exclude_none=True))
    plan = make_plan(load_inputs(experiment, testbed))
    assert plan.runs
    example = load_testbed(EXAMPLE)
    for run in plan.runs:
        for fault in run.spec.faults:
            node = example.node(fault.node)
            assert node is not None
            nic = node.nic(fault.nic)
            assert nic is not None and not nic.management, (experiment.name, fault.nic)


def test_cluster_first_sweep_is_small_and_faults_a_data_hca_mid_run() -> None:
    """docs/cluster.md's first sweep plans on the example as written, with no warning: stock
    NCCL and R-2CCL mode 0, fault-free and with one of node1's IB data HCAs disabled after the
    first result line, 2 sizes, 1 repeat."""
    plan = make_plan(load_inputs(CLUSTER_FIRST, EXAMPLE))
    assert plan.notes == []
    runs = {
        (r.spec.library.recipe, r.spec.env.get("R2CC_MODE"), r.spec.scenario) for r in plan.runs
    }
    assert runs == {
        (library, mode, scenario)
        for library, mode in (("vanilla", None), ("r2ccl", "0"))
        for scenario in ("none", "nic-down")
    }
    assert len(plan.runs) == len(runs)
    node1 = load_testbed(EXAMPLE).node("node1")
    assert node1 is not None
    for run in plan.runs:
        spec = run.spec
        assert (spec.collective, spec.size_begin, spec.size_end, spec.size_factor) == (
            "all_reduce",
            16 << 20,
            256 << 20,
            16,
        )
        assert spec.options.cycles and spec.options.timeout_s
        if spec.scenario == "none":
            assert not spec.faults
            continue
        (fault,) = spec.faults
        assert fault.kind == "ib_port_down" and fault.node == "node1"
        nic = node1.nic(fault.nic) if fault.nic else None
        assert nic is not None and nic.kind is NicKind.IB and not nic.management
        assert fault.trigger.since.value == "first_result" and fault.duration_s is None
