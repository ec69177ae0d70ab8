"""Figures of a sweep report, built from the tidy tables as plain plotly figure dicts.

Each figure is `{"data": [...], "layout": {...}}` (what `plotly.js` takes), so the report embeds
exactly the numbers computed here and tests can read them back. Every string that comes from
data (hostnames, scenario names, log lines) is HTML-escaped before it goes into a figure: plotly
renders a subset of HTML in labels, and escaped text is shown literally.

- `busbw_figure`: busbw vs message size per (collective, library, R2CC_MODE, scenario), median
  over repeats and cycles with min..max error bars (out-of-place results).
- `overhead_figure`: time overhead (%) of each series vs the no-fault baseline at each size.
- `timeline_figures`: per-iteration (or per-result) busbw against time around each fault, the
  fault window (inject..revert) shaded and R2CC / error events marked.
- `outcome_figure`: outcome matrix, scenario x (library, mode), with counts.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from r2bench.report import spread
from r2bench.report.colours import FAULT_FILL, FAULT_TEXT, GREY, event_colour, series_colour
from r2bench.report.series import SeriesInfo, baselines, series_info
from r2bench.tables.build import Tables

MODE_ENV = "R2CC_MODE"
BASELINE_SCENARIO = "none"
SERIES_KEYS = ("collective", "library", "mode", "scenario")
MAX_TIMELINES = 12
MAX_TIMELINE_POINTS = 5000
# Latency-bound sizes have ~0 busbw; a timeline of a multi-size run shows sizes from here on.
MARKED_EVENT_PREFIXES = ("r2cc_", "net_ib_", "socket_", "test_", "mpi_")
OUTCOME_ORDER = (
    "ok",
    "fault_not_injected",
    "fault_without_effect",
    "fault_missed",
    "wrong_library",
    "wrong_results",
    "crashed",
    "timeout",
    "incomplete",
    "launch_failed",
    "interrupted",
)


@dataclass(frozen=True)
class Figure:
    """One figure of the report: an id (used in HTML and file names), title and plotly spec."""

    id: str
    title: str
    spec: dict[str, Any]
    note: str = ""
    meta: dict[str, Any] = field(default_factory=dict)
    caption: str = ""


def esc(value: Any) -> str:
    """A data string made safe for plotly labels (and HTML): `<` -> `&lt;` etc."""
    return html.escape("" if value is None else str(value), quote=True)


def _scaled(n: float) -> tuple[float, int]:
    """(n / 1024**k, k) with the value under 1024 (k at most 4)."""
    k = 0
    while abs(n) >= 1024 and k < 4:
        n, k = n / 1024, k + 1
    return n, k


def human_size(n: float) -> str:
    """Bytes as nccl-tests users say them: 8 B, 64 KiB, 1 GiB."""
    value, k = _scaled(n)
    return f"{value:g} {('B', 'KiB', 'MiB', 'GiB', 'TiB')[k]}"


def _layout(title: str, **extra: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "title": {"text": title},
        "template": "plotly_white",
        "height": 520,
        "legend": {"orientation": "v"},
        "margin": {"l": 70, "r": 30, "t": 60, "b": 60},
    }
    base.update(extra)
    return base


def with_mode(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame with a `mode` column: R2CC_MODE as text, empty where it was not set."""
    out = frame.copy()
    if MODE_ENV in out.columns:
        out["mode"] = out[MODE_ENV].astype("object").where(out[MODE_ENV].notna(), "")
    else:
        out["mode"] = ""
    for key in ("collective", "library", "scenario"):
        out[key] = out[key].astype("object").where(out[key].notna(), "")
    return out


def binary_size(n: float) -> str:
    """A tick label in binary units: 8, 512, 1K, 64K, 1M, 2G."""
    value, k = _scaled(n)
    return f"{value:g}{('', 'K', 'M', 'G', 'T')[k]}"


