"""The report's fault-campaign section (report/campaign.py) on the quickstart sweep as it ran
(tests/data/quickstart-sweep), with predictions registered for it: classes counted, predictions
scored into a confusion table, a predictions file changed after the runs flagged."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from tests.support.paths import DATA

pytest.importorskip("pandas")

PREDICTIONS = """\
experiment: quickstart
predictions:
  - match: {library: nccl-emulated, scenario: nic1-down}
    expect: DECLINED
  - match: {library: r2ccl-m0}
    expect: TRANSPARENT
  - match: {library: r2ccl-m1}
    expect: HUNG
"""


@pytest.fixture
def sweep(tmp_path: Path) -> tuple[Path, Path]:
    from r2bench.runfolder.predictions import register

    folder = tmp_path / "quickstart"
    shutil.copytree(DATA / "quickstart-sweep", folder, ignore=shutil.ignore_patterns("*.md"))
    file = tmp_path / "predictions.yaml"
    file.write_text(PREDICTIONS)
    register(folder, file)
    return folder, file


def _section(folder: Path) -> str:
    from r2bench.report.campaign import campaign_section
    from r2bench.report.html import _section, _table
    from r2bench.tables.build import build_tables

    tables = build_tables(folder)
    return "\n".join(campaign_section(folder, tables, _section, _table))


def _cells(text: str, first: str) -> list[str]:
    """The cells of the table row whose first cell is `first`."""
    for row in re.findall(r"<tr>(.*?)</tr>", text):
        cells = re.findall(r"<td class='cell'>(.*?)</td>", row)
        if cells and cells[0] == first:
            return cells
    raise AssertionError(f"no row {first}")


def test_classes_predictions_and_bounds(sweep: tuple[Path, Path]) -> None:
    folder, _ = sweep
    text = _section(folder)
    assert "Fault campaign" in text
    # Scored: nccl DECLINED (hit), m0 TRANSPARENT (hit), m1 predicted HUNG but TRANSPARENT;
    # m2 has no prediction.
    assert "2 of 3 scored runs as predicted; 1 faulted runs no prediction covers" in text
    columns = ["TRANSPARENT", "DECLINED", "HUNG", "SILENT_WRONG", "OTHER", "MISSED"]
    hung = dict(zip(columns, _cells(text, "HUNG")[1:], strict=True))
    assert hung["TRANSPARENT"] == "1" and hung["HUNG"] == "0"
    assert "unchanged since" in text
    assert "Degraded runs against their bounds" in text


def test_a_changed_predictions_file_is_flagged(sweep: tuple[Path, Path]) -> None:
    folder, file = sweep
    file.write_text(PREDICTIONS.replace("HUNG", "TRANSPARENT"))  # edited after the runs
    text = _section(folder)
    assert "changed after it was registered" in text
    assert "2 of 3 scored runs as predicted" in text  # the registered copy is what is scored


def test_no_faulted_run_no_section(tmp_path: Path) -> None:
    folder = tmp_path / "clean"
    folder.mkdir()
    for run in (DATA / "quickstart-sweep").glob("*-none-*"):
        shutil.copytree(run, folder / run.name)
    assert _section(folder) == ""


def test_compare_prints_the_classes_of_each_faulted_series(tmp_path: Path) -> None:
    from tests.support.cli_runner import invoke_as_main

    sweep = tmp_path / "quickstart"
    shutil.copytree(DATA / "quickstart-sweep", sweep, ignore=shutil.ignore_patterns("*.md"))
    ran = invoke_as_main("compare", str(sweep), str(sweep), env={"COLUMNS": "200"})
    assert ran.exit_code == 0, ran.output
    assert "outcome classes of the faulted series (baseline -> candidate):" in ran.output
    assert (
        "all_reduce nccl-emulated nic1-down NCCL_IB_RETRY_CNT=3 NCCL_IB_TIMEOUT=14: "
        "DECLINED 1/1 -> DECLINED 1/1" in ran.output
    )
    assert "r2ccl-m0 nic1-down" in ran.output and "TRANSPARENT 1/1 -> TRANSPARENT 1/1" in ran.output
