"""Which of the host's GPUs each namespace node uses (pure).

Namespace nodes live on one host, so they can only have the host's GPUs. With enough GPUs each
node gets its own (GPUs 0-3 to node1, 4-7 to node2, ...); otherwise every node shares the first
`per_node` GPUs. Either way each node's ranks get their own ``NCCL_HOSTID``: NCCL then treats the
nodes as separate hosts (no NVLink, P2P or SHM between them), so a collective between nodes
crosses the data NICs, the path that faults hit. Two ranks on one GPU run as two CUDA contexts
time-sharing it: fine for measuring the network path, not for GPU compute figures.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from r2bench.testbeds.virtual.layout import PlanError


@dataclass(frozen=True)
class NodeGpus:
    """One node's devices (host indices) and the variables its ranks get."""

    devices: tuple[int, ...]
    shared: bool
    env: dict[str, str]


def count_host_gpus(nvidia_smi_list: str) -> int:
    """Number of `GPU <n>: ...` lines in `nvidia-smi -L` output."""
    return len(re.findall(r"^GPU \d+:", nvidia_smi_list, re.MULTILINE))


def gpu_arch(compute_caps: str) -> str | None:
    """`90` from `nvidia-smi --query-gpu=compute_cap --format=csv,noheader` (`9.0` per GPU)."""
    first = next((line.strip() for line in compute_caps.splitlines() if line.strip()), "")
    match = re.fullmatch(r"(\d+)\.(\d+)", first)
    return f"{match[1]}{match[2]}" if match else None


def assign_gpus(
    testbed: str, hostnames: list[str], per_node: int, host_gpus: int
) -> list[NodeGpus]:
    """Devices and per-node variables for `per_node` GPUs on each of `hostnames`."""
    if per_node <= 0:
        return [NodeGpus((), False, {}) for _ in hostnames]
    if per_node > host_gpus:
        raise PlanError(
            f"--gpus {per_node}: this host has {host_gpus} GPU(s) (nvidia-smi -L); "
            f"ask for at most {host_gpus}"
        )
    shared = per_node * len(hostnames) > host_gpus
    layout = []
    for index, hostname in enumerate(hostnames):
        first = 0 if shared else index * per_node
        devices = tuple(range(first, first + per_node))
        env = {
            "NCCL_HOSTID": f"{testbed}-{hostname}",
            "CUDA_VISIBLE_DEVICES": ",".join(str(d) for d in devices),
        }
        layout.append(NodeGpus(devices, shared, env))
    return layout
