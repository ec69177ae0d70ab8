"""What the tiers of test_example_testbeds.py share (tests/unit, tests/integration, tests/system)."""

from __future__ import annotations

import pytest

from r2bench.config.load import load_testbed
from r2bench.config.testbed import Testbed
from r2bench.testbeds.discover import merge_testbed, parse_discovery
from tests.integration.test_discover import run_script
from tests.support import fake_sysfs, paths

ROOT = paths.REPO
EXAMPLE = ROOT / "experiments" / "testbeds" / "dgx-h100-2node.yaml"


@pytest.fixture(scope="module")
def discovered(tmp_path_factory: pytest.TempPathFactory) -> Testbed:
    """The example after `doctor --discover` on two real DGX H100 hosts."""
    found = parse_discovery(
        run_script(fake_sysfs.build(tmp_path_factory.mktemp("dgx"), fake_sysfs.dgx_h100()))
    )
    testbed = load_testbed(EXAMPLE)
    return merge_testbed(testbed, {node.name: found for node in testbed.nodes})
