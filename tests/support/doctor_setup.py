"""What the tiers of test_doctor_setup.py share (tests/unit, tests/integration, tests/system)."""

from __future__ import annotations

from r2bench.config.source import load_yaml
from r2bench.config.testbed import Testbed
from r2bench.config.validate import validate_model
from tests.support import paths

ROOT = paths.REPO
R7525 = ROOT / "experiments" / "testbeds" / "cloudlab-r7525.yaml"


def r7525_testbed() -> Testbed:
    return validate_model(Testbed, load_yaml(R7525))
