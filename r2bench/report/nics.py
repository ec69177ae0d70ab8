"""Per-NIC traffic around faults: one figure per faulted run that has NIC counters.

Each NIC's transmit throughput (Gbit/s, from the `counters` table's deltas) against seconds
since the run's first sample, the fault windows (inject..revert, node clocks like the samples)
shaded: the failed NIC drops to zero and the others pick up its share. The report draws one
small panel per NIC, a row per node (`nic_panel_figures`: eight lines in one chart tangle);
`nic_figure` draws them as lines of one chart (the paper figure's layout). The caption gives
each NIC's mean before, during and after the first fault.
"""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import pandas as pd

from r2bench.report import panels
from r2bench.report.charts import Figure, Window, esc, run_windows
from r2bench.report.colours import FAULT_FILL, FAULT_TEXT, series_colour
from r2bench.tables.build import Tables

MAX_NIC_FIGURES = 12
MAX_POINTS_PER_TRACE = 4000
SECTION_TITLE = "Traffic per NIC around faults (fault window shaded)"


def nic_runs(tables: Tables) -> list[str]:
    """Faulted runs with counters, at most MAX_NIC_FIGURES, in the runs table's order."""
    counters = tables.counters
    if counters is None or counters.empty:
        return []
    have = set(counters["run_id"].astype(str))
    runs = tables.runs[(tables.runs["n_faults"].fillna(0) > 0)]
    return [r for r in runs["run_id"].astype(str) if r in have][:MAX_NIC_FIGURES]


PHASES = ("before", "during", "after")


def phase_means(samples: pd.DataFrame, window: Window) -> pd.DataFrame:
    """Mean tx Gbit/s per node/NIC during a fault window, and in as long a span just before
    and just after it (NaN where a NIC has no sample in a span)."""
    span = window.end - window.start
    edges = (window.start - span, window.start, window.end, window.end + span)
    rows = []
    for (node, nic), group in samples.groupby(["node", "nic"], sort=True):
        times, rates = group["time"].to_numpy(float), group["tx_gbit_s"].to_numpy(float)
        means = [_mean(times, rates, lo, hi) for lo, hi in pairwise(edges)]
        rows.append({"node": node, "nic": nic, **dict(zip(PHASES, means, strict=True))})
    return pd.DataFrame(rows, columns=["node", "nic", *PHASES])


def _mean(times: np.ndarray, rates: np.ndarray, lo: float, hi: float) -> float:
    chosen = rates[(times > lo) & (times <= hi)]
    chosen = chosen[~np.isnan(chosen)]
    return float(chosen.mean()) if len(chosen) else float("nan")


def _caption(means: pd.DataFrame, window: Window) -> str:
    def f(x: float) -> str:
        return "-" if x != x else f"{x:.3f}"

    parts = [
        f"{r.node}/{r.nic} {f(r.before)} / {f(r.during)} / {f(r.after)}"
        for r in means.itertuples(index=False)
    ]
    return (
        f"Mean tx Gbit/s just before / during / just after the fault ({window.label}, "
        f"{window.end - window.start:.2f} s): " + "; ".join(parts)
    )


def nic_figure(tables: Tables, run_id: str, index: int) -> Figure:
    """One run's per-NIC tx throughput over time with its fault windows shaded."""
    samples = tables.of_run("counters", run_id)
    t0 = float(samples["time"].min())
    windows = run_windows(tables, run_id, float(samples["time"].max()))
    traces = []
    for (node, nic), g in samples.groupby(["node", "nic"], sort=True):
        g = g.sort_values("time")
        step = max(1, len(g) // MAX_POINTS_PER_TRACE)
        g = g.iloc[::step]
        traces.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": esc(f"{node}/{nic}"),
                "x": np.round(g["time"].to_numpy(float) - t0, 4).tolist(),
                "y": np.round(g["tx_gbit_s"].to_numpy(float), 5).tolist(),
                "text": [esc(s) for s in g["state"]],
                "hovertemplate": "%{x:.2f} s: %{y:.3f} Gbit/s tx (link %{text})"
                "<extra>%{fullData.name}</extra>",
            }
        )
    shapes = [
        {
            "type": "rect", "xref": "x", "yref": "paper", "x0": w.start - t0, "x1": w.end - t0,
            "y0": 0, "y1": 1, "fillcolor": FAULT_FILL, "line": {"width": 0},
            "layer": "below",
        }
        for w in windows
    ]  # fmt: skip
    notes = [
        {"x": w.start - t0, "y": 1, "xref": "x", "yref": "paper", "text": esc(w.label),
         "showarrow": False, "xanchor": "left", "yanchor": "bottom", "font": {"size": 10}}
        for w in windows[:1]
    ]  # fmt: skip
    run = tables.runs[tables.runs["run_id"].astype(str) == run_id].iloc[0]
    mode = run.get("R2CC_MODE")
    what = f"{run['scenario']}, R2CC_MODE {mode}" if mode is not None and mode == mode else ""
    layout = {
        "title": {"text": esc(f"{run_id}: {what or run['scenario']} ({run['outcome']})")},
        "template": "plotly_white",
        "height": 420,
        "margin": {"l": 70, "r": 30, "t": 60, "b": 60},
        "xaxis": {"title": {"text": "time since the first sample (s)"}},
        "yaxis": {"title": {"text": "tx throughput per NIC (Gbit/s)"}, "rangemode": "tozero"},
        "shapes": shapes,
        "annotations": notes,
    }
    caption = _caption(phase_means(samples, windows[0]), windows[0]) if windows else ""
    meta = {"run_id": run_id, "t0": t0, "windows": [(w.start, w.end) for w in windows]}
    spec = {"data": traces, "layout": layout}
    return Figure(f"nics-{index}", f"NIC traffic {esc(run_id)}", spec, "", meta, caption)


