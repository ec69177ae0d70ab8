"""r2bench doctor: pure checks on realistic outputs, and end to end on local and ssh testbeds.

The development machines have no GPUs, no RDMA devices and no GPU drivers, so the outputs of
`nvidia-smi -L`, `nvidia-smi topo -m`, `lsmod`, the InfiniBand sysfs files and HPC-X/MPICH
`mpirun --version` below are written by hand in the exact formats those tools print. The Open MPI
`mpirun --version`, `ps`, `/etc/os-release` and netdev sysfs outputs were captured on Debian 12.

This module holds its pure tests; the same subject's other tests:
tests/integration/test_doctor.py (those with real processes).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from r2bench.config.testbed import Nic, Testbed
from r2bench.config.testbed import Node as NodeModel
from r2bench.doctor import Status
from r2bench.doctor.checks import (
    check_affinity,
    check_clock,
    check_driver,
    check_faults,
    check_gdr,
    check_gpus,
    check_launcher_tools,
    check_nic,
    check_os,
    check_processes,
    check_reachable,
    check_root,
    check_ssh_mesh,
    count_gpus,
    parse_topology,
    run_checks,
)
from r2bench.doctor.facts import (
    ABSENT,
    NodeFacts,
    facts_script,
    node_path,
    parse_sections,
)
from r2bench.launch.mpirun import mpirun_version

# ---- outputs ---------------------------------------------------------------------------------

NVIDIA_SMI_L = """\
GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-5d3c9f1e-8a2b-4c7d-9e0f-1a2b3c4d5e6f)
GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-6e4d0a2f-9b3c-4d8e-0f1a-2b3c4d5e6f70)
GPU 2: NVIDIA H100 80GB HBM3 (UUID: GPU-7f5e1b3a-0c4d-4e9f-1a2b-3c4d5e6f7081)
GPU 3: NVIDIA H100 80GB HBM3 (UUID: GPU-806f2c4b-1d5e-4fa0-2b3c-4d5e6f708192)
"""

NVIDIA_SMI_NO_DRIVER = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
    "Make sure that the latest NVIDIA driver is installed and running.\n"
)

TOPO_M = """\
\tGPU0\tGPU1\tGPU2\tGPU3\tNIC0\tNIC1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID
GPU0\t X \tNV18\tNV18\tNV18\tPXB\tSYS\t0-47\t0\t\tN/A
GPU1\tNV18\t X \tNV18\tNV18\tPXB\tSYS\t0-47\t0\t\tN/A
GPU2\tNV18\tNV18\t X \tNV18\tSYS\tPIX\t48-95\t1\t\tN/A
GPU3\tNV18\tNV18\tNV18\t X \tSYS\tPXB\t48-95\t1\t\tN/A
NIC0\tPXB\tPXB\tSYS\tSYS\t X \tSYS
NIC1\tSYS\tSYS\tPIX\tPXB\tSYS\t X

Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing at most a single PCIe bridge
  NV#  = Connection traversing a bonded set of # NVLinks

NIC Legend:

  NIC0: mlx5_0
  NIC1: mlx5_1
