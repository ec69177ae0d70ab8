"""`r2bench doctor --discover`: merge rules (pure), a LocalNode, and the virtual testbed.

This module holds those on a virtual testbed (root); the same subject's other tests:
tests/unit/test_discover.py (its pure tests), tests/integration/test_discover.py (those with
real processes).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from r2bench.cli import app
from r2bench.config.load import load_testbed
from r2bench.testbeds.virtual.lifecycle import UpResult


@pytest.fixture(scope="module")
def virtual_testbed(virtual_testbed: UpResult) -> Path:
    """The shared testbed (conftest.py), as its file."""
    return virtual_testbed.testbed_yaml


@pytest.mark.root
@pytest.mark.needs_mpirun
def test_virtual_testbed_discovery_is_a_fixed_point(virtual_testbed: Path, tmp_path: Path) -> None:
    """The virtual testbed's file is already complete: discovery confirms it, changes nothing
    but dropping the management mark finds it again from the default route."""
    copy = tmp_path / "testbed.yaml"
    copy.write_text(virtual_testbed.read_text())
    result = CliRunner().invoke(app, ["doctor", "--discover", "-t", str(copy)])
    assert result.exit_code == 0, result.output
    assert "nothing to change" in result.stdout
    before = load_testbed(copy)
    assert before == load_testbed(virtual_testbed)
