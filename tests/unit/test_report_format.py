"""What the page says does not mislead: overhead only outside the run-to-run spread, one
number format, no markdown, CPU runs called CPU, one colour per event kind, readable NIC
traffic, no column that is empty in every row."""

from __future__ import annotations

import dataclasses
import html
import json
import re
from pathlib import Path

import pytest

from r2bench.report import numbers, spread
from r2bench.report.charts import MARKED_EVENT_PREFIXES, overhead_table, timeline_figures
from r2bench.report.colours import event_colour
from r2bench.report.html import runs_html
from r2bench.report.inline import prose_html
from r2bench.report.nics import nic_panel_figures
from r2bench.report.series import series_info
from r2bench.tables.build import Tables, rebuild
from tests.support import paths
from tests.support.sample_sweep import SampleConfig, write_sample_sweep

DATA = paths.DATA / "nccl-tests"
FIGURE_RE = re.compile(
    r"<script type='application/json' class='r2-figure' id='figure-([^']*)'>(.*?)</script>", re.S
)


@pytest.fixture
def quickstart(quickstart_report: tuple[Path, Tables, str]) -> tuple[Path, Tables, str]:
    """The quickstart sweep, tables and report shared by the session (tests/support/sweeps.py)."""
    return quickstart_report


def _text_of(page: str) -> str:
    """What the page shows as text: no scripts, no style, no tags."""
    page = re.sub(r"<(script|style)\b.*?</\1>", "", page, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", " ", page))


@pytest.mark.parametrize(
    ("value", "text"),
    [(0.0958256, "0.0958"), (0.103273, "0.103"), (1.449896, "1.45"), (12.34, "12.3"),
     (1234.5, "1234"), (0.5, "0.500"), (0, "0"), (float("nan"), ""), (None, "")],
)  # fmt: skip
def test_three_significant_figures(value: float | None, text: str) -> None:
    assert numbers.gbps(value) == text


def test_bandwidths_in_record_text_take_the_same_format() -> None:
    reason = "4 result rows, avg busbw 0.0958256 GB/s; survived 2 network error event(s)"
    assert numbers.gbps_in_text(reason) == (
        "4 result rows, avg busbw 0.0958 GB/s; survived 2 network error event(s)"
    )


def test_one_bandwidth_format_in_the_runs_table(quickstart: tuple[Path, Tables, str]) -> None:
    _, _, page = quickstart
    start = page.index("<table class='runs' id='run-table'>")
    table = page[start : page.index("</table>", start)]
    assert "0.0852116" not in table and "avg busbw 0.0852 GB/s" in table
    for number in re.findall(r"(\d+\.\d+) GB/s", _text_of(page)):
        assert len(number.lstrip("0.")) <= 3, number  # 3 significant figures everywhere
    cells = re.findall(r"<td class='num'>([\d.]+)</td>", table)
    assert cells and all(c == numbers.gbps(float(c)) for c in cells)


def test_a_column_empty_in_every_row_is_hidden(quickstart: tuple[Path, Tables, str]) -> None:
    sweep, tables, _ = quickstart

    def table_with(transport: object) -> str:
        return runs_html(
            sweep, dataclasses.replace(tables, runs=tables.runs.assign(transport=transport)), sweep
        )

    assert "<th>transport</th>" not in table_with(None)
    assert "<th>transport</th>" not in table_with("")
    shown = table_with("NET/Socket")
    assert "<th>transport</th>" in shown and shown.count("<td>NET/Socket</td>") == len(tables.runs)


def test_no_markdown_backticks_in_the_page(quickstart: tuple[Path, Tables, str]) -> None:
    _, _, page = quickstart
    assert "`" not in _text_of(page)
    assert prose_html("no NCCL INFO `via` lines") == "no NCCL INFO <code>via</code> lines"
    assert prose_html("`<b>`") == "<code>&lt;b&gt;</code>"  # escaped first


def test_cpu_runs_are_not_called_gpu(quickstart: tuple[Path, Tables, str]) -> None:
    _, tables, page = quickstart
    assert "GPU/rank" not in _text_of(page)
    assert "CPU ranks" in series_info(tables.runs).shared
    runs = tables.runs.copy()
    runs["device_kind"] = "gpu"  # the records' own device kind wins over the recipe
    runs["gpus_per_rank"] = 1
    assert "1 GPU/rank" in series_info(runs).shared


def test_one_colour_per_event_kind_across_charts(quickstart: tuple[Path, Tables, str]) -> None:
    _, tables, _ = quickstart
    seen: dict[str, set[str]] = {}
    for fig in timeline_figures(tables):
        for trace in fig.spec["data"]:
            if trace["name"].startswith(MARKED_EVENT_PREFIXES):
                seen.setdefault(trace["name"], set()).add(trace["marker"]["color"])
    assert len(seen) >= 5
    assert all(colours == {event_colour(kind)} for kind, colours in seen.items())
    assert len({event_colour(k) for k in seen}) == len(seen)  # no two kinds alike


def test_nic_traffic_is_a_panel_per_nic_with_the_fault_shaded(
    quickstart: tuple[Path, Tables, str],
) -> None:
    _, tables, page = quickstart
    figures = nic_panel_figures(tables)
    assert len(figures) == 4  # the faulted runs
    for fig in figures:
        traces, layout = fig.spec["data"], fig.spec["layout"]
        assert len(traces) == 8  # 2 nodes x 4 NICs
        assert len({(t["xaxis"], t["yaxis"]) for t in traces}) == 8  # each on its own axes
        assert len(layout["shapes"]) == 8  # the fault window in every panel
        assert {s["yref"] for s in layout["shapes"]} == {f"{t['yaxis']} domain" for t in traces}
        assert sum("(faulted)" in a["text"] for a in layout["annotations"]) == 1
    assert {m[1] for m in FIGURE_RE.finditer(page)} >= {f.id for f in figures}


def test_one_repeat_is_no_overhead_and_untouched_sizes_say_so(
    quickstart: tuple[Path, Tables, str],
) -> None:
    _, tables, page = quickstart
    table = overhead_table(tables)
    assert len(table) and spread.OVERHEAD not in set(table["verdict"])
    small = table[table["size_bytes"] == 1 << 20]
    assert set(small["verdict"]) == {spread.BEFORE_FAULT}  # the fault fired 3 s after 1 MiB
    big = table[table["size_bytes"] == 32 << 20]
    assert set(big["verdict"]) == {spread.UNKNOWN} and big["low_pct"].isna().all()
    fig = json.loads(next(m[2] for m in FIGURE_RE.finditer(page) if m[1] == "overhead"))
    for trace in fig["data"]:
        assert trace["line"]["dash"] == "dot"  # nothing drawn as overhead
    text = _text_of(page)
    assert "spread is unknown" in text and "completed before the fault was injected" in text


def test_repeats_outside_their_spread_are_overhead(tmp_path: Path) -> None:
    cfg = SampleConfig(modes=(None, "1"), repeats=3, sizes=12, iterations=4)
    store = write_sample_sweep(tmp_path, DATA, cfg)
    table = overhead_table(rebuild(store.sweep_dir))
    faulted = table[table["series"].str.contains("nic_down")]
    hit = faulted[faulted["overhead_pct"] > 50]
    assert len(hit) and set(hit["verdict"]) == {spread.OVERHEAD}
    assert (hit["low_pct"] > 0).all() and (hit["low_pct"] <= hit["overhead_pct"]).all()
    assert set(table["runs"]) == {3}


def test_overlapping_spreads_are_within_noise() -> None:
    mine, ref = spread.Spread(3, 100.0, 120.0), spread.Spread(3, 95.0, 110.0)
    span = spread.overhead_range(mine, ref)
    assert span is not None and span[0] < 0 < span[1]
    assert spread.verdict(span, untouched=False) == spread.WITHIN
    assert spread.verdict(spread.overhead_range(spread.Spread(1, 1, 1), ref), False) == (
        spread.UNKNOWN
    )
