"""`r2bench cloudlab testbed`: manifests written from CloudLab's schema -> testbed files.

This module holds those with real processes; the same subject's other tests:
tests/unit/test_cloudlab_manifest.py (its pure tests).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from r2bench.config.load import load_testbed
from tests.support import paths

DATA = paths.DATA / "cloudlab"
ROOT = paths.REPO
# Real manifests as the portal returned them (tests/data/cloudlab/README.md names the sources).
REAL = ["real-emulab-2025-blockstore.xml", "real-utah-2024-m510.xml", "real-geni-2022-vms.xml"]
GOOD = ["two-nodes-one-lan.xml", "two-nodes-four-rails.xml", "one-node-no-lan.xml", *REAL]
BAD = {
    "truncated.xml": "not well-formed XML at line 25, column 3: no element found (truncated?)",
    "malformed.xml": "not well-formed XML at line 6, column 7: mismatched tag",
    "request.xml": "a request RSpec (what a profile prints: no sliver_id on any node)",
    "no-login.xml": "node node1 has no <services><login>",
    "empty.xml": "the manifest is empty",
    "not-rspec.xml": "the root element is <html>, not <rspec>",
    "bad-port.xml": "node node0: login port 'ssh' is not a port number",
}
NO_FAULT = """\
name: smoke
libraries: {r2ccl: {recipe: r2ccl, ref: f45cbcb}}
sizes: {begin: 8, end: 1M, factor: 4}
"""


def run(*args: str, stdin: str | None = None) -> tuple[int, str, str]:
    """`r2bench ARGS` through `main`, which reports errors: exit code, stdout, stderr."""
    code = 'import sys; sys.argv[0] = "r2bench"; from r2bench.cli import main; main()'
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="300")
    proc = subprocess.run(
        [sys.executable, "-c", code, *args],
        input=stdin or "",
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    return proc.returncode, proc.stdout, proc.stderr


@pytest.mark.parametrize("name", GOOD)
def test_written_file_loads_and_plans(name: str, tmp_path: Path) -> None:
    out = tmp_path / "testbed.yaml"
    code, _, err = run("cloudlab", "testbed", str(DATA / name), "-o", str(out))
    assert code == 0, err
    assert out.read_text().startswith("# Made by `r2bench cloudlab testbed`")
    assert len(load_testbed(out).nodes) >= 1
    experiment = tmp_path / "smoke.yaml"
    experiment.write_text(NO_FAULT)
    code, _, err = run("plan", str(experiment), "-t", str(out))
    assert code == 0, err


def test_stdin_to_stdout() -> None:
    code, out, _ = run("cloudlab", "testbed", "-", stdin=(DATA / GOOD[1]).read_text())
    assert code == 0
    assert "name: r2b-exp" in out and "rail3" in out


@pytest.mark.parametrize(("name", "message"), sorted(BAD.items()))
def test_bad_manifest_is_one_line_and_exit_2(name: str, message: str, tmp_path: Path) -> None:
    out = tmp_path / "testbed.yaml"
    code, stdout, err = run("cloudlab", "testbed", str(DATA / name), "-o", str(out))
    assert code == 2
    assert stdout == ""
    first, *rest = err.strip().splitlines()  # the error, then how to see its traceback
    assert first.startswith(f"r2bench: error: {DATA / name}: ") and message in first, err
    assert rest == ["(run again with --debug for the traceback)"], err
    assert not out.exists()


def test_missing_file_exit_2(tmp_path: Path) -> None:
    code, _, err = run("cloudlab", "testbed", str(tmp_path / "nope.xml"))
    assert code == 2 and "cannot read the manifest: No such file or directory" in err
