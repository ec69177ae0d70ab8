"""The testbed file: which nodes exist, how to reach them, their GPUs and NICs, how to launch."""

from __future__ import annotations

from enum import Enum
from typing import Annotated

from pydantic import Field, StrictBool, StrictInt, field_validator, model_validator

from r2bench.config.types import (
    FreeText,
    HostAddress,
    IfName,
    Name,
    RunEnvName,
    StrictModel,
    rate_problem,
)


def _reject_duplicates(names: list[str], what: str) -> None:
    """Refuse a name given twice, naming both entries (one pass: a Slurm allocation's testbed
    may hold 100,000 nodes)."""
    first: dict[str, int] = {}
    for index, name in enumerate(names):
        earlier = first.setdefault(name, index)
        if earlier != index:
            raise ValueError(f"{what} name '{name}' appears twice (entries {earlier} and {index})")


class NicKind(str, Enum):
    """Link layer of a NIC: InfiniBand, RDMA over Converged Ethernet, or plain Ethernet."""

    IB = "ib"
    ROCE = "roce"
    ETH = "eth"


class NicShaping(StrictModel):
    """An egress rate limit the testbed keeps on a NIC port with `mlnx_qos` (ETS per traffic
    class), so that equal NICs really are equal and the NICs bound the collectives (R-2CCL's
    CloudLab r7525 testbed: every port at 10 Gb/s). A setup step of the testbed: doctor checks
    it, r2bench never changes it."""

    gbps: StrictInt = Field(ge=1, le=800, description="The limit, in Gb/s.")
    interface: IfName = Field(
        description="The port mlnx_qos names (-i): the host netdev, or a BlueField port (p0)."
    )
    on: Name | None = Field(
        None, description="The host that holds the limit (default: the node; or its SmartNIC)."
    )
    traffic_classes: list[Annotated[int, Field(ge=0, le=7)]] = Field(
        default_factory=lambda: [0],
        min_length=1,
        description="Traffic classes limited (RoCE traffic's class must be one of them).",
    )


class Nic(StrictModel):
    """One network interface of a node."""

    name: Name = Field(description="How experiments refer to this NIC, e.g. mlx5_1 or nic1.")
    kind: NicKind = Field(NicKind.IB, description="ib, roce or eth.")
    rdma_device: Name | None = Field(None, description="RDMA device (mlx5_1); needed for ib.")
    port: StrictInt = Field(1, ge=1, le=255, description="Port number on the RDMA device.")
    netdev: IfName | None = Field(None, description="Kernel interface name (ib1, ens1f0, eth1).")
    address: HostAddress | None = Field(None, description="IP address on this NIC, if any.")
    management: StrictBool = Field(
        False, description="The interface the controller and MPI bootstrap use: never faulted."
    )
    rate: str | None = Field(
        None,
        pattern=r"^[0-9]+(\.[0-9]+)?[kmgt]?(bit|bps)$",
        description="Bandwidth cap the testbed itself keeps on this NIC, both directions "
        "(virtual testbed: tbf root qdisc with handle f2b0:), e.g. 400mbit; unset: none.",
    )
    shaping: NicShaping | None = Field(
        None, description="mlnx_qos egress limit the testbed keeps on this port (doctor checks)."
    )

    @field_validator("rate")
    @classmethod
    def _rate_in_range(cls, rate: str | None) -> str | None:
        problem = rate_problem(rate) if rate is not None else None
        if problem:
            raise ValueError(problem)
        return rate

    @model_validator(mode="after")
    def _needs_identity(self) -> Nic:
        if self.kind is NicKind.IB and self.rdma_device is None:
            raise ValueError("an ib NIC needs rdma_device (e.g. mlx5_0)")
        if self.kind is not NicKind.IB and self.netdev is None:
            raise ValueError(f"a {self.kind.value} NIC needs netdev (the kernel interface name)")
        return self


class SshOptions(StrictModel):
    """How the controller reaches a node over ssh (unset fields fall back to ~/.ssh/config)."""

    user: Name | None = None
    port: StrictInt = Field(22, ge=1, le=65535)
    key: FreeText | None = Field(None, description="Private key file.")
    jump_host: FreeText | None = Field(None, description="user@host[:port] of a bastion.")
    config_file: FreeText | None = Field(None, description="An ssh_config file to honor.")
    known_hosts: FreeText | None = Field(None, description="known_hosts file to verify against.")
    strict_host_key_checking: StrictBool = Field(
        True, description="Verify host keys. Turn off only for throwaway testbeds."
    )


