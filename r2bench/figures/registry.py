"""The paper's figures: each names the table data it needs, draws one figure, checks one claim.

A `FigureDef` has an id, the tables (and columns) it reads, the experiment under
`experiments/paper/` that produces that data, and a `draw` function. `draw` returns a `Drawn`:
a plotly figure (or None) and a `Claim` that says whether what the figure illustrates holds on
the given data, with the numbers. When the data is not there, `draw` raises `MissingInput`
naming what is missing; `render_all` turns that into "run experiments/paper/<x>.yaml".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from r2bench.records.tables import Tables
from r2bench.report import figures as rf

FAULTED_MIN_BYTES = 1 << 20
"""Bandwidth-bound sizes: overheads are summarised from here on (latency noise below)."""
PAPER_TRAINING_PCT = 1.0
PAPER_INFERENCE_PCT = 3.0
STOCK = "stock"
# Paper palette: one colour per mode, stock NCCL grey; dashed = no fault.
MODE_COLOURS = {
    STOCK: "#7f7f7f",
    "0": "#d62728",
    "1": "#1f77b4",
    "2": "#2ca02c",
    "3": "#9467bd",
    "4": "#8c564b",
    "5": "#e377c2",
}
FONT = {"family": "Times New Roman, Times, serif", "size": 15}


class MissingInput(Exception):
    """A figure cannot be drawn: the message says what is missing."""


@dataclass(frozen=True)
class Claim:
    """What the figure illustrates and whether the data supports it."""

    text: str
    verdict: str  # "holds", "does not hold", "not tested"
    numbers: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Drawn:
    """A drawn figure and its claim."""

    figure: rf.Figure
    claim: Claim


@dataclass(frozen=True)
class FigureDef:
    """One figure of the paper set."""

    id: str
    title: str
    needs: tuple[str, ...]  # "table.column" or "table"
    experiment: str  # under experiments/paper/
    draw: Callable[[Tables], Drawn]


# --------------------------------------------------------------------------- helpers


def series_label(library: str, mode: str) -> str:
    """`NCCL` for stock NCCL, `R2CCL mode N` otherwise (paper wording)."""
    if mode == "":
        return "NCCL" if library in ("nccl", "") else library
    return f"R2CCL mode {mode}" if library == "r2ccl" else f"{library} mode {mode}"


def colour(mode: str) -> str:
    return MODE_COLOURS.get(mode or STOCK, "#17becf")


def paper_layout(title: str, **extra: Any) -> dict[str, Any]:
    """White background, serif font, boxed axes: close to the paper's plots."""
    axis = {"showline": True, "mirror": True, "linecolor": "black", "ticks": "outside"}
    layout = rf._layout(title, font=FONT, height=500, width=960)
    for name in ("xaxis", "yaxis"):
        layout[name] = {**axis, **extra.pop(name, {})}
    layout.update(extra)
    return layout


def _faulted(frame: pd.DataFrame) -> pd.Series:
    return frame["scenario"].astype(str) != rf.BASELINE_SCENARIO


def _require(tables: Tables, what: str, ok: bool) -> None:
    if not ok:
        raise MissingInput(what)


def _faulted_runs(tables: Tables) -> pd.DataFrame:
    runs = rf.with_mode(tables.runs)
    _require(tables, "no runs in the sweep", not runs.empty)
    faulted = runs[runs["n_faults"].fillna(0) > 0]
    _require(
        tables, "no run with an injected fault (a scenario other than `none`)", len(faulted) > 0
    )
    return faulted


# --------------------------------------------------------------------------- busbw, one NIC down


