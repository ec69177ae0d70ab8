"""Every file r2bench writes goes through the atomic writer: a link at the path is replaced
(never written through, its target's mode never changed), a refused write leaves no half file,
and the refusal is one line naming the file and the system's words, exit 2.

The commands run as a user runs them (a subprocess, a file size limit where a write must fail);
the writer itself: tests/unit/test_safeio_writes.py."""

from __future__ import annotations

import os
import resource
import shutil
import stat
import subprocess
import sys
from pathlib import Path

from r2bench.errors import ExitCode
from tests.support import paths
from tests.support.captures import DATA
from tests.support.cli_runner import invoke_wide

ROOT = paths.REPO
QUICKSTART = ROOT / "experiments" / "quickstart.yaml"
VIRTUAL = ROOT / "experiments" / "testbeds" / "virtual-example.yaml"
TEXT_LOG = DATA / "v2.19.6" / "all_reduce_perf.g2.c1.txt"
FILE_SIZE_LIMIT = 16
"""Bytes a process under test may write to one file: every output is larger (EFBIG)."""
TABLES_FAIL_LIMIT = 2048
"""Enough for an imported run's own files, not for the sweep's tables."""


def _r2bench(*args: str, cwd: Path, limit: int = 0) -> subprocess.CompletedProcess[str]:
    """`r2bench ARGS` in a process of its own on an 80-column terminal; with `limit`, it may
    write only that many bytes to a file (Python ignores SIGXFSZ: EFBIG)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="80", PYTHONDONTWRITEBYTECODE="1")

    def limit_size() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return subprocess.run(
        [sys.executable, "-c", "from r2bench.cli import main; main()", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=120,
        preexec_fn=limit_size if limit else None,
    )


def _link_to_a_private_file(link: Path, target: Path) -> None:
    target.write_text("not r2bench's\n")
    target.chmod(0o600)
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target)


def _target_untouched(target: Path) -> None:
    assert target.read_text() == "not r2bench's\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600


def test_plan_script_replaces_a_link_at_a_node_script(tmp_path: Path) -> None:
    """Before: `plan --script DIR` wrote through DIR/node0.sh and chmodded its target 755."""
    scripts, target = tmp_path / "scripts", tmp_path / "elsewhere.sh"
    _link_to_a_private_file(scripts / "node0.sh", target)
    proc = _r2bench("plan", str(QUICKSTART), "-t", str(VIRTUAL), "--script", str(scripts),
                    cwd=tmp_path)  # fmt: skip
    assert proc.returncode == ExitCode.OK, proc.stdout + proc.stderr
    _target_untouched(target)
    node0 = scripts / "node0.sh"
    assert not node0.is_symlink() and node0.read_text().startswith("#!/usr/bin/env bash")
    assert node0.stat().st_mode & stat.S_IXUSR


def test_schema_out_replaces_a_link(tmp_path: Path) -> None:
    out, target = tmp_path / "schemas", tmp_path / "elsewhere.json"
    _link_to_a_private_file(out / "testbed.schema.json", target)
    proc = _r2bench("schema", "--out", str(out), cwd=tmp_path)
    assert proc.returncode == ExitCode.OK, proc.stderr
    _target_untouched(target)
    assert not (out / "testbed.schema.json").is_symlink()


def test_compare_markdown_replaces_a_link(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    shutil.copy(TEXT_LOG, logs)
    imported = invoke_wide("import", str(logs), "--sweep", "s", "--results", str(tmp_path / "r"))
    assert imported.exit_code == ExitCode.OK, imported.output
    sweep, md, target = tmp_path / "r" / "s", tmp_path / "out.md", tmp_path / "elsewhere.md"
    _link_to_a_private_file(md, target)
    proc = _r2bench("compare", str(sweep), str(sweep), "--markdown", str(md), cwd=tmp_path)
    assert proc.returncode in (ExitCode.OK, ExitCode.FAILED), proc.stderr
    _target_untouched(target)
    assert not md.is_symlink() and "r2bench compare" in md.read_text()


def test_plan_script_on_the_embedded_testbed_refused_write_is_one_line(tmp_path: Path) -> None:
    """Before: with no -t, plan writes the embedded testbed's description to a temporary file
    first, and a refused write there ended as `[Errno 27] File too large`, no file named."""
    proc = _r2bench("plan", str(QUICKSTART), "--script", str(tmp_path / "s"), cwd=tmp_path,
                    limit=FILE_SIZE_LIMIT)  # fmt: skip
    assert proc.returncode == ExitCode.USAGE, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and "bug in r2bench" not in proc.stderr
    error = [line for line in proc.stderr.splitlines() if line.startswith("r2bench: error:")]
    assert len(error) == 1, proc.stderr
    assert "embedded-testbed.yaml: could not write it: File too large (EFBIG)" in error[0]
    assert not list((tmp_path / "s").glob("*.sh")) if (tmp_path / "s").exists() else True


def test_a_refused_table_write_names_its_file_once_on_one_line(tmp_path: Path) -> None:
    """Before: the CSV's refusal was wrapped again by the Parquet file's writer around it
    ("results.parquet: could not write it: results.csv: could not write it: ...") and the
    line was broken at the terminal's width."""
    logs = tmp_path / "logs"
    logs.mkdir()
    shutil.copy(TEXT_LOG, logs)
    proc = _r2bench("import", str(logs), "--sweep", "s", "--results", str(tmp_path / "r"),
                    cwd=tmp_path, limit=TABLES_FAIL_LIMIT)  # fmt: skip
    assert proc.returncode == ExitCode.USAGE, proc.stdout + proc.stderr
    error = [line for line in proc.stderr.splitlines() if line.startswith("r2bench: error:")]
    assert len(error) == 1, proc.stderr
    assert error[0].count("could not write it") == 1, error[0]
    assert "File too large (EFBIG)" in error[0] and "check the folder" not in error[0]
    assert not any(p.name.endswith(".tmp") for p in tmp_path.rglob("*")), "a temporary file left"


def test_a_refused_report_write_names_its_file_once_on_one_line(tmp_path: Path) -> None:
    """Before: "cannot write X: X: could not write it: ...", broken at the terminal's width."""
    logs = tmp_path / "logs"
    logs.mkdir()
    shutil.copy(TEXT_LOG, logs)
    imported = invoke_wide("import", str(logs), "--sweep", "s", "--results", str(tmp_path / "r"))
    assert imported.exit_code == ExitCode.OK, imported.output
    proc = _r2bench("report", str(tmp_path / "r" / "s"), cwd=tmp_path, limit=FILE_SIZE_LIMIT)
    assert proc.returncode == ExitCode.USAGE, proc.stdout + proc.stderr
    lines = [line for line in proc.stderr.splitlines() if "could not write it" in line]
    assert len(lines) == 1 and lines[0].count("report.html") == 1, proc.stderr
    assert "File too large (EFBIG)" in lines[0]