class NodeRole(str, Enum):
    """What a host of the testbed is for."""

    COMPUTE = "compute"
    """Runs ranks (one per GPU, or one on a CPU-only node)."""
    SMARTNIC = "smartnic"
    """A NIC's own system (a BlueField's Arm side): runs the fault injectors of the NICs it
    carries, never a rank."""


class Node(StrictModel):
    """One machine of the testbed."""

    name: Name
    address: HostAddress = Field(description="Hostname or IP the controller connects to.")
    ssh: SshOptions = SshOptions()
    sudo: StrictBool = Field(True, description="Prefix root-only commands with `sudo -n`.")
    gpus: StrictInt = Field(0, ge=0, le=64, description="GPUs on this node.")
    gpu_arch: str | None = Field(
        None, pattern=r"^[0-9]{2,3}a?$", description="CUDA compute capability, e.g. 90 for H100."
    )
    nics: list[Nic] = Field(default_factory=list)
    env: dict[RunEnvName, FreeText] = Field(
        default_factory=dict,
        description="Variables for this node's ranks only (the launcher sets them per node), e.g. "
        "NCCL_HOSTID and CUDA_VISIBLE_DEVICES where namespace nodes share one host's GPUs.",
    )
    gpus_shared: StrictBool = Field(
        False,
        description="This node's GPUs are also another node's (namespace nodes on one GPU host): "
        "NCCL sees separate hosts, so only the network path is measured between them.",
    )
    role: NodeRole = Field(
        NodeRole.COMPUTE,
        description="compute: runs ranks; smartnic: a BlueField's Arm side, which runs the faults "
        "of the NICs it carries and never a rank.",
    )
    host_of: Name | None = Field(
        None, description="smartnic: the compute node whose NICs it carries."
    )
    carries: list[Name] = Field(
        default_factory=list,
        description="smartnic: the NICs of `host_of` that are its ports (e.g. mlx5_2, mlx5_3).",
    )

    @model_validator(mode="after")
    def _role_fits(self) -> Node:
        if self.role is NodeRole.SMARTNIC:
            if self.host_of is None:
                raise ValueError("a smartnic needs host_of: the compute node whose NICs it carries")
            if self.gpus:
                raise ValueError(f"a smartnic runs no rank: gpus must be 0 (found {self.gpus})")
        elif self.host_of is not None or self.carries:
            raise ValueError("host_of and carries belong to a smartnic (set role: smartnic)")
        return self

    @property
    def runs_ranks(self) -> bool:
        """Whether ranks run here (compute nodes only)."""
        return self.role is NodeRole.COMPUTE

    @field_validator("nics")
    @classmethod
    def _unique_nics(cls, nics: list[Nic]) -> list[Nic]:
        _reject_duplicates([nic.name for nic in nics], "NIC")
        return nics

    def nic(self, name: str) -> Nic | None:
        """The NIC called `name`, or None."""
        return next((nic for nic in self.nics if nic.name == name), None)

    @property
    def data_nics(self) -> list[Nic]:
        """NICs that carry collective traffic (every NIC but the management one)."""
        return [nic for nic in self.nics if not nic.management]


class LauncherKind(str, Enum):
    """How jobs start: Open MPI/HPC-X mpirun, Slurm srun, or one local process."""

    MPIRUN = "mpirun"
    SRUN = "srun"
    LOCAL = "local"


class Launcher(StrictModel):
    """Launcher settings shared by every run on this testbed."""

    kind: LauncherKind = LauncherKind.MPIRUN
    command: FreeText | None = Field(None, description="Path of mpirun/srun (default: on PATH).")
    args: list[FreeText] = Field(default_factory=list, description="Extra launcher arguments.")
    mca: dict[Name, FreeText] = Field(default_factory=dict, description="Open MPI --mca settings.")
    bootstrap_interface: IfName | None = Field(
        None, description="Interface for MPI's own traffic (btl_tcp_if_include/oob_tcp_if_include)."
    )
    allow_run_as_root: StrictBool = Field(False, description="Pass --allow-run-as-root to mpirun.")
    bind_to: Name = Field("none", description="mpirun --bind-to value.")


