"""Hostile and broken results, round 4: sweep paths given as `.`, `..` or in any script, kept
rows that must follow what the parser reads, kept-row files of the wrong shape, series
baselines over thousands of scenarios, and compare's provenance check over partly known
testbeds. Each is what the user meant or a one-line error with exit 2, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.results_round4 import copy, invoke

# ---- sweep paths as the user meant them ----------------------------------------------------


@pytest.mark.parametrize("command", ["report", "figures"])
@pytest.mark.parametrize("how", [".", "run/..", "./", "../s"])
def test_dot_paths_name_the_sweep_folder(
    good: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str, how: str
) -> None:
    sweep = copy(good, tmp_path / "s")
    run = next(p for p in sweep.iterdir() if p.is_dir() and p.name != "tables")
    monkeypatch.chdir(sweep)
    arg = how.replace("run", run.name)
    result = invoke(command, arg)
    assert result.exit_code == 0, result.output
    made = sweep / ("report.html" if command == "report" else "figures/claims.json")
    assert made.is_file()
    assert not (run / "report.html").exists() and not (run / "figures").exists()


@pytest.mark.parametrize("name", ["résultats", "実験 Ω"])
def test_a_sweep_folder_named_in_any_script_is_reported(
    good: Path, tmp_path: Path, name: str
) -> None:
    sweep = copy(good, tmp_path / name)
    assert invoke("report", str(sweep)).exit_code == 0
    assert (sweep / "report.html").is_file()
    assert invoke("figures", str(sweep)).exit_code == 0
    result = invoke("compare", str(sweep), str(sweep))
    assert result.exit_code in (0, 1), result.output
