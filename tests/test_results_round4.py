"""Hostile and broken results, round 4: sweep paths given as `.`, `..` or in any script, kept
rows that must follow what the parser reads, kept-row files of the wrong shape, series
baselines over thousands of scenarios, and compare's provenance check over partly known
testbeds. Each is what the user meant or a one-line error with exit 2, never a traceback."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from sample_sweep import SampleConfig, write_sample_sweep
from typer.testing import CliRunner

from r2bench.cli import app

CAPTURED = Path(__file__).parent / "data" / "nccl-tests"


def _invoke(*args: str):  # type: ignore[no-untyped-def]
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "250"})
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "bug in r2bench" not in result.output
    return result


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("good")
    cfg = SampleConfig(sweep="s", seed=1, modes=(None, "1"), scenarios=("none",), repeats=2)
    write_sample_sweep(root, CAPTURED, cfg)
    return root / "s"


def _copy(good: Path, to: Path) -> Path:
    shutil.copytree(good, to, symlinks=True)
    return to


# ---- sweep paths as the user meant them ----------------------------------------------------


@pytest.mark.parametrize("command", ["report", "figures"])
@pytest.mark.parametrize("how", [".", "run/..", "./", "../s"])
def test_dot_paths_name_the_sweep_folder(
    good: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str, how: str
) -> None:
    sweep = _copy(good, tmp_path / "s")
    run = next(p for p in sweep.iterdir() if p.is_dir() and p.name != "tables")
    monkeypatch.chdir(sweep)
    arg = how.replace("run", run.name)
    result = _invoke(command, arg)
    assert result.exit_code == 0, result.output
    made = sweep / ("report.html" if command == "report" else "figures/claims.json")
    assert made.is_file()
    assert not (run / "report.html").exists() and not (run / "figures").exists()


@pytest.mark.parametrize("name", ["résultats", "実験 Ω"])
def test_a_sweep_folder_named_in_any_script_is_reported(
    good: Path, tmp_path: Path, name: str
) -> None:
    sweep = _copy(good, tmp_path / name)
    assert _invoke("report", str(sweep)).exit_code == 0
    assert (sweep / "report.html").is_file()
    assert _invoke("figures", str(sweep)).exit_code == 0
    result = _invoke("compare", str(sweep), str(sweep))
    assert result.exit_code in (0, 1), result.output


def test_a_run_folder_named_in_any_script_is_read(good: Path, tmp_path: Path) -> None:
    sweep = _copy(good, tmp_path / "s")
    run = next(p for p in sweep.iterdir() if p.is_dir() and p.name != "tables")
    run.rename(sweep / "exécution-1")
    result = _invoke("report", str(sweep))
    assert result.exit_code == 0, result.output
    assert "exécution-1" in (sweep / "report.html").read_text(encoding="utf-8")


def test_the_root_folder_is_no_sweep_exit_2(tmp_path: Path) -> None:
    for command in ("report", "figures"):
        result = _invoke(command, "/")
        assert result.exit_code == 2, result.output


def test_import_from_a_folder_named_in_any_script_makes_that_sweep(
    tmp_path: Path,
) -> None:
    logs = tmp_path / "journaux-été"
    logs.mkdir()
    shutil.copy(next(CAPTURED.glob("*.txt")), logs / "all_reduce_perf.txt")
    result = _invoke("import", str(logs), "--results", str(tmp_path / "results"))
    assert result.exit_code == 0, result.output
    assert (tmp_path / "results" / "journaux-été").is_dir()