def draw_busbw(tables: Tables) -> Drawn:
    """busbw vs size per mode with one NIC failed (solid), no-fault runs dashed."""
    _faulted_runs(tables)
    stats = rf.size_stats(tables.results, "busbw_gbps")
    _require(tables, "no result rows", not stats.empty)
    faulted = stats[_faulted(stats)]
    _require(tables, "no result rows from faulted runs", not faulted.empty)
    traces = []
    for (library, mode, scenario), g in stats.groupby(["library", "mode", "scenario"], sort=True):
        fault = scenario != rf.BASELINE_SCENARIO
        traces.append(
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": rf.esc(f"{series_label(library, mode)}, {scenario}"),
                "x": g["size_bytes"].tolist(),
                "y": g["median"].tolist(),
                "line": {"color": colour(mode), "dash": "solid" if fault else "dash"},
                "marker": {"symbol": "circle" if fault else "circle-open", "size": 6},
                "text": [rf.human_size(s) for s in g["size_bytes"]],
                "hovertemplate": "%{text}: %{y:.2f} GB/s<extra>%{fullData.name}</extra>",
            }
        )
    layout = paper_layout(
        "busbw vs message size with one NIC failed<br><sup>solid: NIC down; dashed: no fault; median over repeats</sup>",
        xaxis={"type": "log", "title": {"text": "message size (bytes)"}},
        yaxis={"title": {"text": "busbw (GB/s)"}, "rangemode": "tozero"},
    )
    figure = rf.Figure(
        "busbw-one-nic-down", "busbw, one NIC down", {"data": traces, "layout": layout}
    )
    return Drawn(figure, _busbw_claim(stats))


def _busbw_claim(stats: pd.DataFrame) -> Claim:
    """R2CCL modes >= 1 still complete every size with a NIC down, at what share of no-fault."""
    big = stats[stats["size_bytes"] >= FAULTED_MIN_BYTES]
    numbers, holds = [], True
    max_size = stats["size_bytes"].max()
    for (library, mode), g in stats.groupby(["library", "mode"], sort=True):
        fault = g[_faulted(g)]
        base = g[~_faulted(g)]
        if fault.empty:
            continue
        reached = int(fault["size_bytes"].max())
        label = series_label(library, mode)
        share = ""
        fb = big[(big["library"] == library) & (big["mode"] == mode)]
        f_med = fb[_faulted(fb)].groupby("size_bytes")["median"].median()
        b_med = fb[~_faulted(fb)].groupby("size_bytes")["median"].median()
        common = f_med.index.intersection(b_med.index)
        if len(common) and not base.empty:
            ratio = float(np.median(f_med[common] / b_med[common])) * 100
            share = f", median {ratio:.0f}% of its no-fault busbw at >= 1 MiB"
        numbers.append(f"{label}: largest size completed {rf.human_size(reached)}{share}")
        if mode not in ("", "0") and reached < max_size:
            holds = False
    r2 = [m for m in stats["mode"].unique() if m not in ("", "0")]
    verdict = "not tested" if not r2 else ("holds" if holds else "does not hold")
    text = "with one NIC failed, R2CCL (modes >= 1) completes every size while NCCL aborts"
    return Claim(text, verdict, numbers)


# --------------------------------------------------------------------------- overhead


def overhead_by_mode(results: pd.DataFrame) -> pd.DataFrame:
    """Median collective-level overhead (%) per (library, mode, scenario) at >= 1 MiB."""
    table = rf.overhead_table(results)
    table = table[table["size_bytes"] >= FAULTED_MIN_BYTES]
    keys = ["library", "mode", "scenario"]
    grouped = table.groupby(keys, sort=True)["overhead_pct"]
    out = grouped.agg(["median", "min", "max", "count"]).reset_index()
    return out.merge(table.groupby(keys)["baseline"].first().reset_index(), on=keys)