def nic_figures(tables: Tables) -> list[Figure]:
    """A NIC traffic figure per faulted run with counters."""
    return [nic_figure(tables, run_id, i) for i, run_id in enumerate(nic_runs(tables))]


def _faulted_nic(tables: Tables, run_id: str) -> tuple[str, str] | None:
    """(node, NIC) of the run's first fault window, if it has one."""
    windows = tables.of_run("windows", run_id)
    if windows.empty:
        return None
    first = windows.sort_values("applied_at").iloc[0]
    return str(first["node"]), str(first["nic"])


def _title(run: pd.Series, run_id: str) -> str:
    mode = run.get("R2CC_MODE")
    what = f"{run['scenario']}, R2CC_MODE {mode}" if mode is not None and mode == mode else ""
    return esc(f"{run_id}: {what or run['scenario']} ({run['outcome']})")


def nic_panel_figure(tables: Tables, run_id: str, index: int) -> Figure:
    """One run's per-NIC tx throughput, a small panel per NIC (a row per node, a column per
    NIC), the same y range in all, the fault windows shaded in each, the faulted NIC red."""
    samples = tables.of_run("counters", run_id)
    t0 = float(samples["time"].min())
    windows = run_windows(tables, run_id, float(samples["time"].max()))
    nodes = sorted(samples["node"].astype(str).unique())
    nics = sorted(samples["nic"].astype(str).unique())
    y_max = float(np.nanmax(samples["tx_gbit_s"].to_numpy(float))) if len(samples) else 0.0
    grid, axes = panels.grid(
        len(nodes), len(nics), "s since the first sample", "Gbit/s tx", y_max or None
    )
    target = _faulted_nic(tables, run_id)
    traces, shapes, titles = [], [], []
    by_nic = {(str(n), str(c)): g for (n, c), g in samples.groupby(["node", "nic"], sort=True)}
    for panel, (node, nic) in zip(grid, [(n, c) for n in nodes for c in nics], strict=True):
        faulted = (node, nic) == target
        colour = FAULT_TEXT if faulted else series_colour(nics.index(nic))
        titles.append(panels.title(panel, esc(f"{node}/{nic}{' (faulted)' if faulted else ''}"),
                                   faulted))  # fmt: skip
        shapes += [panels.shade(panel, w.start - t0, w.end - t0) for w in windows]
        group = by_nic.get((node, nic))
        if group is None:
            continue
        group = group.sort_values("time")
        group = group.iloc[:: max(1, len(group) // MAX_POINTS_PER_TRACE)]
        traces.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": esc(f"{node}/{nic}"),
                "xaxis": panel.x,
                "yaxis": panel.y,
                "x": np.round(group["time"].to_numpy(float) - t0, 4).tolist(),
                "y": np.round(group["tx_gbit_s"].to_numpy(float), 5).tolist(),
                "line": {"color": colour, "width": 1},
                "fill": "tozeroy",
                "showlegend": False,
                "hovertemplate": "%{x:.2f} s: %{y:.3g} Gbit/s tx<extra>%{fullData.name}</extra>",
            }
        )
    run = tables.runs[tables.runs["run_id"].astype(str) == run_id].iloc[0]
    layout = {
        "title": {"text": _title(run, run_id), "font": {"size": 14}},
        "template": "plotly_white",
        "height": panels.height(len(nodes)),
        "margin": {"l": 60, "r": 20, "t": 70, "b": 50},
        "shapes": shapes,
        "annotations": titles,
        **axes,
    }
    caption = _caption(phase_means(samples, windows[0]), windows[0]) if windows else ""
    meta = {"run_id": run_id, "t0": t0, "windows": [(w.start, w.end) for w in windows]}
    spec = {"data": traces, "layout": layout}
    return Figure(f"nics-{index}", f"NIC traffic {esc(run_id)}", spec, "", meta, caption)


def nic_panel_figures(tables: Tables) -> list[Figure]:
    """A panel figure of NIC traffic per faulted run with counters (the report's)."""
    return [nic_panel_figure(tables, run_id, i) for i, run_id in enumerate(nic_runs(tables))]
