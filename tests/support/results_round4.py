"""What the tiers of test_results_round4.py share (tests/unit, tests/integration, tests/system)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.support import paths
from tests.support.cli_runner import Ran, invoke_as_main
from tests.support.sample_sweep import SampleConfig, write_sample_sweep

CAPTURED = paths.DATA / "nccl-tests"


def invoke(*args: str) -> Ran:
    return invoke_as_main(*args, env={"COLUMNS": "250"})


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("good")
    cfg = SampleConfig(sweep="s", seed=1, modes=(None, "1"), scenarios=("none",), repeats=2)
    write_sample_sweep(root, CAPTURED, cfg)
    return root / "s"


def copy(good: Path, to: Path) -> Path:
    shutil.copytree(good, to, symlinks=True)
    return to
