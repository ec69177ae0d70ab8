"""No command ends in a traceback on bad paths and folders: one line, exit 2."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from captures import DATA

ROOT = Path(__file__).resolve().parents[1]


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="200")
    code = "from r2bench.cli import main; main()"
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=120,
    )


def _corpus(tmp: Path) -> list[tuple[str, ...]]:
    empty = tmp / "empty-sweep"
    empty.mkdir()
    afile = tmp / "a-file.txt"
    afile.write_text("x\n")
    logs = str(DATA / "v2.18.5")
    return [
        ("parse", "/nonexistent/x.txt"),
        ("parse", str(tmp)),
        ("import", "/nonexistent"),
        ("import", str(afile)),
        ("import", logs, "--sweep", "a/b", "--results", str(tmp / "r")),
        ("import", logs, "--results", "/proc/nope"),
        ("import", logs, "--results", str(afile)),
        ("report", "/nonexistent"),
        ("report", str(empty)),
        ("report", str(afile)),
        ("report", str(empty), "--format", "gif"),
        ("schema", "--out", "/proc/x"),
        ("schema", "--out", str(afile)),
        ("plan", "/nonexistent.yaml", "-t", "/nonexistent.yaml"),
        ("doctor", "-t", "/nonexistent.yaml"),
        ("setup", "/nonexistent.yaml", "-t", "/nonexistent.yaml"),
        # No -t: the experiment is checked before the embedded testbed is brought up.
        ("sweep", "/nonexistent.yaml"),
        ("sweep", str(afile)),
        ("sweep", "/nonexistent.yaml", "-t", "/nonexistent.yaml"),
        ("heal", "-t", "/nonexistent.yaml"),
        ("inject", "link_down", "node1", "nic1", "-t", "/nonexistent.yaml"),
        ("revert", "link_down", "node1", "nic1", "-t", "/nonexistent.yaml"),
        ("compare", "/nonexistent", str(empty)),
        ("compare", str(empty), str(empty)),
        ("compare", str(afile), "--write-reference", str(tmp / "ref.yaml")),
        ("figures", "/nonexistent"),
        ("figures", str(empty)),
        ("cloudlab", "testbed", "/nonexistent.xml"),
        ("cloudlab", "testbed", str(afile)),
        ("testbed", "from-slurm", "-o", str(tmp / "tb.yaml")),
    ]


def test_no_traceback_on_bad_paths(tmp_path: Path) -> None:
    for args in _corpus(tmp_path):
        proc = _run(*args, cwd=tmp_path)
        both = proc.stdout + proc.stderr
        assert "Traceback" not in both, (args, both)
        assert proc.returncode == 2, (args, proc.returncode, both)
        assert both.strip(), args


def test_results_folder_that_cannot_be_written_is_named(tmp_path: Path) -> None:
    proc = _run("import", str(DATA / "v2.18.5"), "--results", "/proc/nope", cwd=tmp_path)
    assert proc.returncode == 2
    assert "cannot write the results folder /proc/nope" in proc.stderr
    assert "skipped" not in proc.stderr  # the inputs are not blamed


def test_debug_shows_the_traceback(tmp_path: Path) -> None:
    proc = _run("--debug", "schema", "--out", "/proc/x", cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" in proc.stderr


@pytest.mark.parametrize("flag", ["--version"])
def test_version_flag(flag: str, tmp_path: Path) -> None:
    proc = _run(flag, cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout.startswith("r2bench ")
