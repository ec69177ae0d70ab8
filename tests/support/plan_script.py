"""What the tiers of test_plan_script.py share (tests/unit, tests/integration, tests/system)."""

from __future__ import annotations

import pytest

from r2bench.plan.build import load_inputs, make_plan
from r2bench.plan.model import Plan
from tests.support import paths

ROOT = paths.REPO
EXPERIMENT = ROOT / "experiments" / "quickstart.yaml"
TESTBED = ROOT / "experiments" / "testbeds" / "virtual-example.yaml"


@pytest.fixture(scope="module")
def plan() -> Plan:
    return make_plan(load_inputs(EXPERIMENT, TESTBED))
