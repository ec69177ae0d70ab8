"""Entry points that read config files from disk."""

from __future__ import annotations

from pathlib import Path

from r2bench.config.source import load_yaml
from r2bench.config.testbed import Testbed
from r2bench.config.validate import validate_model


def load_testbed(path: Path) -> Testbed:
    """Read and validate a testbed file; raises ConfigError with located issues."""
    return validate_model(Testbed, load_yaml(path))
