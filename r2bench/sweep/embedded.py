"""The embedded default testbed: with no `-t`, a sweep runs on a virtual testbed of its own.

By default two nodes (network namespaces on this host) with four data NICs each, every NIC
capped by tbf so the NICs, not the CPU, are the bottleneck: losing one NIC then visibly costs
bandwidth. An experiment's `virtual_testbed` section changes the shape (nodes, NICs, rate, GPUs
shared from this host, CUDA/MPI/NCCL homes).
The embedded testbed is held by one sweep at a time, host-wide (`r2bench.testbeds.virtual.hold`): a
second sweep waits for it (`--wait-testbed`) or refuses, naming the holder, and never adopts a
testbed another live process holds. One that is up and held by no live process (kept with
`--keep-testbed`, or brought up by `testbed up`) is used as it is and left up; one the sweep
brought up is taken down at the end (unless asked to keep it), then let go.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from r2bench.config.experiment import VirtualTestbedSpec
from r2bench.errors import EnvironmentFailure
from r2bench.safeio import atomic_write
from r2bench.testbeds.virtual.describe import build_testbed, to_yaml
from r2bench.testbeds.virtual.hold import TestbedHold
from r2bench.testbeds.virtual.layout import VirtualSpec, default_state_dir, plan_testbed
from r2bench.testbeds.virtual.lifecycle import up
from r2bench.testbeds.virtual.statedir import Manifest, StatePaths
from r2bench.testbeds.virtual.teardown import TestbedError, teardown

EMBEDDED_NAME = "r2bench"


class EmbeddedTestbedError(EnvironmentFailure, RuntimeError):
    """The embedded testbed cannot be brought up here; the message says what to do."""


@dataclass(frozen=True)
class HoldRequest:
    """Who asks for the embedded testbed, and how long they wait for another sweep's."""

    results: str
    """The asking sweep's results folder (the hold file names it to whoever finds it held)."""
    wait_s: float = 0.0
    notify: Callable[[str], None] = print
    stop: threading.Event | None = None
    """Set (Ctrl-C) to stop waiting."""


@dataclass(frozen=True)
class EmbeddedTestbed:
    """A virtual testbed the sweep uses and holds; `created` when this sweep brought it up."""

    name: str
    state: Path
    testbed_file: Path
    created: bool
    hold: TestbedHold

    def take_down(self) -> None:
        """Remove the testbed (only call when `created`)."""
        teardown(self.name, self.state, lambda _: None)

    def release(self) -> None:
        """Let another sweep have the testbed (after taking it down, or leaving it up)."""
        self.hold.release()


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
    """The embedded testbed's name: the experiment's, else `name`; a GPU one has its own, so
    the CPU one may stay up beside it."""
    if wanted.name is not None:
        return wanted.name
    return f"{name}gpu" if wanted.gpus else name


def embedded_description(folder: Path, wanted: VirtualTestbedSpec | None = None) -> Path:
    """The testbed file the embedded testbed would have, written into `folder` without
    bringing anything up (for `--dry-run`; a GPU layout is shown as if the host had them)."""
    wanted = wanted or VirtualTestbedSpec()
    spec = virtual_spec(wanted, embedded_name(wanted))
    path = folder / "embedded-testbed.yaml"
    host_gpus = spec.gpus
    text = to_yaml(build_testbed(plan_testbed(spec), {}, host_gpus=host_gpus))
    atomic_write(path, text, durable=False)  # a refused write names the file (a full /tmp)
    return path


def embedded_testbed(
    wanted: VirtualTestbedSpec | None = None,
    request: HoldRequest | None = None,
    name: str = EMBEDDED_NAME,
) -> EmbeddedTestbed:
    """Hold the embedded testbed (waiting or refusing while another live sweep holds it), then
    use it if it is up, else bring it up (root needed) as the experiment's `virtual_testbed`
    section says. The caller releases the hold (`EmbeddedTestbed.release`)."""
    wanted = wanted or VirtualTestbedSpec()
    request = request or HoldRequest(results="")
    if os.geteuid() != 0:
        raise EmbeddedTestbedError(
            "with no --testbed, the sweep runs on a virtual testbed of network namespaces, "
            "which needs root: run it as root (e.g. `sudo r2bench sweep ...`), or give your "
            "own testbed with -t TESTBED.yaml"
        )
    spec = virtual_spec(wanted, embedded_name(wanted, name))
    hold = TestbedHold(spec.name, spec.state, request.results)
    hold.acquire(request.wait_s, request.notify, request.stop)
    try:
        return _use_or_bring_up(spec, hold)
    except BaseException:
        hold.release()
        raise


def _use_or_bring_up(spec: VirtualSpec, hold: TestbedHold) -> EmbeddedTestbed:
    state = spec.state
    paths = StatePaths(state)
    if Manifest.load(state) is not None and paths.testbed_yaml.is_file():
        return EmbeddedTestbed(spec.name, state, paths.testbed_yaml, created=False, hold=hold)
    try:
        result = up(spec)
    except TestbedError as exc:
        hint = (
            " (install what is missing with `bash scripts/install-deps.sh` as root)"
            if "missing" in str(exc)
            else ""
        )
        raise EmbeddedTestbedError(f"cannot bring up the virtual testbed: {exc}{hint}") from exc
    return EmbeddedTestbed(spec.name, state, result.testbed_yaml, created=True, hold=hold)
