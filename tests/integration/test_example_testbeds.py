"""The example InfiniBand testbed names what a real 8-GPU H100 host has.

The host is the DGX H100 of tests/data/hardware/dgx-h100-ibdev2netdev.txt, laid out as sysfs by
`fake_sysfs.dgx_h100()`: eight IB HCAs whose device numbers skip the three Ethernet ports
(mlx5_1, mlx5_2, mlx5_7) and whose IPoIB interfaces are named after the PCI bus (ibp24s0).
Discovery on that host must leave the example as it is (every NIC found, same link layer, same
interface), and every experiment written for the example must still plan on what discovery
wrote: a fault aimed at a device that is Ethernet there would be refused.

This module holds those with real processes; the same subject's other tests:
tests/unit/test_example_testbeds.py (its pure tests).
"""

from __future__ import annotations

from r2bench.config.load import load_testbed
from r2bench.config.testbed import NicKind, Testbed
from tests.support import paths

ROOT = paths.REPO
EXAMPLE = ROOT / "experiments" / "testbeds" / "dgx-h100-2node.yaml"


def test_discovery_on_the_real_host_leaves_the_example_as_it_is(discovered: Testbed) -> None:
    """Every NIC the example lists is found with the same link layer, device and interface;
    what discovery adds are the host's other Ethernet ports (the two storage ports)."""
    example = load_testbed(EXAMPLE)
    for written, found in zip(example.nodes, discovered.nodes, strict=True):
        listed = [(n.name, n.kind, n.rdma_device, n.netdev, n.management) for n in written.nics]
        seen = [(n.name, n.kind, n.rdma_device, n.netdev, n.management) for n in found.nics]
        assert seen[: len(listed)] == listed
        assert {(n.rdma_device, n.kind) for n in found.nics[len(listed) :]} == {
            ("mlx5_1", NicKind.ROCE),
            ("mlx5_2", NicKind.ROCE),
        }
