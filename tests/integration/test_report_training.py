"""The report of a real training sweep (results/examples/virtual-training: emulated stock NCCL
and R-2CCL mode 0, node1's nic1 down at update 20; stock crashed, R-2CCL trained on,
bit-identical to the baseline before the hit and after): its training section, its summary's
training columns, and no training section for a sweep without training runs."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pandas as pd
import pytest

from r2bench.commands.report import REPORT_NAME, report_command
from r2bench.report.summary import summary_columns, summary_rows
from r2bench.report.training import (
    checks_html,
    loss_figure,
    step_time_figures,
    training_figures,
)
from r2bench.tables.build import Tables, build_tables
from tests.support import paths

EXAMPLE = paths.REPO / "results" / "examples" / "virtual-training"
R2CCL_FAULTED = "train-r2ccl-m0-nic1-down-r0-4ba2a36fe3"
STOCK_FAULTED = "train-nccl-emulated-nic1-down-r0-f79f06deae"


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the example's run folders, its report built."""
    target = tmp_path_factory.mktemp("training") / EXAMPLE.name
    shutil.copytree(EXAMPLE, target, ignore=shutil.ignore_patterns("tables", REPORT_NAME))
    assert report_command(target, None, None) == 0
    return target


@pytest.fixture(scope="module")
def tables(sweep: Path) -> Tables:
    return build_tables(sweep)


def test_the_step_time_timeline_shades_each_cut_and_stars_the_hit_update(tables: Tables) -> None:
    figures = step_time_figures(tables)
    assert [f.meta["scenario"] for f in figures] == ["nic1-down", "none"]  # faulted first
    cut = figures[0]
    assert set(cut.meta["runs"]) == {R2CCL_FAULTED, STOCK_FAULTED}
    # Each run's own window (stock's link came back after 2.1 s, R-2CCL's after 3.1 s).
    widths = sorted(round(s["x1"] - s["x0"], 1) for s in cut.spec["layout"]["shapes"])
    assert widths == [2.1, 3.1]
    hits = [t for t in cut.spec["data"] if t["name"] == "the update the fault hit"]
    # Only R-2CCL's hit update completed (0.801 s); stock's never did, and the caption says so.
    assert len(hits) == 1 and hits[0]["y"] == pytest.approx([0.8008], abs=1e-4)
    assert "update 21, which never completed (crashed)" in cut.caption
    assert "update 21, which took 0.801 s against a median of 0.348 s" in cut.caption
    assert not [t for t in figures[1].spec["data"] if t["name"] == "the update the fault hit"]


def test_the_loss_chart_shows_no_drift_where_the_runs_are_bit_identical(tables: Tables) -> None:
    fig = loss_figure(tables)
    assert fig.meta["hits"] == [21]
    below = [t for t in fig.spec["data"] if t["yaxis"] == "y2"]
    # Every run but the baseline itself has a difference line; all zero in this sweep.
    assert len(below) == 3
    assert all(v == 0 for t in below for v in t["y"])
    stock_cut = next(t for t in below if "nccl-emulated" in t["name"])
    assert stock_cut["x"][-1] == 20  # it crashed in update 21


def test_the_checks_table_has_a_row_and_a_sentence_per_run(tables: Tables) -> None:
    page = checks_html(tables)
    assert page.count("<tr") == 5  # header and 4 runs
    assert "yes, before update 21" in page
    assert "update 21 took 0.801 s against a median of 0.348 s before it" in page
    assert page.count("<li>") == 4


def test_the_summary_says_survived_the_hit_update_its_step_and_identity(tables: Tables) -> None:
    columns = summary_columns(tables)
    keys = [c.key for c in columns]
    # Of the collective columns only detection has a value in a training sweep.
    assert keys == ["detect_s", "hit_update", "hit_step_s", "overhead_pct", "identity"]
    rows = {(r.library, r.scenario): r for r in summary_rows(tables, columns)}
    r2 = rows[("r2ccl-m0", "nic1-down")]
    assert r2.outcome.word == "survived"
    assert r2.measures["hit_update"].median == 21
    assert r2.measures["hit_step_s"].median == pytest.approx(0.8008, abs=1e-4)
    assert r2.measures["identity"].text == "bit-identical to the baseline run before update 21"
    assert "the fault hit update 21, it took 0.801 s, median step +64.9 %" in r2.sentence(columns)
    stock = rows[("nccl-emulated", "nic1-down")]
    assert stock.outcome.word == "crashed"
    assert not stock.measures["hit_step_s"].defined
    assert stock.measures["hit_step_s"].missing == "update 21 never completed"
    clean = rows[("r2ccl-m0", "none")]
    assert clean.sentence(columns).endswith("bit-identical to the baseline run.")
    baseline = rows[("nccl-emulated", "none")]
    assert not baseline.measures["identity"].defined


def test_the_page_links_and_holds_the_training_section(sweep: Path) -> None:
    page = (sweep / REPORT_NAME).read_text(encoding="utf-8")
    assert "<a href='#training'>Training</a>" in page
    assert page.index("id='summary'") < page.index("id='training'") < page.index("id='outcomes'")
    assert "4 training runs (1 repeat each), on 3 nodes." in page
    for fid in ("training-steps-0", "training-steps-1", "training-loss"):
        assert f"id='figure-{fid}'" in page
    assert "<table id='training-checks'>" in page


def test_the_page_is_the_same_built_again(sweep: Path, tmp_path: Path) -> None:
    again = tmp_path / sweep.name
    shutil.copytree(sweep, again, ignore=shutil.ignore_patterns("tables", REPORT_NAME))
    assert report_command(again, None, None) == 0
    plotly = re.compile(r"<script type='text/javascript'>.*?</script>", re.S)
    first = plotly.sub("", (sweep / REPORT_NAME).read_text(encoding="utf-8"), count=1)
    second = plotly.sub("", (again / REPORT_NAME).read_text(encoding="utf-8"), count=1)
    assert first == second


def test_a_sweep_without_training_runs_gets_no_training_section() -> None:
    empty = Tables(results=pd.DataFrame(), runs=pd.DataFrame({"run_id": []}))
    assert training_figures(empty) == []
    assert summary_columns(empty)[-1].key == "avg_busbw_gbps"


def test_the_paper_training_figures_draw_and_leave_the_emulator_untested(sweep: Path) -> None:
    from r2bench.figures.render import draw_all, load_sweeps

    drawn = {o.definition.id: o.drawn for o in draw_all(load_sweeps([sweep])) if o.drawn}
    steps, cut = drawn["training-step-time"], drawn["training-step-timeline"]
    assert steps is not None and cut is not None
    # The CPU emulator exercises the harness, not R-2CCL's claim.
    assert steps.claim.verdict == cut.claim.verdict == "not tested"
    assert any("CPU emulator" in n for n in steps.claim.numbers)
    bars = [t for t in steps.figure.spec["data"] if t["type"] == "bar"]
    assert [t["name"] for t in bars] == ["median step, none", "median step, nic1-down"]
    assert bars[1]["text"] == ["+4.7 %", "+64.9 %"]  # against the stock baseline run
    assert any("33 updates started after the link came back" in n for n in cut.claim.numbers)