def draw_overhead(tables: Tables) -> Drawn:
    """Bars: collective-level overhead of each mode vs the no-fault baseline, beside the
    paper's end-to-end claims (< 1% training, < 3% inference), which are not the same measure."""
    _require(tables, "no result rows", not tables.results.empty)
    by_mode = overhead_by_mode(tables.results)
    _require(
        tables,
        "no series with a no-fault baseline (scenario `none`) and sizes >= 1 MiB to compare",
        not by_mode.empty,
    )
    labels = [
        rf.esc(f"mode {m}" if m else series_label(lib, m)) + f"<br>{rf.esc(sc)}"
        for lib, m, sc in zip(by_mode["library"], by_mode["mode"], by_mode["scenario"], strict=True)
    ]
    med = by_mode["median"].to_numpy(float)
    bars = {
        "type": "bar",
        "name": "measured: collective time vs no-fault (median over sizes >= 1 MiB)",
        "x": labels,
        "y": med.tolist(),
        "marker": {"color": [colour(m) for m in by_mode["mode"]]},
        "error_y": {
            "type": "data",
            "symmetric": False,
            "array": (by_mode["max"].to_numpy(float) - med).tolist(),
            "arrayminus": (med - by_mode["min"].to_numpy(float)).tolist(),
        },
        "hovertemplate": "%{x}: %{y:+.1f}%<extra></extra>",
    }
    lines = [
        _claim_line(PAPER_TRAINING_PCT, "paper: < 1% end-to-end training", "dash"),
        _claim_line(PAPER_INFERENCE_PCT, "paper: < 3% end-to-end inference", "dot"),
    ]
    layout = paper_layout(
        "Overhead vs the no-fault baseline<br><sup>bars: measured per collective; lines: the paper's end-to-end claims</sup>",
        xaxis={"type": "category", "automargin": True, "tickangle": 0},
        yaxis={"title": {"text": "overhead (%)"}, "zeroline": True},
        shapes=[line for line, _ in lines],
        annotations=[
            *(note for _, note in lines),
            {
                "xref": "paper",
                "yref": "paper",
                "x": 0,
                "y": -0.3,
                "showarrow": False,
                "xanchor": "left",
                "align": "left",
                "text": "Bars: time per collective (nccl-tests) vs the no-fault baseline. Lines: "
                "the paper's end-to-end figures.<br>Not the same measure: a job spends only part "
                "of its time in collectives.",
                "font": {"size": 12},
            },
        ],
        margin={"l": 70, "r": 30, "t": 80, "b": 150},
        height=580,
    )
    figure = rf.Figure("overhead-vs-claims", "Overhead vs the paper's claims",
                       {"data": [bars], "layout": layout})  # fmt: skip
    return Drawn(figure, _overhead_claim(by_mode))


def _claim_line(y: float, text: str, dash: str) -> tuple[dict[str, Any], dict[str, Any]]:
    line = {
        "type": "line",
        "xref": "paper",
        "x0": 0,
        "x1": 1,
        "y0": y,
        "y1": y,
        "line": {"color": "black", "width": 1.5, "dash": dash},
    }
    note = {"xref": "paper", "x": 1, "y": y, "text": text, "showarrow": False,
            "xanchor": "right", "yanchor": "bottom", "font": {"size": 12}}  # fmt: skip
    return line, note


def _overhead_claim(by_mode: pd.DataFrame) -> Claim:
    numbers = []
    faulted = by_mode[by_mode["scenario"] != rf.BASELINE_SCENARIO]
    r2 = faulted[~faulted["mode"].isin(["", "0"])]
    for row in by_mode.itertuples(index=False):
        numbers.append(
            f"{series_label(row.library, row.mode)}, {row.scenario}: {row.median:+.1f}% "
            f"(min {row.min:+.1f}%, max {row.max:+.1f}%, {row.count} sizes) vs {row.baseline}"
        )
    text = (
        "collective-level overhead under the fault next to the paper's < 1% (training) and "
        "< 3% (inference) end-to-end overheads; the paper's figures are end to end and are "
        "not tested by a collective benchmark"
    )
    if r2.empty:
        return Claim(text, "not tested", numbers)
    worst = float(r2["median"].max())
    under = "within" if worst < PAPER_INFERENCE_PCT else "above"
    numbers.append(f"worst R2CCL mode under the fault: {worst:+.1f}% ({under} 3% per collective)")
    return Claim(text, "not tested", numbers)


