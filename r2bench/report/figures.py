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

from r2bench.records.tables import Tables

MODE_ENV = "R2CC_MODE"
BASELINE_SCENARIO = "none"
SERIES_KEYS = ("collective", "library", "mode", "scenario")
MAX_TIMELINES = 12
MAX_TIMELINE_POINTS = 5000
# Latency-bound sizes have ~0 busbw; a timeline of a multi-size run shows sizes from here on.
TIMELINE_MIN_BYTES = 1 << 20
MARKED_EVENT_PREFIXES = ("r2cc_", "net_ib_", "socket_", "test_", "mpi_")
OUTCOME_ORDER = ("ok", "wrong_results", "crashed", "timeout", "launch_failed", "interrupted")


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


def human_size(n: float) -> str:
    """Bytes as nccl-tests users say them: 8 B, 64 KiB, 1 GiB."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:g} {unit}"
        n /= 1024
    return f"{n:g} TiB"


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


def series_name(collective: str, library: str, mode: str, scenario: str) -> str:
    """Legend label of one series (escaped)."""
    lib = f"{library} mode {mode}" if mode != "" else library
    return esc(f"{collective} · {lib} · {scenario}")


# --------------------------------------------------------------------------- busbw vs size


def size_stats(results: pd.DataFrame, value: str, placement: str = "out_of_place") -> pd.DataFrame:
    """min/median/max/n of `value` per series and size (over repeats and cycles)."""
    rows = with_mode(results[results["placement"] == placement])
    rows = rows[rows[value].notna()]
    grouped = rows.groupby([*SERIES_KEYS, "size_bytes"], sort=True)[value]
    stats = grouped.agg(["min", "median", "max", "count"]).reset_index()
    return stats.rename(columns={"count": "n"})


def busbw_figure(tables: Tables) -> Figure:
    """busbw vs message size, one line per series, spread over repeats as error bars."""
    stats = size_stats(tables.results, "busbw_gbps")
    traces = []
    for key, g in stats.groupby(list(SERIES_KEYS), sort=True):
        med = g["median"].to_numpy(float)
        traces.append(
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": series_name(*key),
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
                "hovertemplate": "%{text}: median %{y:.3f} GB/s (min %{customdata[0]:.3f},"
                " max %{customdata[1]:.3f}, n=%{customdata[2]})<extra>%{fullData.name}</extra>",
            }
        )
    layout = _layout(
        "Bus bandwidth vs message size (median, min..max over repeats and cycles)",
        xaxis={"type": "log", "title": {"text": "message size (bytes)"}},
        yaxis={"title": {"text": "busbw (GB/s)"}, "rangemode": "tozero"},
        updatemenus=[_axis_type_menu()],
    )
    note = "" if traces else "no result rows in this sweep"
    return Figure("busbw", "Bus bandwidth", {"data": traces, "layout": layout}, note)


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


def _baseline_key(keys: list[tuple[str, ...]], key: tuple[str, ...]) -> tuple[str, ...] | None:
    """No-fault baseline of a series: stock library (no R2CC_MODE) of the same collective
    without faults if the sweep has it, else the same library and mode without faults."""
    collective, library, mode, _ = key
    stock = sorted(k for k in keys if k[0] == collective and k[2] == "" and k[3] == "none")
    if stock:
        return stock[0]
    same = (collective, library, mode, BASELINE_SCENARIO)
    return same if same in keys else None


def overhead_table(results: pd.DataFrame) -> pd.DataFrame:
    """Per series and size: median time, the baseline's median time and the overhead in %."""
    stats = size_stats(results, "time_us")
    keys = sorted({tuple(k) for k in stats[list(SERIES_KEYS)].itertuples(index=False)})
    medians = stats.set_index([*SERIES_KEYS, "size_bytes"])["median"]
    rows = []
    for key in keys:
        base = _baseline_key(keys, key)
        if base is None or base == key:
            continue
        mine, ref = medians.loc[key], medians.loc[base]
        for size, value in mine.items():
            if size in ref.index and ref[size] > 0:
                pct = (value / ref[size] - 1.0) * 100.0
                rows.append((*key, size, value, ref[size], pct, series_name(*base)))
    cols = [*SERIES_KEYS, "size_bytes", "time_us", "baseline_time_us", "overhead_pct", "baseline"]
    return pd.DataFrame(rows, columns=cols)


