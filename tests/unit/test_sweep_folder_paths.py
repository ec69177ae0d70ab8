"""Sweep and run folders as the user names them (`.`, `..`, `/`, any script): the sweep meant, or
a one-line error with exit 2; never a traceback.

This module holds its pure tests; the same subject's other tests:
tests/integration/test_sweep_folder_paths.py (those with real processes).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.support import paths
from tests.support.cli_runner import invoke_wide
from tests.support.sweeps import copy_sweep

CAPTURED = paths.DATA / "nccl-tests"


def test_a_run_folder_named_in_any_script_is_read(small_sweep: Path, tmp_path: Path) -> None:
    sweep = copy_sweep(small_sweep, tmp_path / "s")
    run = next(p for p in sweep.iterdir() if p.is_dir() and p.name != "tables")
    run.rename(sweep / "exécution-1")
    result = invoke_wide("report", str(sweep))
    assert result.exit_code == 0, result.output
    assert "exécution-1" in (sweep / "report.html").read_text(encoding="utf-8")


def test_the_root_folder_is_no_sweep_exit_2(tmp_path: Path) -> None:
    for command in ("report", "figures"):
        result = invoke_wide(command, "/")
        assert result.exit_code == 2, result.output


def test_import_from_a_folder_named_in_any_script_makes_that_sweep(
    tmp_path: Path,
) -> None:
    logs = tmp_path / "journaux-été"
    logs.mkdir()
    shutil.copy(next(CAPTURED.glob("*.txt")), logs / "all_reduce_perf.txt")
    result = invoke_wide("import", str(logs), "--results", str(tmp_path / "results"))
    assert result.exit_code == 0, result.output
    assert (tmp_path / "results" / "journaux-été").is_dir()