class Paths(StrictModel):
    """Where things live on the nodes (relative paths are relative to the login directory)."""

    work_dir: FreeText = Field(".r2bench", description="Builds, injectors and run files.")
    cuda_home: FreeText | None = Field(None, description="CUDA toolkit (default: detected).")
    mpi_home: FreeText | None = Field(None, description="MPI installation (default: detected).")
    nccl_home: FreeText | None = Field(
        None, description="NCCL already installed on the nodes (for the `system` library)."
    )
    python: FreeText = Field("python3", description="Python on the nodes (emulated workload).")


class TestbedSetup(StrictModel):
    """What the testbed itself keeps in place before any run: done once by its owner (R-2CCL's
    authors: their setup scripts), checked by doctor, never changed by r2bench. NIC rate limits
    are per NIC (`nics[].shaping`)."""

    topology_file: FreeText | None = Field(
        None,
        description="NCCL topology XML every compute node holds (give the same path to "
        "NCCL_TOPO_FILE), e.g. ~/topo.xml; doctor checks it is there and names each data NIC.",
    )


class TestbedKind(str, Enum):
    """ssh: real machines; local: this machine; virtual: network namespaces made by r2bench."""

    SSH = "ssh"
    LOCAL = "local"
    VIRTUAL = "virtual"


class Testbed(StrictModel):
    """A set of nodes plus how to reach and launch on them."""

    __test__ = False  # not a pytest test class despite the name

    name: Name
    kind: TestbedKind = TestbedKind.SSH
    description: FreeText = ""
    nodes: list[Node] = Field(min_length=1)
    launcher: Launcher = Launcher()
    paths: Paths = Paths()
    setup: TestbedSetup = Field(
        TestbedSetup(), description="What the testbed keeps in place (doctor checks it)."
    )
    features: dict[Name, bool] = Field(
        default_factory=dict,
        description="Kernel features found on the host (virtual testbeds): veth, tbf, nftables...",
    )
    state_dir: FreeText | None = Field(None, description="Where a virtual testbed keeps its state.")

    @field_validator("nodes")
    @classmethod
    def _unique_nodes(cls, nodes: list[Node]) -> list[Node]:
        _reject_duplicates([node.name for node in nodes], "node")
        if not any(node.runs_ranks for node in nodes):
            raise ValueError("no compute node: at least one node must run ranks (role: compute)")
        by_name = {node.name: node for node in nodes}
        for node in nodes:
            for nic in node.nics:
                holder = by_name.get(nic.shaping.on) if nic.shaping and nic.shaping.on else None
                if (
                    nic.shaping
                    and nic.shaping.on
                    and nic.shaping.on != node.name
                    and (holder is None or holder.host_of != node.name)
                ):
                    raise ValueError(
                        f"node '{node.name}' NIC '{nic.name}': shaping.on '{nic.shaping.on}' is "
                        "neither the node nor a smartnic with host_of: " + node.name
                    )
            if node.host_of is None:
                continue
            host = by_name.get(node.host_of)
            if host is None or not host.runs_ranks:
                raise ValueError(
                    f"smartnic '{node.name}': host_of '{node.host_of}' is not a compute node "
                    "of this testbed"
                )
            missing = [nic for nic in node.carries if host.nic(nic) is None]
            if missing:
                raise ValueError(
                    f"smartnic '{node.name}' carries {', '.join(missing)}, which node "
                    f"'{host.name}' does not have (its NICs: "
                    f"{', '.join(n.name for n in host.nics) or 'none'})"
                )
        return nodes

    def node(self, name: str) -> Node | None:
        """The node called `name`, or None."""
        return next((node for node in self.nodes if node.name == name), None)

    @property
    def compute_nodes(self) -> list[Node]:
        """The nodes that run ranks (every node but the SmartNICs)."""
        return [node for node in self.nodes if node.runs_ranks]

    def smartnic_of(self, node: str, nic: str) -> Node | None:
        """The SmartNIC that carries `nic` of `node`, or None."""
        return next(
            (n for n in self.nodes if n.host_of == node and nic in n.carries),
            None,
        )
