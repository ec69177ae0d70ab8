"""Sweep folders as the user names them (`.`, `run/..`, any script): `report` and `figures`
write into the sweep meant.

This module holds those with real processes; the same subject's other tests:
tests/unit/test_sweep_folder_paths.py (its pure tests).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli_runner import invoke_wide
from tests.support.sweeps import copy_sweep

# ---- sweep paths as the user meant them ----------------------------------------------------


@pytest.mark.parametrize("command", ["report", "figures"])
@pytest.mark.parametrize("how", [".", "run/..", "./", "../s"])
def test_dot_paths_name_the_sweep_folder(
    small_sweep: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str, how: str
) -> None:
    sweep = copy_sweep(small_sweep, tmp_path / "s")
    run = next(p for p in sweep.iterdir() if p.is_dir() and p.name != "tables")
    monkeypatch.chdir(sweep)
    arg = how.replace("run", run.name)
    result = invoke_wide(command, arg)
    assert result.exit_code == 0, result.output
    made = sweep / ("report.html" if command == "report" else "figures/claims.json")
    assert made.is_file()
    assert not (run / "report.html").exists() and not (run / "figures").exists()


@pytest.mark.parametrize("name", ["résultats", "実験 Ω"])
def test_a_sweep_folder_named_in_any_script_is_reported(
    small_sweep: Path, tmp_path: Path, name: str
) -> None:
    sweep = copy_sweep(small_sweep, tmp_path / name)
    assert invoke_wide("report", str(sweep)).exit_code == 0
    assert (sweep / "report.html").is_file()
    assert invoke_wide("figures", str(sweep)).exit_code == 0
    result = invoke_wide("compare", str(sweep), str(sweep))
    assert result.exit_code in (0, 1), result.output