# --------------------------------------------------------------------------- timeline


def _first_faulted_run_per_series(tables: Tables) -> pd.DataFrame:
    runs = _faulted_runs(tables)
    runs = runs.sort_values(["library", "mode", "repeat", "run_id"])
    return runs.drop_duplicates(["library", "mode", "scenario"])


def stall_numbers(tables: Tables, run_id: str) -> dict[str, float | None]:
    """Around the first fault of a run: inject time, longest gap between results after it,
    first R2CC event after it, and whether any result came after the fault."""
    events = tables.events[tables.events["run_id"] == run_id]
    points = rf.timeline_points(tables, run_id)
    times = np.sort(points["timestamp"].to_numpy(float))
    windows = rf.fault_windows(events, float(times.max()) if len(times) else 0.0)
    if not windows:
        return {"inject": None, "stall_s": None, "failover_s": None, "resumed": None}
    start, end = windows[0].start, windows[0].end
    after = times[times >= start]
    before = times[times < start]
    seq = np.concatenate([before[-1:], after])
    stall = float(np.max(np.diff(seq))) if len(seq) > 1 else None
    kinds = events["kind"].astype(str)
    r2cc = events[kinds.str.startswith("r2cc_") & (events["time"] >= start)]["time"]
    failover = float(r2cc.min() - start) if len(r2cc) else None
    return {
        "inject": start,
        "revert": end,
        "stall_s": stall,
        "failover_s": failover,
        "resumed": float(_any_result_after(tables, run_id, start)),
    }


def _any_result_after(tables: Tables, run_id: str, start: float) -> bool:
    """Whether the run produced any result (any size, iteration or row) after `start`."""
    for frame in (tables.iterations, tables.results):
        mine = frame[frame["run_id"] == run_id]["timestamp"]
        if bool((mine >= start).any()):
            return True
    return False


def draw_timeline(tables: Tables) -> Drawn:
    """busbw against time since the fault, first faulted run of each mode, fault window shaded."""
    firsts = _first_faulted_run_per_series(tables)
    traces: list[dict[str, Any]] = []
    numbers: list[str] = []
    shapes: list[dict[str, Any]] = []
    resumed_r2, all_r2 = [], []
    for run in firsts.itertuples(index=False):
        facts = stall_numbers(tables, run.run_id)
        if facts["inject"] is None:
            continue
        t0 = float(facts["inject"])
        pts = rf.timeline_points(tables, run.run_id).sort_values("timestamp")
        pts = pts[pts["placement"] == "out_of_place"]
        label = series_label(run.library, run.mode)
        traces.append(
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": rf.esc(f"{label} ({run.outcome})"),
                "x": (pts["timestamp"].to_numpy(float) - t0).tolist(),
                "y": pts["busbw_gbps"].tolist(),
                "line": {"color": colour(run.mode), "width": 1.5},
                "marker": {"size": 3},
                "hovertemplate": "t=%{x:.3f}s: %{y:.2f} GB/s<extra>%{fullData.name}</extra>",
            }
        )
        if not shapes:
            shapes.append(_window(0.0, float(facts["revert"] or t0) - t0))
        stall = facts["stall_s"]
        failover = facts["failover_s"]
        numbers.append(
            f"{label} ({run.outcome}): longest stall after the fault "
            + (f"{stall:.3f} s" if stall is not None else "n/a")
            + ", first R2CC failover event "
            + (f"+{failover:.3f} s" if failover is not None else "none")
            + (", results continue after the fault" if facts["resumed"] else ", no result after it")
        )
        if run.mode not in ("", "0"):
            all_r2.append(label)
            if facts["resumed"]:
                resumed_r2.append(label)
    _require(tables, "no faulted run with fault events and timestamped results", bool(traces))
    layout = paper_layout(
        "Stall and recovery around the fault<br><sup>first faulted run of each mode; fault window shaded</sup>",
        xaxis={"title": {"text": "time since the fault was injected (s)"}, "zeroline": True},
        yaxis={"title": {"text": "busbw (GB/s), sizes >= 1 MiB"}, "rangemode": "tozero"},
        shapes=shapes,
    )
    figure = rf.Figure("stall-recovery-timeline", "Stall and recovery",
                       {"data": traces, "layout": layout})  # fmt: skip
    text = "R2CCL (modes >= 1) keeps producing results through the fault; NCCL stops"
    if not all_r2:
        return Drawn(figure, Claim(text, "not tested", numbers))
    verdict = "holds" if len(resumed_r2) == len(all_r2) else "does not hold"
    return Drawn(figure, Claim(text, verdict, numbers))