"""

# Older drivers name the NIC columns after the device instead of NIC<n>.
TOPO_M_OLD = """\
\tGPU0\tGPU1\tmlx5_0\tCPU Affinity
GPU0\t X \tSYS\tPIX\t0-15
GPU1\tSYS\t X \tSYS\t16-31
mlx5_0\tPIX\tSYS\t X \t
"""

IB_ACTIVE = (
    "state=4: ACTIVE\nphys_state=5: LinkUp\nlink_layer=InfiniBand\nrdma_devices=mlx5_0 mlx5_1"
)
IB_DISABLED = "state=1: DOWN\nphys_state=3: Disabled\nlink_layer=InfiniBand\nrdma_devices=mlx5_0"
IB_INIT = "state=2: INIT\nphys_state=5: LinkUp\nlink_layer=InfiniBand\nrdma_devices=mlx5_0"
IB_MISSING = (
    "state=cat: /sys/class/infiniband/mlx5_3/ports/1/state: No such file or directory\n"
    "phys_state=cat: /sys/class/infiniband/mlx5_3/ports/1/phys_state: No such file or directory\n"
    "link_layer=cat: /sys/class/infiniband/mlx5_3/ports/1/link_layer: No such file or directory\n"
    "rdma_devices=mlx5_0 mlx5_1"
)
ROCE_UP = (
    "state=4: ACTIVE\nphys_state=5: LinkUp\nlink_layer=Ethernet\nrdma_devices=mlx5_2\n"
    "operstate=up\ncarrier=1\ndevice=physical\nnetdevs=eno1 ens1f0np0 lo"
)
ROCE_ADMIN_DOWN = (
    "state=1: DOWN\nphys_state=3: Disabled\nlink_layer=Ethernet\nrdma_devices=mlx5_2\n"
    "operstate=down\ncarrier=cat: /sys/class/net/ens1f0np0/carrier: Invalid argument\n"
    "device=physical\nnetdevs=eno1 ens1f0np0 lo"
)
ETH_ADMIN_DOWN = (
    "operstate=down\ncarrier=cat: /sys/class/net/eth1/carrier: Invalid argument\n"
    "device=virtual\nnetdevs=eth0 eth1 lo"
)
LO = "operstate=unknown\ncarrier=1\ndevice=virtual\nnetdevs=eth0 lo"
PHYSICAL_UNKNOWN = "operstate=unknown\ncarrier=1\ndevice=physical\nnetdevs=eno1 lo"

OPEN_MPI = "/usr/bin/mpirun\nmpirun (Open MPI) 4.1.4\n\nReport bugs to http://www.open-mpi.org/community/help/"
HPCX = "/opt/hpcx/ompi/bin/mpirun\nmpirun (Open MPI) 4.1.7a1\n\nReport bugs to http://www.open-mpi.org/community/help/"
MPICH = (
    "/usr/bin/mpirun\nHYDRA build details:\n    Version:                                 4.0.2\n"
    "    Release Date:                            Thu Apr  7 12:34:45 CDT 2022"
)

PS = """\
      1 /sbin/init
    812 /usr/sbin/sshd -D
   4242 /opt/nccl-tests/build/all_reduce_perf -b 8 -e 8G -f 2 -g 1
   4250 python3 -m r2bench.workloads.ring_allreduce --size 1M
   5000 vim perf_notes.txt
   5001 bash -c ps -eo pid=,args=