def overhead_figure(tables: Tables) -> Figure:
    """Overhead (% more time per collective) of each series vs its no-fault baseline."""
    table = overhead_table(tables.results)
    traces = []
    for key, g in table.groupby(list(SERIES_KEYS), sort=True):
        traces.append(
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": series_name(*key),
                "x": g["size_bytes"].tolist(),
                "y": g["overhead_pct"].tolist(),
                "text": [
                    f"{human_size(s)} vs {b}"
                    for s, b in zip(g["size_bytes"], g["baseline"], strict=True)
                ],
                "hovertemplate": "%{text}: %{y:+.1f}%<extra>%{fullData.name}</extra>",
            }
        )
    layout = _layout(
        "Overhead vs the no-fault baseline (median time per collective, out-of-place)",
        xaxis={"type": "log", "title": {"text": "message size (bytes)"}},
        yaxis={"title": {"text": "overhead (%)"}, "zeroline": True},
    )
    note = "" if traces else "no series with a no-fault baseline (scenario `none`) to compare"
    return Figure("overhead", "Overhead vs baseline", {"data": traces, "layout": layout}, note)


# --------------------------------------------------------------------------- timelines


@dataclass(frozen=True)
class _Window:
    start: float
    end: float
    label: str


def fault_windows(events: pd.DataFrame, end_default: float) -> list[_Window]:
    """inject..revert windows (epoch seconds) of one run's fault events."""
    faults = events[events["kind"].astype(str).str.startswith("fault_")]
    windows = []
    for _, g in faults.groupby("fault", sort=True):
        inject = g[g["kind"] == "fault_inject"]["time"].dropna()
        if inject.empty:
            continue
        start = float(inject.iloc[0])
        revert = g[(g["kind"] == "fault_revert") & (g["time"] >= start)]["time"].dropna()
        end = float(revert.iloc[0]) if not revert.empty else max(end_default, start)
        first = g.iloc[0]
        label = f"{first['message']} on {first['host']}/{first['nic']}"
        windows.append(_Window(start, end, esc(label)))
    return windows


def timeline_points(tables: Tables, run_id: str) -> pd.DataFrame:
    """(timestamp, busbw_gbps, what) points of one run: iterations when they have timestamps,
    else the timestamped result rows."""
    it = tables.iterations
    pts = it[(it["run_id"] == run_id) & it["timestamp"].notna()]
    what = " iteration"
    if pts.empty:
        res = tables.results
        pts, what = res[(res["run_id"] == run_id) & res["timestamp"].notna()], " result"
    if (pts["size_bytes"] >= TIMELINE_MIN_BYTES).any():
        pts = pts[pts["size_bytes"] >= TIMELINE_MIN_BYTES]
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
    events = tables.events[tables.events["run_id"] == run_id]
    times = pts["timestamp"].to_numpy(float)
    t0 = _t0(run, times, events)
    windows = fault_windows(events, float(np.nanmax(times)) if len(times) else t0)
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
                "hovertemplate": "t=%{x:.3f}s %{text}: %{y:.3f} GB/s<extra></extra>",
                "marker": {"size": 4},
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
                "marker": {"symbol": "triangle-down", "size": 10},
            }
        )
    return traces


def _window_shape(w: _Window, t0: float) -> dict[str, Any]:
    return {
        "type": "rect",
        "xref": "x",
        "yref": "paper",
        "x0": w.start - t0,
        "x1": w.end - t0,
        "y0": 0,
        "y1": 1,
        "fillcolor": "rgba(220, 40, 40, 0.18)",
        "line": {"width": 0},
        "layer": "below",
    }


def _window_note(w: _Window, t0: float) -> dict[str, Any]:
    return {
        "x": w.start - t0,
        "y": 1,
        "xref": "x",
        "yref": "paper",
        "text": f"fault: {w.label}",
        "showarrow": False,
        "xanchor": "left",
        "yanchor": "bottom",
        "font": {"color": "rgb(180, 30, 30)", "size": 11},
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


def _cell_text(cell: pd.DataFrame) -> str:
    order = {name: i for i, name in enumerate(OUTCOME_ORDER)}
    parts = sorted(
        cell.itertuples(index=False), key=lambda r: (order.get(r.outcome, 99), r.outcome)
    )
    return "<br>".join(f"{esc(r.outcome)} {r.n}" for r in parts)


def outcome_figure(tables: Tables) -> Figure:
    """Heatmap: share of ok runs per scenario x library/mode, with the counts as text."""
    counts = outcome_counts(tables.runs)
    scenarios = sorted(counts["scenario"].unique())
    columns = sorted(counts["column"].unique())
    z: list[list[float | None]] = []
    text: list[list[str]] = []
    for sc in scenarios:
        z_row, t_row = [], []
        for col in columns:
            cell = counts[(counts["scenario"] == sc) & (counts["column"] == col)]
            total = int(cell["n"].sum())
            ok = int(cell[cell["outcome"] == "ok"]["n"].sum())
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
    return [
        busbw_figure(tables),
        overhead_figure(tables),
        *timeline_figures(tables),
        outcome_figure(tables),
    ]
