"""One sample sweep for the tests that only read it, built once per session (per xdist worker).

`small_sweep`: stock NCCL and R2CC mode 1, no fault, two repeats (tests/support/sample_sweep.py
writes it from the captures in tests/data/nccl-tests). `quickstart_report`: the captured
quickstart sweep (tests/support/quickstart_capture.py) with its tables and report built. A test
that changes a sweep works on its own copy (`copy_sweep`), so the shared one stays as it was.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from r2bench.tables.build import Tables
from tests.support import paths
from tests.support.quickstart_capture import copy_quickstart
from tests.support.sample_sweep import SampleConfig, write_sample_sweep

SMALL = SampleConfig(sweep="s", seed=1, modes=(None, "1"), scenarios=("none",), repeats=2)


@pytest.fixture(scope="session")
def small_sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder of the shared small sweep (read-only: copy it to change it)."""
    root = tmp_path_factory.mktemp("small-sweep")
    write_sample_sweep(root, paths.DATA / "nccl-tests", SMALL)
    return root / SMALL.sweep


@pytest.fixture(scope="session")
def quickstart_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Tables, str]:
    """The captured quickstart sweep, its tables and its report's HTML (read-only)."""
    from r2bench.report.html import build_report
    from r2bench.tables.build import rebuild

    sweep = copy_quickstart(tmp_path_factory.mktemp("qs"))
    tables = rebuild(sweep)
    out = sweep / "report.html"
    build_report(sweep, tables, out)
    return sweep, tables, out.read_text()


def copy_sweep(sweep: Path, to: Path) -> Path:
    """A copy of SWEEP at TO (links kept as links) for a test to change."""
    shutil.copytree(sweep, to, symlinks=True)
    return to