def size_axis(sizes: list[int] | pd.Series, title: str = "message size (bytes)") -> dict[str, Any]:
    """A log2 x axis: ticks at powers of two (every 1st, 2nd, 5th or 10th, so at most 12),
    labelled in binary units (1K, 1M, 1G)."""
    values = [int(s) for s in sizes if s and s > 0]
    axis: dict[str, Any] = {"type": "log", "title": {"text": title}}
    if not values:
        return axis
    lo, hi = math.floor(math.log2(min(values))), math.ceil(math.log2(max(values)))
    # Steps that divide 10, so 1K, 1M and 1G are always among the ticks.
    step = next((s for s in (1, 2, 5) if (hi - lo) // s + 1 <= 12), 10)
    first = -(-lo // step) * step
    ticks = [2**e for e in range(first, hi + 1, step)]
    axis.update(tickmode="array", tickvals=ticks, ticktext=[binary_size(t) for t in ticks])
    return axis


# --------------------------------------------------------------------------- busbw vs size


def series_rows(tables: Tables, info: SeriesInfo | None = None) -> pd.DataFrame:
    """Result rows of runs that ended ok, with their series label (`series`)."""
    info = info or series_info(tables.runs)
    ok = info.ok_runs()[["run_id", "series"]]
    # with no run ok the frame is empty and its run_id not text: merge on one type
    ok = ok.astype({"run_id": object})
    results = tables.results.astype({"run_id": object})
    return results.merge(ok, on="run_id", how="inner", sort=False)


def size_stats(rows: pd.DataFrame, value: str, placement: str = "out_of_place") -> pd.DataFrame:
    """min/median/max/n of `value` per series and size (over repeats and cycles); `rows` are
    `series_rows`."""
    rows = rows[(rows["placement"] == placement) & rows[value].notna()]
    grouped = rows.groupby(["series", "size_bytes"], sort=True)[value]
    stats = grouped.agg(["min", "median", "max", "count"]).reset_index()
    return stats.rename(columns={"count": "n"})


def _caption(info: SeriesInfo, extra: str = "") -> str:
    parts = []
    if info.shared:
        parts.append(f"All series: {info.shared}.")
    if extra:
        parts.append(extra)
    return " ".join(parts)


LEGEND_ROW_PX = 20
PLOT_PX = 340  # height of the plotting area itself


def _legend_layout(n_traces: int, title: str = "") -> dict[str, Any]:
    """Legend below the plot (under the x axis title), one row per series, room made for it."""
    legend: dict[str, Any] = {
        "orientation": "v",
        "x": 0,
        "xanchor": "left",
        "y": -80 / PLOT_PX,
        "yanchor": "top",
    }
    if title:
        legend["title"] = {"text": title}
    rows = n_traces + (1 if title else 0)
    bottom = 100 + LEGEND_ROW_PX * rows
    return {
        "showlegend": True,
        "legend": legend,
        "height": 60 + PLOT_PX + bottom,
        "margin": {"l": 70, "r": 30, "t": 60, "b": bottom},
    }


def busbw_figures(tables: Tables, info: SeriesInfo | None = None) -> list[Figure]:
    """busbw vs message size, one figure per collective, one line per series (ok runs only)."""
    info = info or series_info(tables.runs)
    rows = series_rows(tables, info)
    collectives = sorted(set(info.ok_runs()["collective"]))
    if not collectives:
        return [busbw_figure(tables, info, None, "busbw")]
    return (
        [busbw_figure(tables, info, name, f"busbw-{i}") for i, name in enumerate(collectives)]
        if len(collectives) > 1
        else [busbw_figure(tables, info, collectives[0], "busbw", rows)]
    )


def busbw_figure(
    tables: Tables,
    info: SeriesInfo | None = None,
    collective: str | None = None,
    fig_id: str = "busbw",
    rows: pd.DataFrame | None = None,
) -> Figure:
    """busbw vs message size of one collective (all when None), one line per series (ok runs
    only), spread over repeats and cycles as min..max error bars."""
    info = info or series_info(tables.runs)
    rows = series_rows(tables, info) if rows is None else rows
    if collective is not None:
        rows = rows[rows["series"].isin(info.runs[info.runs["collective"] == collective]["series"])]
    stats = size_stats(rows, "busbw_gbps")
    traces = []
    for name, g in stats.groupby("series", sort=True):
        med = g["median"].to_numpy(float)
        traces.append(
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": esc(name),
                "x": g["size_bytes"].tolist(),
                "y": med.tolist(),
                "error_y": {
                    "type": "data",
                    "symmetric": False,
                    "array": (g["max"].to_numpy(float) - med).tolist(),
                    "arrayminus": (med - g["min"].to_numpy(float)).tolist(),
                },
                "customdata": list(zip(g["min"], g["max"], g["n"], strict=True)),
                "text": [human_size(s) for s in g["size_bytes"]],
                "hovertemplate": "%{text}: median %{y:.3g} GB/s (min %{customdata[0]:.3g},"
                " max %{customdata[1]:.3g}, n=%{customdata[2]})<extra>%{fullData.name}</extra>",
            }
        )
    what = f"{collective}: bus" if collective else "Bus"
    layout = _layout(
        esc(
            f"{what} bandwidth vs message size (runs that ended ok; median, min..max over repeats)"
        ),
        xaxis=size_axis(stats["size_bytes"]),
        yaxis={"title": {"text": "busbw (GB/s)"}, "rangemode": "tozero"},
        updatemenus=[_axis_type_menu()],
        **_legend_layout(len(traces)),
    )
    mine = info.runs if collective is None else info.runs[info.runs["collective"] == collective]
    left = SeriesInfo(mine, info.keys, info.env, info.shared).left_out()
    note = "" if traces else "no result rows of runs that ended ok in this sweep"
    meta = {"left_out": left, "series": len(traces), "collective": collective}
    caption = _caption(info, left + "." if left else "")
    spec = {"data": traces, "layout": layout}
    return Figure(fig_id, "Bus bandwidth", spec, note, meta, caption)


def _axis_type_menu() -> dict[str, Any]:
    """Buttons to switch the y axis between linear and log (busbw spans decades)."""
    return {
        "type": "buttons",
        "direction": "right",
        "x": 0,
        "y": 1.12,
        "xanchor": "left",
        "showactive": True,
        "buttons": [
            {"label": "linear y", "method": "relayout", "args": [{"yaxis.type": "linear"}]},
            {"label": "log y", "method": "relayout", "args": [{"yaxis.type": "log"}]},
        ],
    }


# --------------------------------------------------------------------------- overhead

NO_BASELINE = (
    "No valid baseline, so no overhead is drawn: a series is compared only with a no-fault "
    "series (scenario `none`, stock NCCL when there is one, else the same library and mode) "
    "of the same collective, ranks, GPUs per rank, nodes, transport, nccl-tests version and "
    "NCCL_* settings, whose runs ended ok and hold other results than its own."
)


OVERHEAD_COLUMNS = (
    "series", "size_bytes", "time_us", "baseline_time_us", "overhead_pct", "baseline",
    "runs", "baseline_runs", "low_pct", "high_pct", "verdict",
)  # fmt: skip


def overhead_table(tables: Tables, info: SeriesInfo | None = None) -> pd.DataFrame:
    """Per series and size: median time, its baseline's median time, the overhead in %, the
    overhead the run-to-run spreads allow (`low_pct`..`high_pct`, NaN with fewer than two runs
    a side) and whether it is overhead at all (`verdict`, `report.spread`)."""
    info = info or series_info(tables.runs)
    rows = series_rows(tables, info)
    stats = size_stats(rows, "time_us")
    medians = stats.set_index(["series", "size_bytes"])["median"]
    spreads = spread.run_spreads(rows)
    untouched = spread.untouched_sizes(rows, tables.runs)
    names = set(stats["series"])
    out = []
    for name, base in sorted(baselines(info).items()):
        if name not in names or base not in names:
            continue
        mine, ref = medians.loc[name], medians.loc[base]
        common = [s for s in mine.index if s in ref.index and ref[s] > 0]
        if not common or (all(mine[s] == ref[s] for s in common) and len(mine) == len(ref)):
            continue  # identical results: a copy of its baseline, not a comparison
        for size in common:
            pct = (mine[size] / ref[size] - 1.0) * 100.0
            here, there = spreads.get((name, int(size))), spreads.get((base, int(size)))
            span = spread.overhead_range(here, there)
            out.append(
                (
                    name, size, mine[size], ref[size], pct, base,
                    here.runs if here else 0, there.runs if there else 0,
                    span[0] if span else math.nan, span[1] if span else math.nan,
                    spread.verdict(span, (name, int(size)) in untouched),
                )
            )  # fmt: skip
    return pd.DataFrame(out, columns=list(OVERHEAD_COLUMNS))


def _overhead_trace(name: str, base: str, g: pd.DataFrame, colour: str) -> dict[str, Any]:
    """One series' differences: filled markers in its colour where they are overhead, grey
    open markers where they are within the spread or it is unknown, grey crosses at sizes the
    fault never touched; error bars: the overhead the run-to-run spreads allow."""
    verdicts = g["verdict"].tolist()
    real = [v == spread.OVERHEAD for v in verdicts]
    symbols = [
        "circle" if v == spread.OVERHEAD else "x" if v == spread.BEFORE_FAULT else "circle-open"
        for v in verdicts
    ]
    pct = g["overhead_pct"].to_numpy(float)
    known = g["low_pct"].notna().to_numpy()
    return {
        "type": "scatter",
        "mode": "lines+markers",
        "name": esc(f"{name}  vs  {base}"),
        "x": g["size_bytes"].tolist(),
        "y": g["overhead_pct"].tolist(),
        "line": {"color": colour if any(real) else GREY, "dash": "solid" if any(real) else "dot"},
        "marker": {
            "color": [colour if r else GREY for r in real],
            "symbol": symbols,
            "size": 9,
            "line": {"width": 2},
        },
        "error_y": {
            "type": "data",
            "symmetric": False,
            "array": np.where(known, g["high_pct"].to_numpy(float) - pct, 0).tolist(),
            "arrayminus": np.where(known, pct - g["low_pct"].to_numpy(float), 0).tolist(),
            "color": GREY,
        },
        "text": [f"{human_size(s)}: {v}" for s, v in zip(g["size_bytes"], verdicts, strict=True)],
        "hovertemplate": "%{text}: %{y:+.1f}%<extra>%{fullData.name}</extra>",
    }


def _overhead_note(table: pd.DataFrame) -> str:
    """What the reader must know before reading any difference as overhead."""
    counts = table["verdict"].value_counts()
    notes = []
    if counts.get(spread.UNKNOWN, 0):
        notes.append(
            f"{counts[spread.UNKNOWN]} differences come from series with 1 run at that size: "
            "their run-to-run spread is unknown, so they are drawn grey and open, not as "
            "overhead (repeat the runs: `repeats:` in the experiment)"
        )
    if counts.get(spread.BEFORE_FAULT, 0):
        notes.append(
            f"{counts[spread.BEFORE_FAULT]} sizes (grey crosses) completed before the fault was "
            "injected: the fault could not have touched them, so their difference is no fault "
            "overhead"
        )
    if not counts.get(spread.OVERHEAD, 0):
        notes.append("no difference is outside the run-to-run spread")
    return "; ".join(notes) + "." if notes else ""


def overhead_figure(tables: Tables, info: SeriesInfo | None = None) -> Figure:
    """Time (% more per collective) of each series vs its named baseline, as overhead only
    where it is outside the run-to-run spread (`report.spread`)."""
    info = info or series_info(tables.runs)
    table = overhead_table(tables, info)
    traces = [
        _overhead_trace(name, base, g, series_colour(i))
        for i, ((name, base), g) in enumerate(table.groupby(["series", "baseline"], sort=True))
    ]
    bases = sorted(set(table["baseline"]))
    if len(bases) == 1:
        title = f"Time vs baseline: {esc(bases[0])} (median time, out-of-place)"
    else:
        title = "Time vs each series' no-fault baseline (named in the legend)"
    layout = _layout(
        title,
        xaxis=size_axis(table["size_bytes"]),
        yaxis={"title": {"text": "time vs baseline (%)"}, "zeroline": True},
        **_legend_layout(len(traces), "series vs baseline"),
    )
    left = info.left_out()
    note = _overhead_note(table) if traces else NO_BASELINE
    how = (
        "Filled markers: overhead, outside the run-to-run spread (the two series' ranges of "
        "per-run medians do not overlap; error bars: the overhead those ranges allow). Open "
        "grey: within the spread, or spread unknown. Grey crosses: the size completed before "
        "the fault. "
    )
    caption = _caption(
        info,
        (how if traces else "")
        + (
            "Baseline" + ("s: " if len(bases) > 1 else ": ") + "; ".join(bases) + ". "
            if bases
            else ""
        )
        + (left + "." if left else ""),
    )
    counts = table["verdict"].value_counts().to_dict()
    meta = {"baselines": bases, "left_out": left, "verdicts": counts}
    return Figure(
        "overhead", "Overhead vs baseline", {"data": traces, "layout": layout}, note, meta, caption
    )


# --------------------------------------------------------------------------- timelines


@dataclass(frozen=True)
class Window:
    """A fault's inject..revert (node epoch seconds) and what it was, e.g. `link_down on
    node1/nic1` (a flap's later cycles say which; plain text, not escaped)."""

    start: float
    end: float
    label: str


def fault_windows(windows: pd.DataFrame, end_default: float) -> list[Window]:
    """The fault windows of one run's rows of the windows table (`analysis.parsedrun.fault_windows`:
    one per fault and flap cycle, on the controller clock); a window whose link never came
    back lasts to `end_default`."""
    out = [
        Window(float(w.applied_at), float(max(end_default, w.applied_at)), _fault_label(w))
        if w.back_at != w.back_at
        else Window(float(w.applied_at), float(w.back_at), _fault_label(w))
        for w in windows.itertuples(index=False)
    ]
    return sorted(out, key=lambda w: w.start)


def run_windows(tables: Tables, run_id: str, end_default: float) -> list[Window]:
    """The fault windows of a run of the sweep."""
    return fault_windows(tables.of_run("windows", run_id), end_default)


def _fault_label(window: Any) -> str:
    """`link_down on node1/nic1`, with its flap cycle after the first. Plain text: escaped
    where it is drawn."""
    label = f"{window.kind} on {window.node}/{window.nic}"
    return f"{label} (cycle {window.cycle})" if window.cycle else label


def timeline_points(tables: Tables, run_id: str) -> pd.DataFrame:
    """(timestamp, busbw_gbps, what) points of one run: iterations when they have timestamps,
    else the timestamped result rows; of its largest size only (the longest iterations, and one
    line per placement that does not jump between sizes)."""
    it = tables.iterations_of([run_id])
    pts = it[it["timestamp"].notna()]
    what = " iteration"
    if pts.empty:
        res = tables.results
        pts, what = res[(res["run_id"] == run_id) & res["timestamp"].notna()], " result"
    if not pts.empty:
        pts = pts[pts["size_bytes"] == pts["size_bytes"].max()]
    return pts.assign(what=pts["placement"].astype(str) + what)


def timeline_runs(tables: Tables) -> list[str]:
    """Runs worth a timeline: ones with faults, first repeat of each series first."""
    runs = with_mode(tables.runs)
    runs = runs[runs["n_faults"] > 0].sort_values([*SERIES_KEYS, "repeat", "run_id"])
    firsts = runs.drop_duplicates(list(SERIES_KEYS))
    rest = runs[~runs["run_id"].isin(firsts["run_id"])]
    return [*firsts["run_id"], *rest["run_id"]][:MAX_TIMELINES]


def timeline_figure(tables: Tables, run_id: str, index: int) -> Figure:
    """busbw against time (s since the run started) with fault windows and events."""
    run = tables.runs[tables.runs["run_id"] == run_id].iloc[0]
    pts = timeline_points(tables, run_id)
    events = tables.of_run("events", run_id)
    times = pts["timestamp"].to_numpy(float)
    t0 = _t0(run, times, events)
    windows = run_windows(tables, run_id, float(np.nanmax(times)) if len(times) else t0)
    traces = _timeline_traces(pts, t0)
    ymax = float(np.nanmax(pts["busbw_gbps"])) if len(pts) else 1.0
    traces += _event_traces(events, t0, ymax * 1.05 if ymax == ymax else 1.0)
    shapes = [_window_shape(w, t0) for w in windows]
    notes = [_window_note(w, t0) for w in windows]
    title = f"{esc(run_id)}: {esc(run['outcome'])}"
    layout = _layout(
        title,
        xaxis={"title": {"text": "time since the run started (s)"}},
        yaxis={"title": {"text": "busbw (GB/s)"}, "rangemode": "tozero"},
        shapes=shapes,
        annotations=notes,
        height=420,
    )
    note = "" if len(pts) else "no timestamped results (run without -S 1): no timeline"
    meta = {"run_id": run_id, "t0": t0, "windows": [(w.start, w.end) for w in windows]}
    spec = {"data": traces, "layout": layout}
    caption = f"{run['outcome']}: {run['reason']}"  # HTML-escaped where the page shows it
    return Figure(f"timeline-{index}", f"Timeline {esc(run_id)}", spec, note, meta, caption)


def _t0(run: pd.Series, times: np.ndarray, events: pd.DataFrame) -> float:
    started = run.get("started_at")
    if started is not None and started == started:
        return float(started)
    candidates = [*times[~np.isnan(times)][:1], *events["time"].dropna().tolist()]
    return float(min(candidates)) if candidates else 0.0


def _stride(frame: pd.DataFrame) -> pd.DataFrame:
    step = max(1, math.ceil(len(frame) / MAX_TIMELINE_POINTS))
    return frame.iloc[::step]


PLACEMENT_COLOURS = {
    "out_of_place iteration": "#333333",
    "in_place iteration": "#8c8c8c",
    "out_of_place result": "#333333",
    "in_place result": "#8c8c8c",
}
"""Busbw lines of a timeline in greys: colours are the events' (`report.colours`)."""


def _timeline_traces(pts: pd.DataFrame, t0: float) -> list[dict[str, Any]]:
    traces = []
    for what, g in pts.groupby("what", sort=True):
        g = _stride(g.sort_values("timestamp"))
        traces.append(
            {
                "type": "scattergl" if len(g) > 2000 else "scatter",
                "mode": "markers+lines" if len(g) < 200 else "markers",
                "name": esc(what),
                "x": (g["timestamp"].to_numpy(float) - t0).tolist(),
                "y": g["busbw_gbps"].tolist(),
                "text": [human_size(s) for s in g["size_bytes"]],
                "hovertemplate": "t=%{x:.3f}s %{text}: %{y:.3g} GB/s<extra></extra>",
                "marker": {"size": 4, "color": PLACEMENT_COLOURS.get(str(what), GREY)},
                "line": {"color": PLACEMENT_COLOURS.get(str(what), GREY)},
            }
        )
    return traces


def _event_traces(events: pd.DataFrame, t0: float, y: float) -> list[dict[str, Any]]:
    kinds = events["kind"].astype(str)
    marked = events[kinds.str.startswith(MARKED_EVENT_PREFIXES) & events["time"].notna()]
    traces = []
    for kind, g in marked.groupby("kind", sort=True):
        traces.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": esc(kind),
                "x": (g["time"].to_numpy(float) - t0).tolist(),
                "y": [y] * len(g),
                "text": [esc(m)[:300] for m in g["message"]],
                "hovertemplate": "t=%{x:.3f}s %{text}<extra>%{fullData.name}</extra>",
                "marker": {"symbol": "triangle-down", "size": 10, "color": event_colour(str(kind))},
            }
        )
    return traces