"""

OS_DEBIAN = "6.1.0-26-amd64\nDebian GNU/Linux 12 (bookworm)"
OS_UBUNTU = "5.15.0-122-generic\nUbuntu 22.04.5 LTS"


# ---- helpers ---------------------------------------------------------------------------------


def node_model(
    name: str = "n0",
    gpus: int = 0,
    nics: Sequence[Mapping[str, object]] | None = None,
    sudo: bool = True,
) -> NodeModel:
    """A testbed node."""
    return NodeModel.model_validate(
        {"name": name, "address": "10.0.0.1", "gpus": gpus, "nics": nics or [], "sudo": sudo}
    )


def make_testbed(*nodes: NodeModel, kind: str = "ssh", launcher: str = "mpirun") -> Testbed:
    """A testbed of the given nodes."""
    return Testbed.model_validate(
        {
            "name": "tb",
            "kind": kind,
            "launcher": {"kind": launcher},
            "nodes": [node.model_dump() for node in nodes],
        }
    )


def facts(node: str = "n0", **sections: str) -> NodeFacts:
    """Facts of a reachable node."""
    return NodeFacts(node, reachable=True, latency_s=0.002, clock_offset_s=0.001, sections=sections)


def nic(**fields: object) -> Nic:
    """A NIC of the testbed."""
    return Nic.model_validate(fields)


# ---- link layers as real hosts have them (tests/data/hardware/README.md) -----------------
# An H100 IB fabric: ports ACTIVE, IPoIB not configured (no `ibp24s0` at all) or down.
IB_NO_IPOIB = (
    "state=4: ACTIVE\nphys_state=5: LinkUp\nlink_layer=InfiniBand\n"
    "rdma_devices=mlx5_0 mlx5_1 mlx5_10 mlx5_2 mlx5_3\n"
    "operstate=cat: /sys/class/net/ibp24s0/operstate: No such file or directory\n"
    "carrier=cat: /sys/class/net/ibp24s0/carrier: No such file or directory\n"
    "device=virtual\nnetdevs=enp170s0np0 enp41s0f0np0 enp41s0f1np1 lo"
)
IB_IPOIB_DOWN = (
    "state=4: ACTIVE\nphys_state=5: LinkUp\nlink_layer=InfiniBand\nrdma_devices=mlx5_0 mlx5_3\n"
    "operstate=down\ncarrier=cat: /sys/class/net/ibp24s0/carrier: Invalid argument\n"
    "device=physical\nnetdevs=enp170s0np0 ibp24s0 ibp64s0 lo"
)
# A RoCE port without a cable: the netdev is up administratively, no carrier.
ROCE_NO_CARRIER = (
    "state=1: DOWN\nphys_state=3: Disabled\nlink_layer=Ethernet\nrdma_devices=mlx5_1\n"
    "operstate=down\ncarrier=0\ndevice=physical\nnetdevs=enp41s0f0np0 lo"
)


# ---- pure checks ---------------------------------------------------------------------------------


def test_parse_sections_splits_on_markers() -> None:
    text = "@@r2bench-doctor:os@@\n6.1.0\nDebian\n@@r2bench-doctor:nic.ib0@@\nstate=4: ACTIVE\n"
    assert parse_sections(text) == {"os": "6.1.0\nDebian", "nic.ib0": "state=4: ACTIVE"}


def test_node_path_resolves_relative_paths_from_home() -> None:
    assert node_path(".r2bench/faults") == '"$HOME"/.r2bench/faults'
    assert node_path("~/x y") == "\"$HOME\"/'x y'"
    assert node_path("/abs/dir") == "/abs/dir"


def test_gpu_count_and_check() -> None:
    assert count_gpus(NVIDIA_SMI_L) == 4
    four = node_model(gpus=4)
    assert check_gpus(facts(gpus=NVIDIA_SMI_L), four).status is Status.OK
    wrong = check_gpus(facts(gpus=NVIDIA_SMI_L), node_model(gpus=8))
    assert wrong.status is Status.FAIL and "4 visible, testbed says 8" in wrong.detail
    no_driver = check_gpus(facts(gpus=NVIDIA_SMI_NO_DRIVER), four)
    assert no_driver.status is Status.FAIL and "couldn't communicate" in no_driver.detail
    assert check_gpus(facts(gpus=ABSENT), node_model()).detail == "none"
    assert check_gpus(facts(gpus=ABSENT), four).detail == "nvidia-smi not found"
    assert check_gpus(facts(gpus=NVIDIA_SMI_L), node_model()).status is Status.WARN


def test_topology_and_affinity() -> None:
    topology = parse_topology(TOPO_M)
    assert topology is not None
    assert topology.links["GPU2"]["NIC1"] == "PIX" and topology.nic_names["NIC0"] == "mlx5_0"
    assert set(topology.links) == {"GPU0", "GPU1", "GPU2", "GPU3"}
    result = check_affinity(facts(topo=TOPO_M), node_model(gpus=4))
    assert result.status is Status.OK
    assert "GPU0->mlx5_0(PXB)" in result.detail and "GPU2->mlx5_1(PIX)" in result.detail
    old = check_affinity(facts(topo=TOPO_M_OLD), node_model(gpus=2))
    assert "GPU0->mlx5_0(PIX)" in old.detail and "GPU1->mlx5_0(SYS)" in old.detail
    assert (
        check_affinity(facts(topo=NVIDIA_SMI_NO_DRIVER), node_model(gpus=2)).status is Status.WARN
    )
    assert check_affinity(facts(), node_model()).status is Status.SKIP


def test_gdr_module() -> None:
    ib = [{"name": "ib0", "kind": "ib", "rdma_device": "mlx5_0"}]
    gpu_ib = node_model(gpus=8, nics=ib)
    assert check_gdr(facts(gdr="nvidia_peermem         16384  0"), gpu_ib).status is Status.OK
    missing = check_gdr(facts(gdr=""), gpu_ib)
    assert missing.status is Status.WARN and "modprobe nvidia_peermem" in missing.fix
    assert check_gdr(facts(gdr=""), node_model(gpus=8)).status is Status.SKIP


@pytest.mark.parametrize(
    ("fields", "section", "status", "words"),
    [
        ({"kind": "ib", "rdma_device": "mlx5_0"}, IB_ACTIVE, Status.OK, "4: ACTIVE"),
        ({"kind": "ib", "rdma_device": "mlx5_0"}, IB_DISABLED, Status.FAIL, "3: Disabled"),
        ({"kind": "ib", "rdma_device": "mlx5_0"}, IB_INIT, Status.FAIL, "2: INIT"),
        ({"kind": "ib", "rdma_device": "mlx5_3"}, IB_MISSING, Status.FAIL, "mlx5_0 mlx5_1"),
        (
            {"kind": "roce", "rdma_device": "mlx5_0", "netdev": "ib0"},
            IB_ACTIVE,
            Status.FAIL,
            "expected Ethernet",
        ),
        (
            {"kind": "roce", "rdma_device": "mlx5_2", "netdev": "ens1f0np0"},
            ROCE_UP,
            Status.OK,
            "up",
        ),
        (
            {"kind": "roce", "rdma_device": "mlx5_2", "netdev": "ens1f0np0"},
            ROCE_ADMIN_DOWN,
            Status.FAIL,
            "1: DOWN",
        ),
        ({"kind": "eth", "netdev": "eth1"}, ETH_ADMIN_DOWN, Status.FAIL, "admin-down"),
        ({"kind": "eth", "netdev": "lo"}, LO, Status.OK, "counted as up"),
        ({"kind": "eth", "netdev": "eno1"}, PHYSICAL_UNKNOWN, Status.FAIL, "unknown"),
        (
            {"kind": "eth", "netdev": "eth9"},
            "operstate=cat: x: No such file",
            Status.FAIL,
            "no interface",
        ),
    ],
)
def test_nic_states(fields: dict[str, object], section: str, status: Status, words: str) -> None:
    result = check_nic(facts(**{"nic.x": section}), nic(name="x", **fields))
    assert result.status is status, result
    assert words in result.detail
    assert (result.fix != "") == (status is Status.FAIL)


def test_nic_fix_names_the_tool() -> None:
    disabled = check_nic(
        facts(**{"nic.x": IB_DISABLED}), nic(name="x", kind="ib", rdma_device="mlx5_0")
    )
    assert "ibportstate -C mlx5_0 -P 1" in disabled.fix
    init = check_nic(facts(**{"nic.x": IB_INIT}), nic(name="x", kind="ib", rdma_device="mlx5_0"))
    assert "subnet manager" in init.fix
    down = check_nic(facts(**{"nic.x": ETH_ADMIN_DOWN}), nic(name="x", kind="eth", netdev="eth1"))
    assert "ip link set dev eth1 up" in down.fix


def test_mpirun_versions() -> None:
    assert mpirun_version(OPEN_MPI) == "Open MPI 4.1.4"
    assert mpirun_version(HPCX) == "Open MPI 4.1.7a1"
    assert mpirun_version(MPICH) == "Hydra 4.0.2"
    tb = make_testbed(node_model("a"), node_model("b"), node_model("c"))
    results = check_launcher_tools(
        [facts("a", mpirun=OPEN_MPI), facts("b", mpirun=OPEN_MPI), facts("c", mpirun=HPCX)], tb
    )
    by_node = {r.node: r for r in results}
    assert by_node["a"].status is Status.OK and by_node["c"].status is Status.FAIL
    assert "most nodes: Open MPI 4.1.4" in by_node["c"].detail
    absent = check_launcher_tools([facts("a", mpirun=ABSENT)], tb)[0]
    assert absent.status is Status.FAIL and "launcher.command" in absent.fix
    local = make_testbed(node_model("a"), launcher="local")
    assert check_launcher_tools([facts("a")], local)[0].status is Status.SKIP


def test_os_and_driver_must_match() -> None:
    os_results = check_os(
        [facts("a", os=OS_DEBIAN), facts("b", os=OS_DEBIAN), facts("c", os=OS_UBUNTU)]
    )
    assert [r.status for r in os_results] == [Status.OK, Status.OK, Status.WARN]
    models = {n: node_model(n, gpus=8) for n in ("a", "b")}
    drivers = check_driver(
        [facts("a", driver="550.54.15"), facts("b", driver="535.183.01")], models
    )
    assert {r.status for r in drivers} == {Status.OK, Status.FAIL}
    failed = check_driver([facts("a", driver=NVIDIA_SMI_NO_DRIVER)], models)[0]
    assert failed.status is Status.FAIL


def test_stray_processes_and_faults() -> None:
    result = check_processes(facts(procs=PS))
    assert result.status is Status.FAIL and "kill 4242 4250" in result.fix
    assert "5000" not in result.fix and "5001" not in result.fix
    assert check_processes(facts(procs="1 /sbin/init")).status is Status.OK
    # The record format of injectors/lib.sh, as the facts script flattens it onto one line.
    active = (
        "run3.n1.ib0\tkind=ib_port script=/home/u/.r2bench/injectors/ib_port.sh "
        "injected_at=1795320000.123456789 opt_ca=mlx5_0 opt_port=1 lease_pid=4711 \n"
        "odd\tfree text"
    )
    fault = check_faults(facts(faults=active), ".r2bench")
    assert fault.status is Status.FAIL
    assert fault.detail == "run3.n1.ib0 (kind ib_port); odd (free text)"
    assert "r2bench heal" in fault.fix
    assert check_faults(facts(faults=""), ".r2bench").status is Status.OK


def test_reachable_and_clock() -> None:
    down = NodeFacts("n0", reachable=False, error="ssh to 10.0.0.1 failed: refused")
    result = check_reachable(down, node_model())
    assert result.status is Status.FAIL and "ssh -p 22 10.0.0.1 true" in result.fix
    assert "2.0 ms" in check_reachable(facts(), node_model()).detail
    skewed = NodeFacts("n0", reachable=True, clock_offset_s=-0.120)
    assert check_clock(skewed).status is Status.WARN and "-120.0 ms" in check_clock(skewed).detail
    assert check_clock(facts()).status is Status.OK


def test_ssh_mesh_from_first_node() -> None:
    tb = make_testbed(node_model("a"), node_model("b"), node_model("c"))
    probes = "b\t0\t\nc\t255\tPermission denied (publickey)."
    results = {
        r.node: r for r in check_ssh_mesh([facts("a", ssh=probes), facts("b"), facts("c")], tb)
    }
    assert results["a"].status is Status.OK and results["b"].status is Status.OK
    assert results["c"].status is Status.FAIL and "Permission denied" in results["c"].detail
    local = check_ssh_mesh(
        [facts("a"), facts("b")], make_testbed(node_model("a"), node_model("b"), kind="local")
    )
    assert {r.status for r in local} == {Status.SKIP}


def test_run_checks_skips_the_rest_of_an_unreachable_node() -> None:
    tb = make_testbed(node_model("a"), node_model("b"))
    healthy = facts(
        "a", os=OS_DEBIAN, gpus=ABSENT, mpirun=OPEN_MPI, procs="1 /sbin/init", ssh="b\t255\trefused"
    )
    results = run_checks(tb, [healthy, NodeFacts("b", reachable=False, error="refused")])
    b_results = [r for r in results if r.node == "b"]
    assert [(r.check, r.status) for r in b_results] == [
        ("reachable", Status.FAIL),
        ("ssh from first", Status.FAIL),
        ("other checks", Status.SKIP),
    ]
    assert all(r.status in (Status.OK, Status.SKIP) for r in results if r.node == "a")


def test_facts_script_mentions_every_nic_and_peer() -> None:
    a = node_model("a", gpus=8, nics=[{"name": "ib0", "kind": "ib", "rdma_device": "mlx5_0"}])
    b = NodeModel.model_validate(
        {"name": "b", "address": "10.0.0.2", "ssh": {"port": 2222, "config_file": "/etc/r2 cfg"}}
    )
    tb = make_testbed(a, b)
    script = facts_script(tb, tb.nodes[0], [tb.nodes[1]])
    assert "/sys/class/infiniband/mlx5_0/ports/1" in script and "nvidia-smi topo -m" in script
    assert "-F '/etc/r2 cfg' -p 2222 10.0.0.2 true" in script and "BatchMode=yes" in script
    assert "_perf" not in script and "r2bench.workloads" not in script  # not a stray process


# ---- fix text fits the node: no sudo where sudo is off, a heal that exists -----------------


def test_fix_text_says_sudo_only_on_nodes_that_use_it() -> None:
    """Before: `sudo ip link set ...` on a `sudo: false` node (often root, without sudo)."""
    eth = nic(name="x", kind="eth", netdev="eth1")
    ib = nic(name="x", kind="ib", rdma_device="mlx5_0")
    for sudo in (True, False):
        down = check_nic(facts(**{"nic.x": ETH_ADMIN_DOWN}), eth, sudo=sudo)
        disabled = check_nic(facts(**{"nic.x": IB_DISABLED}), ib, sudo=sudo)
        gdr = check_gdr(facts(gdr=""), node_model(gpus=8, nics=[ib.model_dump()], sudo=sudo))
        for result in (down, disabled, gdr):
            assert ("sudo" in result.fix) is sudo, result.fix
        assert "ip link set dev eth1 up" in down.fix


def test_active_fault_fix_points_at_a_heal_that_exists() -> None:
    """Before: `r2bench heal` (a stub) and `sudo` whatever the node said."""
    active = "run3.n1.ib0\tkind=ib_port_down script=/w/injectors/ib_port.sh"
    for sudo in (True, False):
        fault = check_faults(facts(faults=active), "/w", sudo=sudo)
        assert "r2bench heal -t TESTBED" in fault.fix
        assert "bash /w/injectors/heal.sh" in fault.fix
        assert ("sudo" in fault.fix) is sudo, fault.fix


def test_a_socket_only_node_says_r2cc_disconnected_hca_cannot_fire() -> None:
    from r2bench.doctor.checks import check_transport

    eth = node_model(nics=[{"name": "eth1", "kind": "eth", "netdev": "eth1"}])
    result = check_transport(eth)
    assert result.status is Status.OK and "R2CC_DISCONNECTED_HCA cannot fire here" in result.detail
    ib = node_model(nics=[{"name": "mlx5_0", "kind": "ib", "rdma_device": "mlx5_0", "port": 1}])
    assert "IB verbs possible (mlx5_0)" in check_transport(ib).detail


def test_ib_port_is_healthy_by_its_port_state_ipoib_optional() -> None:
    """Before: an ACTIVE IB port failed doctor when its IPoIB interface was absent or down
    (the usual case on H100 IB fabrics: NCCL uses the verbs, never IPoIB)."""
    ib = nic(name="x", kind="ib", rdma_device="mlx5_0", netdev="ibp24s0")
    absent = check_nic(facts(**{"nic.x": IB_NO_IPOIB}), ib)
    assert absent.status is Status.OK, absent
    assert "mlx5_0/1 4: ACTIVE" in absent.detail and "IPoIB ibp24s0 absent" in absent.detail
    down = check_nic(facts(**{"nic.x": IB_IPOIB_DOWN}), ib)
    assert down.status is Status.OK and "IPoIB ibp24s0 down (optional)" in down.detail
    disabled = check_nic(facts(**{"nic.x": IB_DISABLED}), ib)
    assert disabled.status is Status.FAIL and "ibportstate" in disabled.fix


def test_ib_management_nic_needs_its_ipoib() -> None:
    """Where the controller reaches the node over IPoIB, the interface is the path: it counts."""
    ib = nic(name="x", kind="ib", rdma_device="mlx5_0", netdev="ibp24s0", management=True)
    assert check_nic(facts(**{"nic.x": IB_IPOIB_DOWN}), ib).status is Status.FAIL


@pytest.mark.parametrize(
    ("section", "words"),
    [
        (ROCE_ADMIN_DOWN, "ip link set dev ens1f0np0 up"),
        (ROCE_NO_CARRIER, "no carrier"),
    ],
)
def test_roce_port_down_is_fixed_on_its_ethernet_interface(section: str, words: str) -> None:
    """Before: `ibportstate ... enable` for a RoCE port (no subnet management agent there)."""
    netdev = "ens1f0np0" if section is ROCE_ADMIN_DOWN else "enp41s0f0np0"
    roce = nic(name="x", kind="roce", rdma_device="mlx5_1", netdev=netdev)
    result = check_nic(facts(**{"nic.x": section}), roce)
    assert result.status is Status.FAIL
    assert "ibportstate" not in result.fix and words in result.fix, result.fix
    assert "1: DOWN" in result.detail


def test_wrong_link_layer_is_said_before_the_port_state() -> None:
    """A RoCE port listed as ib: the kind is what is wrong, not the subnet manager."""
    ib = nic(name="x", kind="ib", rdma_device="mlx5_1")
    result = check_nic(facts(**{"nic.x": ROCE_ADMIN_DOWN}), ib)
    assert result.status is Status.FAIL and "expected InfiniBand" in result.detail
    assert "kind: roce" in result.fix


# ---- root on the node: fault commands run as `sudo -n` ----------------------------------------


@pytest.mark.parametrize(
    ("section", "sudo", "status", "said"),
    [
        ("uid=0", True, Status.OK, "root"),
        ("uid=1000 user=alice\nsudo_rc=0", True, Status.OK, "passwordless sudo"),
        (
            "uid=1000 user=alice\nsudo_rc=1 sudo: a password is required",
            True,
            Status.FAIL,
            "a password is required",
        ),
        ("uid=1000 user=alice", False, Status.FAIL, "sudo: false"),
    ],
)
def test_check_root_says_whether_faults_can_run(
    section: str, sudo: bool, status: Status, said: str
) -> None:
    model = NodeModel.model_validate({"name": "n0", "address": "10.0.0.1", "sudo": sudo})
    result = check_root(facts(privilege=section), model)
    assert result.status is status
    assert said in result.detail
    if status is Status.FAIL:
        assert "ssh.user: root" in result.fix


def test_facts_script_asks_sudo_without_a_prompt() -> None:
    script = facts_script(
        make_testbed(NodeModel(name="n0", address="h")), NodeModel(name="n0", address="h"), []
    )
    assert "sudo -n true" in script
    assert "@@r2bench-doctor:privilege@@" in script
