"""The end of a sweep in the terminal: the answer in sentences, and the runs that were not ok
readable at 80 columns (built from the captured quickstart sweep's real run folders)."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from r2bench.commands.sweep import TablesAndReport
from r2bench.runfolder.store import RunStore
from r2bench.sweep.display import failed_list
from r2bench.sweep.run import RunResult
from tests.support.quickstart_capture import copy_quickstart


def test_the_sweep_ends_with_what_its_runs_show(tmp_path: Path) -> None:
    store = RunStore.at(copy_quickstart(tmp_path))
    console = Console(width=80, record=True)
    answer = TablesAndReport().write(store, console)
    assert (store.sweep_dir / "report.html").is_file()
    text = " ".join(answer)
    assert "stock NCCL crashed under node1's nic1 going down" in text
    for mode in (0, 1, 2):
        assert f"R-2CCL mode {mode} survived node1's nic1 going down: detected in" in text
    assert text.count("without a fault") == 4


def test_runs_not_ok_read_at_80_columns(tmp_path: Path) -> None:
    sweep = copy_quickstart(tmp_path)
    crashed = next(p for p in sweep.iterdir() if "nccl-emulated-nic1-down" in p.name)
    end = RunStore.at(sweep).end(crashed.name)
    assert end is not None
    result = RunResult(crashed.name, end.outcome.status, end.outcome.reason, 6.0)
    console = Console(width=80, record=True)
    console.print(failed_list({result.run_id: result}))
    lines = console.export_text().splitlines()
    assert all(len(line) <= 80 for line in lines)
    assert any(crashed.name in line and "crashed" in line for line in lines)
    # the reason wraps under the run as prose, not in a column a few characters wide
    reason = " ".join(line.strip() for line in lines[2:])
    assert "hit a network error first" in reason
    assert min(len(line.strip()) for line in lines[2:-1]) > 20


def test_no_list_when_every_run_was_ok() -> None:
    assert failed_list({}) is None