def _window_shape(w: Window, t0: float) -> dict[str, Any]:
    return {
        "type": "rect",
        "xref": "x",
        "yref": "paper",
        "x0": w.start - t0,
        "x1": w.end - t0,
        "y0": 0,
        "y1": 1,
        "fillcolor": FAULT_FILL,
        "line": {"width": 0},
        "layer": "below",
    }


def _window_note(w: Window, t0: float) -> dict[str, Any]:
    return {
        "x": w.start - t0,
        "y": 1,
        "xref": "x",
        "yref": "paper",
        "text": esc(f"fault: {w.label}"),
        "showarrow": False,
        "xanchor": "left",
        "yanchor": "bottom",
        "font": {"color": FAULT_TEXT, "size": 11},
    }


def timeline_figures(tables: Tables) -> list[Figure]:
    """One timeline per faulted run (first repeat of each series first, at most MAX_TIMELINES)."""
    return [timeline_figure(tables, rid, i) for i, rid in enumerate(timeline_runs(tables))]


# --------------------------------------------------------------------------- outcomes


def outcome_counts(runs: pd.DataFrame) -> pd.DataFrame:
    """Count of runs per scenario, library/mode column and outcome."""
    frame = with_mode(runs)
    frame["column"] = [
        f"{lib} mode {m}" if m != "" else lib
        for lib, m in zip(frame["library"], frame["mode"], strict=True)
    ]
    return frame.groupby(["scenario", "column", "outcome"]).size().rename("n").reset_index()


