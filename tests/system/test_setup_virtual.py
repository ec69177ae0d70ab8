"""`r2bench setup` on a real virtual testbed (network namespaces, sshd per node): the quickstart's
emulated workload (a local source: r2bench itself) is copied over ssh, and a second setup is a
quick no-op. Needs root; the testbed is torn down whatever happens.

The virtual nodes share the host's filesystem, so they share one work folder: setup finds that
out (same work-folder id on both nodes), copies once, and the second node checks the same stamp.
"""

from __future__ import annotations

import io
import time
from pathlib import Path

import pytest
from rich.console import Console

from r2bench.commands.setup import setup_command
from r2bench.config.load import load_testbed
from r2bench.setup import cache
from r2bench.testbeds.virtual.lifecycle import UpResult
from tests.support import paths

pytestmark = [pytest.mark.root, pytest.mark.virtual_optional]

QUICKSTART = paths.REPO / "experiments" / "quickstart.yaml"
NOOP_LIMIT_S = 3.0


@pytest.fixture(scope="module")
def testbed_file(virtual_testbed: UpResult) -> Path:
    return virtual_testbed.testbed_yaml


def _setup(testbed: Path, logs: Path) -> tuple[int, str, float]:
    out = io.StringIO()
    started = time.monotonic()
    code = setup_command(
        QUICKSTART, testbed, False, None, log_dir=logs, console=Console(file=out, width=300)
    )
    return code, out.getvalue(), time.monotonic() - started


def test_quickstart_setup_then_noop(testbed_file: Path, tmp_path: Path) -> None:
    code, out, _ = _setup(testbed_file, tmp_path)
    assert code == 0, out
    lines = [line for line in out.splitlines() if line.startswith(("node0:", "node1:"))]
    # One line per node and emulated library (stock NCCL's and R-2CCL's copies of the emulator).
    assert len(lines) == 4, out
    assert any("emulated built in" in line for line in lines), out
    work = Path(load_testbed(testbed_file).paths.work_dir)
    stamp = cache.read_stamp(
        (work / "src" / "emulated-local+emulated-lib-local" / cache.STAMP_NAME).read_text()
    )
    assert stamp is not None and stamp.fields["source"].startswith("tree:")
    assert (work / "src" / "emulated-local+emulated-lib-local" / "r2bench" / "workloads").is_dir()
    other = next(line for line in lines if "built in" not in line)
    assert "up to date" in other and "same work folder" in other

    code, out, seconds = _setup(testbed_file, tmp_path)
    assert code == 0, out
    assert f"node0: emulated up to date (key {stamp.key}" in out
    assert f"node1: emulated up to date (key {stamp.key}" in out
    assert seconds <= NOOP_LIMIT_S, f"no-op setup took {seconds:.2f} s"
