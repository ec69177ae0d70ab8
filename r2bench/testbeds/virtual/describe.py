"""The testbed YAML a virtual testbed is described by (pure: plan + features -> Testbed)."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

import yaml

from r2bench.config.testbed import (
    Launcher,
    LauncherKind,
    Nic,
    NicKind,
    Node,
    Paths,
    SshOptions,
    Testbed,
    TestbedKind,
)
from r2bench.testbeds.virtual.gpus import NodeGpus, assign_gpus
from r2bench.testbeds.virtual.layout import MGMT_IF, SHAPING_HANDLE, NodePlan, TestbedPlan
from r2bench.testbeds.virtual.statedir import StatePaths


def _nics(node: NodePlan, rate: str | None) -> list[Nic]:
    mgmt = Nic(
        name=MGMT_IF,
        kind=NicKind.ETH,
        netdev=MGMT_IF,
        address=node.mgmt_address,
        management=True,
    )
    data = [
        Nic(name=name, kind=NicKind.ETH, netdev=name, address=address, rate=rate)
        for name, address in zip(node.nic_names, node.nic_addresses, strict=True)
    ]
    return [mgmt, *data]


def _node(
    node: NodePlan, paths: StatePaths, rate: str | None, gpus: NodeGpus, arch: str | None
) -> Node:
    ssh = SshOptions(
        user="root",
        key=str(paths.client_key),
        config_file=str(paths.ssh_config),
        known_hosts=str(paths.known_hosts),
        strict_host_key_checking=True,
    )
    return Node(
        name=node.hostname,
        address=node.mgmt_address,
        ssh=ssh,
        sudo=False,
        gpus=len(gpus.devices),
        gpu_arch=arch if gpus.devices else None,
        gpus_shared=gpus.shared,
        env=gpus.env,
        nics=_nics(node, rate),
    )


def launcher(paths: StatePaths) -> Launcher:
    """mpirun across the nodes: ssh through the testbed's ssh_config, MPI traffic on mgmt0."""
    return Launcher(
        kind=LauncherKind.MPIRUN,
        mca={
            "plm_rsh_agent": f"ssh -F {paths.ssh_config}",
            "btl_tcp_if_include": MGMT_IF,
            "oob_tcp_if_include": MGMT_IF,
        },
        bootstrap_interface=MGMT_IF,
        allow_run_as_root=True,
    )


def build_testbed(
    plan: TestbedPlan,
    features: Mapping[str, bool],
    python: str = sys.executable,
    host_gpus: int = 0,
    gpu_arch: str | None = None,
) -> Testbed:
    """The Testbed model of a planned virtual testbed (`host_gpus`: GPUs the host has)."""
    spec = plan.spec
    paths = StatePaths(spec.state)
    hostnames = [node.hostname for node in plan.nodes]
    layout = assign_gpus(spec.name, hostnames, spec.gpus, host_gpus)
    gpu_note = ""
    if spec.gpus:
        how = "shared by every node" if layout[0].shared else "its own"
        gpu_note = f", {spec.gpus} GPU(s) per node ({how}; NCCL_HOSTID per node)"
    return Testbed(
        name=spec.name,
        kind=TestbedKind.VIRTUAL,
        description=(
            f"virtual testbed: {spec.nodes} nodes x {spec.nics} data NICs in network namespaces"
            + (" (rail 0 through an nft bridge filter)" if spec.router else "")
            + (f", each data NIC capped at {spec.rate} (tbf {SHAPING_HANDLE})" if spec.rate else "")
            + gpu_note
        ),
        nodes=[
            _node(n, paths, spec.rate, g, gpu_arch) for n, g in zip(plan.nodes, layout, strict=True)
        ],
        launcher=launcher(paths),
        paths=Paths(work_dir=str(paths.work_dir), python=python, **dict(spec.homes)),
        features=dict(features),
        state_dir=str(spec.state),
    )


_FAST_DUMPER: Any = getattr(yaml, "CSafeDumper", None)
"""libyaml's emitter where PyYAML has it (the same representer and resolver decide the
quoting): PyYAML's own took 40 s to write a 100,000-node testbed from Slurm."""


def to_yaml(testbed: Testbed) -> str:
    """YAML text of `testbed` (defaults left out). Text libyaml cannot write (a surrogate
    from an environment that was not UTF-8) is written by PyYAML's own emitter, as escapes."""
    data = testbed.model_dump(mode="json", exclude_defaults=True)
    if _FAST_DUMPER is not None:
        try:
            return yaml.dump(data, Dumper=_FAST_DUMPER, sort_keys=False)
        except (UnicodeError, yaml.YAMLError):
            pass
    return yaml.safe_dump(data, sort_keys=False)
