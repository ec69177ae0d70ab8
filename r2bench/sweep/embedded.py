"""The embedded default testbed: with no `-t`, a sweep runs on a virtual testbed of its own.

By default two nodes (network namespaces on this host) with four data NICs each, every NIC
capped by tbf so the NICs, not the CPU, are the bottleneck: losing one NIC then visibly costs
bandwidth. An experiment's `virtual_testbed` section changes the shape (nodes, NICs, rate, GPUs
shared from this host, CUDA/MPI/NCCL homes).
An embedded testbed that is already up is used as it is; one the sweep brought up is taken
down at the end (unless asked to keep it).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from r2bench.config.experiment import VirtualTestbedSpec
from r2bench.errors import EnvironmentFailure
from r2bench.virtual.describe import build_testbed, to_yaml
from r2bench.virtual.lifecycle import up
from r2bench.virtual.plan import VirtualSpec, default_state_dir, plan_testbed
from r2bench.virtual.state import Manifest, StatePaths
from r2bench.virtual.teardown import TestbedError, teardown

EMBEDDED_NAME = "r2bench"


class EmbeddedTestbedError(EnvironmentFailure, RuntimeError):
    """The embedded testbed cannot be brought up here; the message says what to do."""


@dataclass(frozen=True)
class EmbeddedTestbed:
    """A virtual testbed the sweep uses; `created` when this sweep brought it up."""

    name: str
    state: Path
    testbed_file: Path
    created: bool

    def take_down(self) -> None:
        """Remove the testbed (only call when `created`)."""
        teardown(self.name, self.state, lambda _: None)


def virtual_spec(wanted: VirtualTestbedSpec, name: str = EMBEDDED_NAME) -> VirtualSpec:
    """The VirtualSpec of an experiment's `virtual_testbed` section."""
    homes = tuple(
        (key, value)
        for key in ("cuda_home", "mpi_home", "nccl_home")
        if (value := getattr(wanted, key)) is not None
    )
    return VirtualSpec(
        name=name,
        nodes=wanted.nodes,
        nics=wanted.nics,
        rate=wanted.rate,
        state_dir=default_state_dir(name),
        gpus=wanted.gpus,
        homes=homes,
    )


def embedded_name(wanted: VirtualTestbedSpec, name: str = EMBEDDED_NAME) -> str:
    """The embedded testbed's name: a GPU one has its own, so the CPU one may stay up beside it."""
    return f"{name}gpu" if wanted.gpus else name


def embedded_description(folder: Path, wanted: VirtualTestbedSpec | None = None) -> Path:
    """The testbed file the embedded testbed would have, written into `folder` without
    bringing anything up (for `--dry-run`; a GPU layout is shown as if the host had them)."""
    wanted = wanted or VirtualTestbedSpec()
    spec = virtual_spec(wanted, embedded_name(wanted))
    path = folder / "embedded-testbed.yaml"
    host_gpus = spec.gpus
    path.write_text(to_yaml(build_testbed(plan_testbed(spec), {}, host_gpus=host_gpus)))
    return path


def embedded_testbed(
    wanted: VirtualTestbedSpec | None = None, name: str = EMBEDDED_NAME
) -> EmbeddedTestbed:
    """Use the embedded testbed if it is up, else bring it up (root needed) as the experiment's
    `virtual_testbed` section says."""
    wanted = wanted or VirtualTestbedSpec()
    spec = virtual_spec(wanted, embedded_name(wanted, name))
    state = spec.state
    paths = StatePaths(state)
    if Manifest.load(state) is not None and paths.testbed_yaml.is_file():
        return EmbeddedTestbed(name, state, paths.testbed_yaml, created=False)
    if os.geteuid() != 0:
        raise EmbeddedTestbedError(
            "with no --testbed, the sweep runs on a virtual testbed of network namespaces, "
            "which needs root: run it as root (e.g. `sudo r2bench sweep ...`), or give your "
            "own testbed with -t TESTBED.yaml"
        )
    try:
        result = up(spec)
    except TestbedError as exc:
        hint = (
            " (install what is missing with `bash scripts/install-deps.sh` as root)"
            if "missing" in str(exc)
            else ""
        )
        raise EmbeddedTestbedError(f"cannot bring up the virtual testbed: {exc}{hint}") from exc
    return EmbeddedTestbed(name, state, result.testbed_yaml, created=True)