def _window(x0: float, x1: float) -> dict[str, Any]:
    return {"type": "rect", "xref": "x", "yref": "paper", "x0": x0, "x1": x1, "y0": 0, "y1": 1,
            "fillcolor": "rgba(220, 40, 40, 0.15)", "line": {"width": 0}, "layer": "below"}  # fmt: skip


# --------------------------------------------------------------------------- outcomes


def draw_outcomes(tables: Tables) -> Drawn:
    """The outcome matrix (scenario x library/mode) and the survival claim."""
    _faulted_runs(tables)
    figure = rf.outcome_figure(tables)
    spec = figure.spec
    spec["layout"].update({"font": FONT})
    runs = rf.with_mode(tables.runs)
    faulted = runs[runs["n_faults"].fillna(0) > 0]
    numbers, holds, tested = [], True, False
    for (library, mode), g in faulted.groupby(["library", "mode"], sort=True):
        ok = int((g["outcome"] == "ok").sum())
        numbers.append(f"{series_label(library, mode)}: {ok}/{len(g)} faulted runs ok")
        if mode not in ("", "0"):
            tested = True
            holds = holds and ok == len(g)
    text = "under a NIC failure every R2CCL run (modes >= 1) ends ok"
    verdict = "holds" if tested and holds else ("does not hold" if tested else "not tested")
    out = rf.Figure("outcome-matrix", "Outcome matrix", spec)
    return Drawn(out, Claim(text, verdict, numbers))


# --------------------------------------------------------------------------- NIC traffic


def draw_nic_traffic(tables: Tables) -> Drawn:
    """Per-NIC bytes over time: the failed NIC's traffic moving to the others."""
    counters = getattr(tables, "counters", None)
    if counters is None or len(counters) == 0:
        raise MissingInput(
            "a `counters` table (per-NIC port_xmit_data/port_rcv_data samples over time): "
            "records/tables.py builds none yet, and the sweep does not sample NIC counters yet"
        )
    raise MissingInput("the counters table has no figure yet")  # pragma: no cover


FIGURES: tuple[FigureDef, ...] = (
    FigureDef("busbw-one-nic-down", "busbw vs size per mode, one NIC failed",
              ("results.busbw_gbps", "runs.n_faults"), "one-nic-down.yaml", draw_busbw),
    FigureDef("overhead-vs-claims", "overhead of each mode vs the no-fault baseline",
              ("results.time_us", "results.scenario"), "overhead.yaml", draw_overhead),
    FigureDef("stall-recovery-timeline", "stall and recovery around the fault",
              ("iterations.timestamp", "events.fault_inject"), "timeline.yaml", draw_timeline),
    FigureDef("outcome-matrix", "outcome matrix", ("runs.outcome", "runs.n_faults"),
              "one-nic-down.yaml", draw_outcomes),
    FigureDef("nic-traffic-shift", "NIC traffic shift", ("counters",),
              "nic-traffic-shift.yaml", draw_nic_traffic),
)  # fmt: skip
"""Every figure, in the order they are drawn."""
