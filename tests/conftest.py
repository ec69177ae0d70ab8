"""What several test files share: the markers and one virtual testbed per module.

Markers: `slow`, and requirement markers that skip a test where the machine lacks what it
needs (the reason says what): `root`, `needs_mpirun`, `needs_mpi4py`. A module marks all its
tests with `pytestmark = [...]`.

`virtual_testbed`: a virtual testbed (the default shape: 2 nodes x 2 NICs) brought up before
the first test of a module that asks for it and torn down after its last, whatever happened.
Where `up` refuses up front (exit code 2: a missing tool), a module marked `virtual_optional`
is skipped; any other module fails, so that a refusal never hides a regression.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import uuid
from collections.abc import Callable, Iterator

import pytest

from r2bench.testbeds.virtual.layout import VirtualSpec, default_state_dir
from r2bench.testbeds.virtual.lifecycle import UpResult, up
from r2bench.testbeds.virtual.teardown import TestbedError, teardown

REQUIREMENTS: dict[str, tuple[Callable[[], bool], str]] = {
    "root": (lambda: os.geteuid() == 0, "needs root: network namespaces and sshd"),
    "needs_mpirun": (lambda: shutil.which("mpirun") is not None, "mpirun missing (openmpi-bin)"),
    "needs_mpi4py": (lambda: importlib.util.find_spec("mpi4py") is not None, "mpi4py missing"),
}
"""Marker -> (whether this machine has it, the skip reason where it does not)."""

MARKERS = {
    "root": "needs root (network namespaces, sshd); skipped otherwise",
    "slow": "takes more than a few seconds",
    "needs_mpirun": "needs Open MPI's mpirun on PATH; skipped otherwise",
    "needs_mpi4py": "needs mpi4py; skipped otherwise",
    "virtual_optional": "skip, not fail, where the virtual testbed is refused up front",
}


def pytest_configure(config: pytest.Config) -> None:
    """Register the markers (one place for all of them)."""
    for name, description in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {description}")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Skip a test whose requirement markers this machine does not meet, before any fixture
    (a virtual testbed needs root) is set up."""
    for name, (met, reason) in REQUIREMENTS.items():
        if item.get_closest_marker(name) is not None and not met():
            pytest.skip(reason)


@pytest.fixture(scope="module")
def virtual_testbed(request: pytest.FixtureRequest) -> Iterator[UpResult]:
    """A virtual testbed for the module's tests (see the module docstring)."""
    name = f"t{uuid.uuid4().hex[:7]}"
    state = default_state_dir(name)
    try:
        try:
            result = up(VirtualSpec(name=name, state_dir=state))
        except TestbedError as exc:
            optional = request.node.get_closest_marker("virtual_optional") is not None
            if optional and exc.exit_code == 2:
                pytest.skip(f"virtual testbed unavailable here: {exc}")
            raise
        yield result
    finally:
        teardown(name, state, lambda _: None)