def _cell_text(cell: list[dict[str, Any]]) -> str:
    order = {name: i for i, name in enumerate(OUTCOME_ORDER)}
    parts = sorted(cell, key=lambda r: (order.get(r["outcome"], 99), r["outcome"]))
    return "<br>".join(f"{esc(r['outcome'])} {r['n']}" for r in parts)


def outcome_figure(tables: Tables) -> Figure:
    """Heatmap: share of ok runs per scenario x library/mode, with the counts as text."""
    counts = outcome_counts(tables.runs)
    scenarios = sorted(counts["scenario"].unique())
    columns = sorted(counts["column"].unique())
    z: list[list[float | None]] = []
    text: list[list[str]] = []
    # Each cell's rows looked up, not filtered out of the whole table (scenarios x columns
    # filters are quadratic: thousands of imported logs bring a scenario each).
    cells: dict[tuple[Any, Any], list[dict[str, Any]]] = {}
    for record in counts.to_dict("records"):
        cells.setdefault((record["scenario"], record["column"]), []).append(record)
    for sc in scenarios:
        z_row, t_row = [], []
        for col in columns:
            cell = cells.get((sc, col), [])
            total = int(sum(r["n"] for r in cell))
            ok = int(sum(r["n"] for r in cell if r["outcome"] == "ok"))
            z_row.append(ok / total if total else None)
            t_row.append(_cell_text(cell))
        z.append(z_row)
        text.append(t_row)
    trace = {
        "type": "heatmap",
        "x": [esc(c) for c in columns],
        "y": [esc(s) for s in scenarios],
        "z": z,
        "text": text,
        "texttemplate": "%{text}",
        "zmin": 0,
        "zmax": 1,
        "colorscale": [
            [0, "rgb(215, 60, 50)"],
            [0.5, "rgb(245, 200, 80)"],
            [1, "rgb(90, 180, 100)"],
        ],
        "colorbar": {"title": {"text": "share ok"}},
        "hovertemplate": "%{y} / %{x}<br>%{text}<extra></extra>",
    }
    layout = _layout(
        "Outcomes: scenario x library/mode (run counts)",
        xaxis={"title": {"text": "library / R2CC_MODE"}, "type": "category", "automargin": True},
        yaxis={"title": {"text": "scenario"}, "type": "category", "automargin": True},
        height=max(300, 80 + 60 * len(scenarios)),
    )
    data = [trace] if scenarios else []
    return Figure("outcomes", "Outcome matrix", {"data": data, "layout": layout})


def all_figures(tables: Tables) -> list[Figure]:
    """Every figure of the report, in page order."""
    info = series_info(tables.runs)
    return [
        *busbw_figures(tables, info),
        overhead_figure(tables, info),
        *timeline_figures(tables),
        outcome_figure(tables),
    ]
