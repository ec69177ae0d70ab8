"""What every test shares: the tiers, the markers and one virtual testbed per module.

Tiers, one folder each; a test's folder sets its marker (`pytest -m unit` = `pytest tests/unit`):
- `unit/`: pure, in this process: no root, no process started, no sshd, no namespaces, no
  mpirun. The coverage tier: `pytest tests/unit` answers in under a minute on 2 cores.
- `integration/`: real processes on this host: sshd on loopback, mpirun, local nodes, the CLI in
  a subprocess, a headless browser; and pure tests that take seconds (a sample sweep through
  tables, report and compare; property-based campaigns), which would hold the unit tier up.
- `system/`: network namespaces, virtual testbeds, sweeps; marked `root` too. Its tests run one at
  a time (`scripts/test.sh`): every virtual testbed takes the management subnet 198.18.0.0/24, so
  only one can be up per host.
`support/` holds the helpers the tiers share (`tests.support.*`) and `data/` what they read.

A unit test that asks for a fixture of a higher tier (a testbed, sshd) or is marked `root` fails
the collection, with the folder to move it to; one that starts a process fails too
(tests/unit/conftest.py).

Requirement markers skip a test where the machine lacks what it needs (the reason says what):
`root`, `needs_mpirun`, `needs_mpi4py`; `slow` marks a test that takes more than a few seconds.
A module marks all its tests with `pytestmark = [...]`.

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
from pathlib import Path

import pytest

from r2bench.testbeds.virtual.layout import VirtualSpec, default_state_dir
from r2bench.testbeds.virtual.lifecycle import UpResult, up
from r2bench.testbeds.virtual.teardown import TestbedError, teardown
from tests.support.paths import TESTS

# Fixtures that tests of more than one tier ask for, by name.
pytest_plugins = [
    "tests.support.example_testbeds",
    "tests.support.plan_script",
    "tests.support.sweeps",
    "tests.support.sweep_units",
]

TIERS = {
    "unit": "pure: no root, no process started, no testbed (tests/unit; under a minute)",
    "integration": "real processes on this host (sshd, mpirun, the CLI, a browser), and whole-pipeline"
    " runs or property campaigns that take seconds (tests/integration)",
    "system": "network namespaces, virtual testbeds, sweeps; needs root (tests/system)",
}
"""Tier (= folder under tests/) -> what its tests may use."""

HEAVY_FIXTURES = {
    "virtual_testbed": "system",
    "three_nodes": "system",
    "sshd": "integration",
}
"""Fixture -> the lowest tier that may ask for it (each starts real processes)."""

HOST_PROCESSES = "host_processes"
"""xdist group of the integration modules that start workload processes on this host or check
that none runs (doctor's stray-process check sees every process of the host): their tests run
on one worker, one after the other, so that one never sees another's workload."""
HOST_PROCESS_MODULES = {
    "test_cli_errors.py",
    "test_doctor.py",
    "test_exit_codes.py",
    "test_verify_workload.py",
    "test_workload.py",
}

REQUIREMENTS: dict[str, tuple[Callable[[], bool], str]] = {
    "root": (lambda: os.geteuid() == 0, "needs root: network namespaces and sshd"),
    "needs_mpirun": (lambda: shutil.which("mpirun") is not None, "mpirun missing (openmpi-bin)"),
    "needs_mpi4py": (lambda: importlib.util.find_spec("mpi4py") is not None, "mpi4py missing"),
}
"""Marker -> (whether this machine has it, the skip reason where it does not)."""

MARKERS = {
    **TIERS,
    "root": "needs root (network namespaces, sshd); skipped otherwise",
    "slow": "takes more than a few seconds",
    "needs_mpirun": "needs Open MPI's mpirun on PATH; skipped otherwise",
    "needs_mpi4py": "needs mpi4py; skipped otherwise",
    "virtual_optional": "skip, not fail, where the virtual testbed is refused up front",
    "xdist_group": "pytest-xdist: tests of one group run on one worker (--dist loadgroup)",
}


def pytest_configure(config: pytest.Config) -> None:
    """Register the markers (one place for all of them)."""
    for name, description in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {description}")


def tier_of(path: Path) -> str | None:
    """The tier of a test file: the folder under tests/ it lies in (None: outside the tiers)."""
    try:
        parts = path.resolve().relative_to(TESTS).parts
    except ValueError:
        return None
    return parts[0] if len(parts) > 1 and parts[0] in TIERS else None


def misplaced(item: pytest.Item, tier: str | None) -> str | None:
    """Why ITEM does not belong in TIER's folder, with where it goes; None where it does."""
    if tier is None:
        return f"lies outside the tiers: move it to tests/{'|'.join(TIERS)}/ (tests/conftest.py)"
    if tier != "unit":
        return None
    for fixture in getattr(item, "fixturenames", ()):
        if fixture in HEAVY_FIXTURES:
            where = HEAVY_FIXTURES[fixture]
            return f"is a unit test but asks for `{fixture}` (real processes): move it to tests/{where}/"
    if item.get_closest_marker("root") is not None:
        return "is a unit test but is marked `root`: move it to tests/system/"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark each test with its folder's tier (system tests `root` too); refuse a test in the
    wrong folder, naming each one and where it goes."""
    problems = []
    for item in items:
        tier = tier_of(item.path)
        problem = misplaced(item, tier)
        if problem is not None:
            problems.append(f"{item.nodeid} {problem}")
            continue
        assert tier is not None  # misplaced() said where a test outside the tiers goes
        item.add_marker(tier)
        if tier == "system":
            item.add_marker("root")
        if tier == "integration" and item.path.name in HOST_PROCESS_MODULES:
            item.add_marker(pytest.mark.xdist_group(HOST_PROCESSES))
    if problems:
        raise pytest.UsageError("tests in the wrong tier:\n  " + "\n  ".join(problems))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Skip a test whose requirement markers this machine does not meet, before any fixture
    (a virtual testbed needs root) is set up."""
    for name, (met, reason) in REQUIREMENTS.items():
        if item.get_closest_marker(name) is not None and not met():
            pytest.skip(reason)


@pytest.fixture(scope="module")
def three_nodes() -> Iterator[UpResult]:
    """A 3-node virtual testbed, 4 NICs a node at 250 Mbit/s: a training job of 3 ranks (the
    order of a sum matters from 3 on), one NIC of one node to cut."""
    name = f"t{uuid.uuid4().hex[:7]}"
    state = default_state_dir(name)
    try:
        yield up(VirtualSpec(name=name, nodes=3, nics=4, rate="250mbit", state_dir=state))
    finally:
        teardown(name, state, lambda _: None)


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
