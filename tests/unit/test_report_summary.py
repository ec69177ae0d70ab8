"""The report opens with its answer: per library, mode and fault, what happened, from the
tables of a real sweep (the captured quickstart, tests/data/quickstart-sweep/)."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pandas as pd
import pytest

from r2bench.report import numbers
from r2bench.report.summary import (
    SUMMARY_COLUMNS,
    Measure,
    SummaryColumn,
    SummaryRow,
    summary_rows,
)
from r2bench.report.summary_html import summary_section
from r2bench.tables.build import Tables

R2CCL_MODES = ("R-2CCL mode 0", "R-2CCL mode 1", "R-2CCL mode 2")
FAULT = "node1's nic1 going down"


@pytest.fixture
def quickstart(quickstart_report: tuple[Path, Tables, str]) -> tuple[Path, Tables, str]:
    """The quickstart sweep, tables and report shared by the session (tests/support/sweeps.py)."""
    return quickstart_report


def _rows(tables: Tables) -> dict[tuple[str, str], SummaryRow]:
    return {(r.subject, r.scenario): r for r in summary_rows(tables)}


def test_summary_states_what_the_quickstart_runs_show(
    quickstart: tuple[Path, Tables, str],
) -> None:
    _, tables, _ = quickstart
    rows = _rows(tables)
    assert len(rows) == 8
    stock = rows[("stock NCCL", "nic1-down")]
    assert (stock.outcome.word, stock.fault, stock.runs) == ("crashed", FAULT, 1)
    assert stock.sentence() == (
        "stock NCCL crashed under node1's nic1 going down: its first error came 0.272 s after "
        "the fault."
    )
    for subject in R2CCL_MODES:
        row = rows[(subject, "nic1-down")]
        assert row.outcome.word == "survived", subject
        detect, stall = row.measures["detect_s"].median, row.measures["stall_s"].median
        assert 0.3 < detect < 0.6  # NCCL_R2CC_FAILOVER_TIMEOUT_MS=500
        assert detect < stall < 2.0
        assert row.sentence().startswith(
            f"{subject} survived {FAULT}: detected in {numbers.seconds(detect)}, "
            f"stalled {numbers.seconds(stall)}, then ran at "
        )
        assert row.measures["degraded_ratio"].defined and row.measures["failback_ratio"].defined
    for subject in ("stock NCCL", *R2CCL_MODES):
        row = rows[(subject, "none")]
        assert (row.outcome.word, row.faulted) == ("ok", False)
        assert row.sentence().startswith(f"{subject} ended ok without a fault: average busbw ")


def test_summary_numbers_are_the_runs_table(quickstart: tuple[Path, Tables, str]) -> None:
    _, tables, _ = quickstart
    runs = tables.runs.set_index(["library", "scenario"])
    for row in summary_rows(tables):
        run = runs.loc[(row.library, row.scenario)]
        for column in SUMMARY_COLUMNS:
            measure = row.measures[column.key]
            value = run[column.key]
            assert measure.defined == (not pd.isna(value)), (row.subject, column.key)
            if measure.defined:
                assert measure.median == pytest.approx(float(value))


def test_summary_rows_are_ordered_faults_first_stock_first(
    quickstart: tuple[Path, Tables, str],
) -> None:
    _, tables, _ = quickstart
    order = [(r.subject, r.scenario) for r in summary_rows(tables)]
    subjects = ["stock NCCL", *R2CCL_MODES]
    assert order == [(s, "nic1-down") for s in subjects] + [(s, "none") for s in subjects]


def test_the_page_opens_with_the_summary(quickstart: tuple[Path, Tables, str]) -> None:
    _, tables, page = quickstart
    first = page.index("<section")
    assert page.startswith("<section id='summary'>", first)
    for later in ("id='outcomes'", "id='busbw'", "id='overhead'", "id='timelines'"):
        assert page.index(later) > first
    assert page.index("id='runs'") > page.index("id='timelines'")
    assert page.index("id='provenance'") > page.index("id='runs'")
    for row in summary_rows(tables):
        assert html.escape(row.sentence()) in page
    summary = page[first : page.index("</section>", first)]
    assert "8 runs of all_reduce (1 repeat each), 1 MiB to 32 MiB, on 2 nodes." in summary
    assert "CPU emulation" in summary  # the quickstart's libraries are the CPU emulator
    assert summary.count("<tr class='good'>") == 7 and summary.count("<tr class='bad'>") == 1
    # a crashed run's stall has no value: a dash that says why on hover, never 0
    assert re.search(r"title='crashed'>–</td>", summary)


def test_a_new_column_reaches_table_and_sentence_through_the_model(
    quickstart: tuple[Path, Tables, str],
) -> None:
    """A future workload adds a number (a training job's time lost) as a column, not HTML."""
    _, tables, _ = quickstart
    took = SummaryColumn(
        "duration_s", "job time (s)", "s", phrase="the job took {}", fault_free_phrase="took {}"
    )
    columns = (*SUMMARY_COLUMNS, took)
    rows = summary_rows(tables, columns)
    mode0 = next(r for r in rows if r.subject == "R-2CCL mode 0" and r.faulted)
    duration = float(tables.runs.set_index("library").loc["r2ccl-m0"].query("n_faults > 0")
                     ["duration_s"].iloc[0])  # fmt: skip
    assert mode0.sentence(columns).endswith(f", the job took {numbers.seconds(duration)}.")
    page = summary_section(rows, "<p>lead</p>", columns)
    assert "<th>job time (s)</th>" in page and f">{numbers.significant(duration)}</td>" in page


def test_mixed_outcomes_are_counted_not_hidden() -> None:
    row = SummaryRow(
        subject="R-2CCL mode 1",
        library="r2ccl",
        scenario="flap",
        fault=FAULT,
        outcomes=(("ok", 2), ("crashed", 1)),
        measures={"detect_s": Measure((0.4, 0.5, 0.6)), "stall_s": Measure((1.0, 1.2))},
    )
    assert row.outcome.word == "survived 2/3, crashed 1/3"
    assert row.outcome.tone == "mixed"
    assert row.sentence() == (
        f"R-2CCL mode 1 under {FAULT}: survived 2/3, crashed 1/3; detected in 0.500 s, "
        "stalled 1.10 s."
    )
    assert row.measures["detect_s"].cell(SUMMARY_COLUMNS[0]) == "0.500 (0.400–0.600, 3 runs)"
    hung = SummaryRow("stock NCCL", "nccl", "down", FAULT, (("timeout", 1),))
    assert hung.outcome.word == "hung"
    assert hung.sentence() == f"stock NCCL hung (timed out) under {FAULT}."
