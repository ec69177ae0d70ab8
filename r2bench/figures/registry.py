"""The paper's figures: each names the table data it needs, draws one figure, checks one claim.

A `FigureDef` has an id, the tables (and columns) it reads, the experiment under
`experiments/paper/` that produces that data, and a `draw` function. `draw` returns a `Drawn`:
a plotly figure (or None) and a `Claim` that says whether what the figure illustrates holds on
the given data, with the numbers. When the data is not there, `draw` raises `MissingInput`
naming what is missing; `render.draw_all` turns that into "run experiments/paper/<x>.yaml".

Runs are grouped as the report groups them (`report.series`): a line or bar holds the runs that
differ only by repeat, busbw and overhead use the runs that ended ok (the rest are counted),
and each overhead names its no-fault baseline. The NIC-failure claims are checked only on
R2CCL runs of modes >= 1 with a NIC fault: process faults and the CPU emulator are drawn but
leave the claim "not tested".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from r2bench.faults.catalogue import FAULT_KINDS
from r2bench.report import charts as rf
from r2bench.report import series as rs
from r2bench.report.colours import FAULT_FILL, FAULT_TEXT, GREY, series_colour
from r2bench.tables.build import Tables

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
EMULATOR_RECIPES = frozenset({"emulated-lib", "emulated-nccl"})
"""Recipes of the CPU emulator: it models R2CCL's behaviour, it is not R2CCL."""
FONT = {"family": "Times New Roman, Times, serif", "size": 15}


def _of_a_process(kind: str) -> bool:
    """A fault kind of a rank (the catalogue's process faults), not of a NIC."""
    known = FAULT_KINDS.get(kind)
    return known is not None and not known.targets_nic


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


def series_label(library: str, mode: str, stock: bool = False) -> str:
    """`NCCL` for stock NCCL, `R2CCL mode N` otherwise (paper wording)."""
    if mode == "":
        return "NCCL" if stock or library in ("nccl", "") else library
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


DASHES = ("solid", "dot", "dash", "dashdot")
LEGEND_ROW_PX = 22
PLOT_PX = 360


def legend_below(n_traces: int) -> dict[str, Any]:
    """Legend under the x axis title, one row per trace, the figure grown to make room."""
    bottom = 110 + LEGEND_ROW_PX * n_traces
    return {
        "legend": {"orientation": "v", "x": 0, "xanchor": "left", "y": -90 / PLOT_PX,
                   "yanchor": "top"},
        "height": 100 + PLOT_PX + bottom,
        "margin": {"l": 70, "r": 30, "t": 100, "b": bottom},
    }  # fmt: skip


def _r2(mode: str) -> bool:
    """An R2CCL mode that claims to survive a NIC failure (modes >= 1)."""
    return mode not in ("", "0")


def _require(needed: str, ok: bool) -> None:
    """MissingInput naming what the figure needs (printed as "needs <needed>") unless ok."""
    if not ok:
        raise MissingInput(needed)


@dataclass(frozen=True)
class Sweep:
    """The tables, the series of every run (report.series: runs that differ only by repeat) and
    per run what the figures need: `context` (what a run shares with its baseline: collective,
    transport, ranks, GPUs, nodes, nccl-tests version, NCCL_* settings), `paper` (the paper's
    name of its library and mode), `n_faults`, `repeat`, `nic_fault`, `emulated` and `claimed`
    (an R2CCL run of mode >= 1 with a NIC fault: what the NIC-failure claims are checked on)."""

    tables: Tables
    info: rs.SeriesInfo
    runs: pd.DataFrame

    def series(self) -> pd.DataFrame:
        """One row per series: its label and parts."""
        return self.runs.drop_duplicates("series")

    def faulted(self) -> pd.DataFrame:
        return self.runs[self.runs["n_faults"] > 0]

    def left_out(self, runs: pd.DataFrame) -> str:
        """`N runs left out (did not end ok): ...` of these runs, or ''."""
        return rs.SeriesInfo(runs, self.info.keys, self.info.env, self.info.shared).left_out()


def fault_kinds(events: pd.DataFrame) -> dict[str, set[str]]:
    """run_id -> kinds of the faults injected in it (first word of each fault_inject event)."""
    inject = events[events["kind"].astype(str) == "fault_inject"]
    out: dict[str, set[str]] = {}
    for run_id, message in zip(inject["run_id"], inject["message"].astype(str), strict=True):
        out.setdefault(str(run_id), set()).add(message.split(" ", 1)[0])
    return out


def sweep_of(tables: Tables) -> Sweep:
    """Every run with its series (report.series grouping) and fault facts."""
    info = rs.series_info(tables.runs)
    wanted = ["run_id", "n_faults", "repeat", "library_recipe", "evidence_verdict"]
    extra = tables.runs[[c for c in wanted if c in tables.runs]]
    runs = info.runs.merge(extra, on="run_id", how="left")
    runs["n_faults"] = runs["n_faults"].fillna(0)
    runs["context"] = [" | ".join(rs.context_key(r, info.keys)) for _, r in runs.iterrows()]
    runs["paper"] = [
        series_label(str(lib), str(mode), bool(stock))
        for lib, mode, stock in zip(runs["library"], runs["mode"], runs["stock"], strict=True)
    ]
    kinds = fault_kinds(tables.events)
    # Process faults (a rank stopped or killed) are not the NIC failures the claims are about;
    # a faulted run whose fault kinds were not recorded counts as a NIC failure.
    runs["nic_fault"] = [
        n > 0 and not (kinds.get(rid) and all(_of_a_process(k) for k in kinds[rid]))
        for rid, n in zip(runs["run_id"], runs["n_faults"], strict=True)
    ]
    runs["emulated"] = runs["library_recipe"].isin(EMULATOR_RECIPES)
    # A NIC failure counts only where its evidence shows it hit traffic (analysis/evidence.py).
    verdicts = runs["evidence_verdict"] if "evidence_verdict" in runs else pd.Series("", runs.index)
    runs["hit_traffic"] = [_hit_traffic(v) for v in verdicts]
    # The runs a claim about R2CCL under a NIC failure is checked on.
    runs["claimed"] = (
        runs["nic_fault"] & runs["hit_traffic"] & runs["mode"].map(_r2) & ~runs["emulated"]
    )
    return Sweep(tables, info, runs)


def _faulted_runs(sw: Sweep) -> pd.DataFrame:
    _require("runs in the sweep", not sw.runs.empty)
    faulted = sw.faulted()
    _require("a run with an injected fault (a scenario other than `none`)", len(faulted) > 0)
    return faulted


HIT_VERDICTS = frozenset({"hit", "between_collectives"})
"""Failure-evidence verdicts of a fault that met live traffic (analysis/evidence.py)."""


def _hit_traffic(verdicts: object) -> bool:
    """Whether every NIC fault of a run hit traffic (its `evidence_verdict`, comma-joined)."""
    text = verdicts if isinstance(verdicts, str) else ""
    return bool(text) and all(v in HIT_VERDICTS for v in text.split(","))


def _untested_notes(sw: Sweep) -> list[str]:
    """Why faulted runs of modes >= 1 do not count for a claim about R2CCL under a NIC
    failure: every fault is a process's, the library is the CPU emulator, or the evidence does
    not show the fault hit traffic."""
    faulted = sw.faulted()
    notes = []
    unproven = faulted[faulted["nic_fault"] & ~faulted["hit_traffic"] & ~faulted["emulated"]]
    if not unproven.empty:
        notes.append(
            f"{len(unproven)} faulted runs have no evidence that their fault hit traffic "
            "(verdict unknown, no counters, or the fault touched nothing): not counted"
        )
    if not faulted.empty and not bool(faulted["nic_fault"].any()):
        kinds = sorted({k for ks in fault_kinds(sw.tables.events).values() for k in ks})
        notes.append(
            f"every fault here is a process fault ({', '.join(kinds)}), not a NIC failure: "
            "the claim is about a NIC failure"
        )
    emulated = faulted[faulted["emulated"]]
    if not emulated.empty:
        recipes = ", ".join(sorted(set(emulated["library_recipe"].astype(str))))
        notes.append(
            f"{len(emulated)} faulted runs are of the CPU emulator ({recipes}), not R2CCL: "
            "they exercise the harness, not the claim"
        )
    return notes


def _baseline_of(series: pd.DataFrame, row: pd.Series) -> str | None:
    """The no-fault series of the same library, mode and context as `row`, if any."""
    same = series[
        (series["context"] == row["context"])
        & (series["library"] == row["library"])
        & (series["mode"] == row["mode"])
        & (series["scenario"] == rf.BASELINE_SCENARIO)
    ]
    return str(same["series"].iloc[0]) if len(same) else None


# --------------------------------------------------------------------------- busbw, one NIC down


def draw_busbw(tables: Tables) -> Drawn:
    """busbw vs size per series of runs that ended ok, faulted solid, no-fault dashed; only
    series that share a context (collective, transport, scale, NCCL_* settings) with a faulted
    series, so every line is comparable with the others."""
    sw = sweep_of(tables)
    contexts = set(_faulted_runs(sw)["context"])
    attrs = sw.series()[["series", "paper", "library", "mode", "scenario", "context"]]
    stats = rf.size_stats(rf.series_rows(tables, sw.info), "busbw_gbps").merge(attrs, on="series")
    stats = stats[stats["context"].isin(contexts)]
    _require("result rows of runs that ended ok beside the faulted runs", not stats.empty)
    traces = []
    for name, g in stats.groupby("series", sort=True):
        first = g.iloc[0]
        fault = first["scenario"] != rf.BASELINE_SCENARIO
        traces.append(
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": rf.esc(name),
                "x": g["size_bytes"].tolist(),
                "y": g["median"].tolist(),
                "line": {"color": colour(first["mode"]), "dash": "solid" if fault else "dash"},
                "marker": {"symbol": "circle" if fault else "circle-open", "size": 6},
                "text": [rf.human_size(s) for s in g["size_bytes"]],
                "hovertemplate": "%{text}: %{y:.2f} GB/s<extra>%{fullData.name}</extra>",
            }
        )
    mine = sw.runs[sw.runs["context"].isin(contexts)]
    left = sw.left_out(mine)
    sub = "solid: with the fault; dashed: no fault; median over repeats of runs that ended ok"
    layout = paper_layout(
        f"busbw vs message size with the fault<br><sup>{rf.esc(sub)}"
        + (f"<br>{rf.esc(left)}" if left else "")
        + "</sup>",
        xaxis=rf.size_axis(stats["size_bytes"]),
        yaxis={"title": {"text": "busbw (GB/s)"}, "rangemode": "tozero"},
        **legend_below(len(traces)),
    )
    spec = {"data": traces, "layout": layout}
    figure = rf.Figure("busbw-one-nic-down", "busbw, one NIC down", spec, meta={"left_out": left})
    return Drawn(figure, _busbw_claim(sw, mine, stats))


def _reach(results: pd.DataFrame) -> pd.Series:
    """run_id -> largest size with a result row (any outcome: how far a run got)."""
    rows = results[results["busbw_gbps"].notna()]
    return rows.groupby("run_id")["size_bytes"].max()


def _share(stats: pd.DataFrame, series: pd.DataFrame, names: list[str]) -> float | None:
    """Median over the faulted series `names` and sizes >= 1 MiB of busbw with the fault / the
    same library and mode without it (same context), in %."""
    ratios: list[float] = []
    med = stats.set_index(["series", "size_bytes"])["median"]
    for name in names:
        base = _baseline_of(series, series[series["series"] == name].iloc[0])
        if base is None or name not in med.index or base not in med.index:
            continue
        mine, ref = med.loc[name], med.loc[base]
        common = [s for s in mine.index if s >= FAULTED_MIN_BYTES and s in ref.index and ref[s]]
        ratios += [float(mine[s] / ref[s]) for s in common]
    return float(np.median(ratios)) * 100 if ratios else None


def _busbw_claim(sw: Sweep, runs: pd.DataFrame, stats: pd.DataFrame) -> Claim:
    """R2CCL modes >= 1 complete every size with a NIC down (runs that ended ok and reached the
    largest size of their context), at what share of their no-fault busbw."""
    reach = _reach(sw.tables.results)
    runs = runs.assign(reach=runs["run_id"].map(reach).fillna(0))
    largest = runs.groupby("context")["reach"].max()
    runs = runs.assign(
        done=(runs["outcome"] == rs.OK) & (runs["reach"] >= runs["context"].map(largest))
    )
    faulted = runs[runs["n_faults"] > 0]
    series = sw.series()
    numbers = []
    for (paper, scenario), g in faulted.groupby(["paper", "scenario"], sort=True):
        share = _share(stats, series, sorted(set(g[g["outcome"] == rs.OK]["series"])))
        numbers.append(
            f"{paper}, {scenario}: {int(g['done'].sum())}/{len(g)} faulted runs completed every "
            f"size (largest reached {rf.human_size(float(g['reach'].max()))})"
            + (f", median {share:.0f}% of its no-fault busbw at >= 1 MiB" if share else "")
        )
    tested = faulted[faulted["claimed"]]
    numbers += _untested_notes(sw)
    text = "with one NIC failed, R2CCL (modes >= 1) completes every size while NCCL aborts"
    if tested.empty:
        return Claim(text, "not tested", numbers)
    return Claim(text, "holds" if bool(tested["done"].all()) else "does not hold", numbers)


# --------------------------------------------------------------------------- overhead


def overhead_by_series(tables: Tables, sw: Sweep) -> pd.DataFrame:
    """Median collective-level overhead (%) of each series vs its named baseline (series.py:
    stock NCCL without a fault in the same context, else the same library and mode), over
    sizes >= 1 MiB, runs that ended ok."""
    table = rf.overhead_table(tables, sw.info)
    table = table[table["size_bytes"] >= FAULTED_MIN_BYTES]
    grouped = table.groupby(["series", "baseline"], sort=True)["overhead_pct"]
    out = grouped.agg(["median", "min", "max", "count"]).reset_index()
    attrs = sw.series()[["series", "paper", "mode", "scenario", "collective", "emulated"]]
    out = out.merge(attrs, on="series")
    out["faulted"] = out["scenario"] != rf.BASELINE_SCENARIO  # no-fault bars first
    return out.sort_values(["collective", "faulted", "scenario", "mode", "paper"])


def draw_overhead(tables: Tables) -> Drawn:
    """Bars: collective-level overhead of each series vs its no-fault baseline, beside the
    paper's end-to-end claims (< 1% training, < 3% inference), which are not the same measure."""
    _require("result rows", not tables.results.empty)
    sw = sweep_of(tables)
    by = overhead_by_series(tables, sw)
    _require(
        "a series with a no-fault baseline (scenario `none`) and sizes >= 1 MiB to compare",
        not by.empty,
    )
    labels, common = bar_labels([str(s) for s in by["series"]])
    med = by["median"].to_numpy(float)
    bars = {
        "type": "bar",
        "name": "measured: collective time vs no-fault (median over sizes >= 1 MiB)",
        "x": labels,
        "y": med.tolist(),
        "marker": {"color": [colour(m) for m in by["mode"]]},
        "error_y": {
            "type": "data",
            "symmetric": False,
            "array": (by["max"].to_numpy(float) - med).tolist(),
            "arrayminus": (med - by["min"].to_numpy(float)).tolist(),
        },
        "customdata": [rf.esc(b) for b in by["baseline"]],
        "hovertemplate": "%{x}: %{y:+.1f}% vs %{customdata}<extra></extra>",
    }
    lines = [
        _claim_line(PAPER_TRAINING_PCT, "paper: < 1% end-to-end training", "dash"),
        _claim_line(PAPER_INFERENCE_PCT, "paper: < 3% end-to-end inference", "dot"),
    ]
    bases = sorted(set(by["baseline"]))
    left = sw.info.left_out()
    note = (
        "Bars: time per collective (nccl-tests, runs that ended ok) vs the no-fault baseline"
        + ("s" if len(bases) > 1 else "")
        + f":<br>{'; '.join(rf.esc(b) for b in bases)}; whiskers: min..max over sizes >= 1 MiB."
        + "<br>Lines: the paper's end-to-end figures. Not the same measure: a job spends only "
        "part of its time in collectives." + (f"<br>{rf.esc(left)}." if left else "")
    )
    label_lines = max(label.count("<br>") + 1 for label in labels)
    plot_px = 370
    sub = "bars: measured per collective; lines: the paper's end-to-end claims"
    if common:
        sub += "<br>every bar: " + rf.esc(" · ".join(common))
    layout = paper_layout(
        f"Overhead vs the no-fault baseline<br><sup>{sub}</sup>",
        xaxis={"type": "category", "automargin": True, "tickangle": 0},
        yaxis={"title": {"text": "overhead (%)"}, "zeroline": True},
        shapes=[line for line, _ in lines],
        annotations=[
            *(a for _, a in lines),
            {
                "xref": "paper",
                "yref": "paper",
                "x": 0,
                "y": -(40 + 20 * label_lines) / plot_px,
                "showarrow": False,
                "xanchor": "left",
                "yanchor": "top",
                "align": "left",
                "text": note,
                "font": {"size": 12},
            },
        ],
        margin={"l": 70, "r": 30, "t": 100, "b": 110 + 20 * label_lines},
        height=100 + plot_px + 110 + 20 * label_lines,
        # Each bar as wide as its longest label line (about 8 px a character), so that the
        # labels of neighbouring bars never run into each other.
        width=max(960, len(labels) * max(110, 8 * _longest_line(labels) + 16)),
    )
    spec = {"data": [bars], "layout": layout}
    meta = {"baselines": bases, "left_out": left}
    figure = rf.Figure("overhead-vs-claims", "Overhead vs the paper's claims", spec, meta=meta)
    return Drawn(figure, _overhead_claim(by))


def bar_labels(series: list[str]) -> tuple[list[str], list[str]]:
    """Bar labels (escaped, one part of the series label a line) without the parts every
    series has, and those common parts (plain text)."""
    parts = [label.split(" · ") for label in series]
    common = [p for p in parts[0] if all(p in other for other in parts)] if parts else []
    labels = ["<br>".join(rf.esc(p) for p in mine if p not in common) or "all" for mine in parts]
    return labels, common


def _longest_line(labels: list[str]) -> int:
    """Characters in the longest line of any label (lines split at `<br>`)."""
    return max((len(line) for label in labels for line in label.split("<br>")), default=0)


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


def _overhead_claim(by: pd.DataFrame) -> Claim:
    numbers = [
        f"{row.series}: {row.median:+.1f}% (min {row.min:+.1f}%, max {row.max:+.1f}%, "
        f"{row.count} sizes) vs {row.baseline}"
        for row in by.itertuples(index=False)
    ]
    text = (
        "collective-level overhead under the fault next to the paper's < 1% (training) and "
        "< 3% (inference) end-to-end overheads; the paper's figures are end to end and are "
        "not tested by a collective benchmark"
    )
    r2 = by[by["mode"].map(_r2) & ~by["emulated"].astype(bool)]
    for label, part in (
        ("under the fault", r2[r2["scenario"] != rf.BASELINE_SCENARIO]),
        ("without a fault", r2[r2["scenario"] == rf.BASELINE_SCENARIO]),
    ):
        if part.empty:
            continue
        worst = float(part["median"].max())
        under = "within" if worst < PAPER_INFERENCE_PCT else "above"
        numbers.append(f"worst R2CCL mode >= 1 {label}: {worst:+.1f}% ({under} 3% per collective)")
    return Claim(text, "not tested", numbers)


# --------------------------------------------------------------------------- timeline


def _first_faulted_run_per_series(sw: Sweep) -> pd.DataFrame:
    runs = _faulted_runs(sw).sort_values(["series", "repeat", "run_id"])
    return runs.drop_duplicates("series")


def stall_numbers(tables: Tables, run_id: str) -> dict[str, float | None]:
    """Around the first fault of a run: when it was applied and reverted (the windows table),
    the stall (the runs table's `stall_s`), the first R2CC event after it, and whether any
    result came after it. Windows and stall are those of `analysis.parsedrun` and `analysis.metrics`:
    the report's recovery table and timelines read the same ones."""
    events = tables.of_run("events", run_id)
    points = rf.timeline_points(tables, run_id)
    times = np.sort(points["timestamp"].to_numpy(float))
    windows = rf.run_windows(tables, run_id, float(times.max()) if len(times) else 0.0)
    if not windows:
        return {"inject": None, "stall_s": None, "failover_s": None, "resumed": None}
    start, end = windows[0].start, windows[0].end
    runs = tables.runs[tables.runs["run_id"] == run_id]
    stall = runs["stall_s"].iloc[0] if "stall_s" in runs and len(runs) else None
    kinds = events["kind"].astype(str)
    r2cc = events[kinds.str.startswith("r2cc_") & (events["time"] >= start)]["time"]
    failover = float(r2cc.min() - start) if len(r2cc) else None
    return {
        "inject": start,
        "revert": end,
        "stall_s": None if stall is None or stall != stall else float(stall),
        "failover_s": failover,
        "resumed": float(_any_result_after(tables, run_id, start)),
    }


def _any_result_after(tables: Tables, run_id: str, start: float) -> bool:
    """Whether the run produced any result (any size, iteration or row) after `start`."""
    for frame in (tables.iterations_of([run_id]), tables.results):
        mine = frame[frame["run_id"] == run_id]["timestamp"]
        if bool((mine >= start).any()):
            return True
    return False


def draw_timeline(tables: Tables) -> Drawn:
    """busbw against time since the fault, first faulted run of each series (any outcome: a
    crash is what this figure shows), each scenario's fault window shaded."""
    sw = sweep_of(tables)
    firsts = _first_faulted_run_per_series(sw)
    several = firsts["context"].nunique() > 1
    scenarios = sorted(set(firsts["scenario"]))
    traces: list[dict[str, Any]] = []
    numbers: list[str] = []
    windows: dict[str, float] = {}
    resumed_r2, all_r2 = [], []
    for run in firsts.itertuples(index=False):
        facts = stall_numbers(tables, run.run_id)
        if facts["inject"] is None:
            continue
        t0 = float(facts["inject"])
        pts = rf.timeline_points(tables, run.run_id).sort_values("timestamp")
        pts = pts[pts["placement"] == "out_of_place"]
        label = str(run.series) if several else f"{run.paper}, {run.scenario}"
        dash = DASHES[scenarios.index(run.scenario) % len(DASHES)]
        traces.append(
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": rf.esc(f"{label} ({run.outcome})"),
                "x": (pts["timestamp"].to_numpy(float) - t0).tolist(),
                "y": pts["busbw_gbps"].tolist(),
                "line": {"color": colour(run.mode), "width": 1.5, "dash": dash},
                "marker": {"size": 3},
                "hovertemplate": "t=%{x:.3f}s: %{y:.2f} GB/s<extra>%{fullData.name}</extra>",
            }
        )
        windows.setdefault(str(run.scenario), float(facts["revert"] or t0) - t0)
        stall = facts["stall_s"]
        failover = facts["failover_s"]
        numbers.append(
            f"{label} ({run.outcome}): longest stall after the fault "
            + (f"{stall:.3f} s" if stall is not None else "n/a")
            + ", first R2CC failover event "
            + (f"+{failover:.3f} s" if failover is not None else "none")
            + (", results continue after the fault" if facts["resumed"] else ", no result after it")
        )
        if run.claimed:
            all_r2.append(label)
            if facts["resumed"]:
                resumed_r2.append(label)
    _require("a faulted run with fault events and timestamped results", bool(traces))
    shapes = [_window(0.0, end) for end in windows.values()]
    notes = [
        {"x": end, "y": 1 - 0.05 * i, "xref": "x", "yref": "paper", "text": rf.esc(f"{sc} reverted"),
         "showarrow": False, "xanchor": "left", "yanchor": "top", "font": {"size": 11}}
        for i, (sc, end) in enumerate(windows.items())
    ]  # fmt: skip
    layout = paper_layout(
        "Stall and recovery around the fault<br><sup>first faulted run of each series; fault window shaded</sup>",
        xaxis={"title": {"text": "time since the fault was injected (s)"}, "zeroline": True},
        yaxis={"title": {"text": "busbw (GB/s), sizes >= 1 MiB"}, "rangemode": "tozero"},
        shapes=shapes,
        annotations=notes,
        **legend_below(len(traces)),
    )
    figure = rf.Figure("stall-recovery-timeline", "Stall and recovery",
                       {"data": traces, "layout": layout})  # fmt: skip
    numbers += _untested_notes(sw)
    text = "R2CCL (modes >= 1) keeps producing results through a NIC failure; NCCL stops"
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
    sw = sweep_of(tables)
    faulted = _faulted_runs(sw)
    figure = rf.outcome_figure(tables)
    spec = figure.spec
    spec["layout"].update({"font": FONT})
    numbers = []
    for paper, g in faulted.groupby("paper", sort=True):
        ok = int((g["outcome"] == rs.OK).sum())
        numbers.append(f"{paper}: {ok}/{len(g)} faulted runs ok")
        if g["scenario"].nunique() > 1:
            for scenario, s in g.groupby("scenario", sort=True):
                n_ok = int((s["outcome"] == rs.OK).sum())
                numbers.append(f"{paper}, {scenario}: {n_ok}/{len(s)} ok")
    tested = faulted[faulted["claimed"]]
    numbers += _untested_notes(sw)
    text = "under a NIC failure every R2CCL run (modes >= 1) ends ok"
    if tested.empty:
        verdict = "not tested"
    else:
        verdict = "holds" if bool((tested["outcome"] == rs.OK).all()) else "does not hold"
    out = rf.Figure("outcome-matrix", "Outcome matrix", spec)
    return Drawn(out, Claim(text, verdict, numbers))


# --------------------------------------------------------------------------- NIC traffic


def draw_nic_traffic(tables: Tables) -> Drawn:
    """Per-NIC throughput over time: the failed NIC's traffic moving to the others.

    The run drawn is the first faulted run that ended ok (one that had traffic to shift), else
    the first faulted run. Claim: during the fault the failed NIC carries under a tenth of its
    earlier traffic while the other NICs of its node carry the traffic on: at least half their
    earlier throughput (a failover stall inside the window lowers the mean) and a larger share
    of the node's bytes than before. Capped NICs cannot go faster, so a rise in their own rate
    is not required."""
    from r2bench.report import nics

    counters = getattr(tables, "counters", None)
    runs = nics.nic_runs(tables) if counters is not None else []
    if not runs:
        raise MissingInput(
            "a faulted run with NIC counters (`node/<node>/counters.tsv`: the sweep samples "
            "them unless R2BENCH_COUNTERS_MS=0)"
        )
    ended_ok = set(tables.runs[tables.runs["outcome"].astype(str) == rs.OK]["run_id"].astype(str))
    run_id = next((r for r in runs if r in ended_ok), runs[0])
    figure = nics.nic_figure(tables, run_id, 0)
    events = tables.of_run("events", run_id)
    samples = tables.of_run("counters", run_id)
    windows = rf.run_windows(tables, run_id, float(samples["time"].max()))
    injects = events[events["kind"].astype(str) == "fault_inject"]
    if not windows or injects.empty:
        raise MissingInput("a NIC fault with both its inject and revert recorded")
    node, nic = str(injects.iloc[0]["host"]), str(injects.iloc[0]["nic"])
    means = nics.phase_means(samples, windows[0])
    mine = means[(means["node"] == node) & (means["nic"] == nic)]
    others = means[(means["node"] == node) & (means["nic"] != nic)]
    numbers = [figure.caption] if figure.caption else []
    text = "the failed NIC goes quiet and the node's other NICs carry the traffic on"
    if mine.empty or others.empty:
        verdict = "not tested"
        numbers.append(f"no counters for the failed NIC {node}/{nic} or for its node's others")
    else:
        before, during = float(mine["before"].iloc[0]), float(mine["during"].iloc[0])
        rest_before, rest_during = float(others["before"].sum()), float(others["during"].sum())
        share_before = rest_before / (rest_before + before) if rest_before + before > 0 else 0.0
        share_during = rest_during / (rest_during + during) if rest_during + during > 0 else 0.0
        quiet = before > 0 and during < 0.1 * before
        carried_on = rest_during >= 0.5 * rest_before and share_during > share_before
        verdict = "holds" if quiet and carried_on else "does not hold"
        numbers.append(
            f"{node}/{nic}: {before:.3f} -> {during:.3f} Gbit/s; its node's other NICs "
            f"{rest_during - rest_before:+.3f} Gbit/s together ({rest_before:.3f} -> "
            f"{rest_during:.3f}), their share of {node}'s tx {share_before:.0%} -> "
            f"{share_during:.0%} (run {run_id})"
        )
    report_layout = figure.spec["layout"]
    layout = paper_layout(
        f"Traffic per NIC around the fault<br><sup>{rf.esc(run_id)}; fault window shaded</sup>",
        xaxis=report_layout["xaxis"],
        yaxis=report_layout["yaxis"],
        shapes=report_layout["shapes"],
        annotations=report_layout["annotations"],
        **legend_below(len(figure.spec["data"])),
    )
    out = rf.Figure("nic-traffic-shift", "NIC traffic shift", {**figure.spec, "layout": layout})
    return Drawn(out, Claim(text, verdict, numbers))


# --------------------------------------------------------------------------- R-2CCL's model


def draw_model(tables: Tables) -> Drawn:
    """Measured T/T_nf of each failure series against R-2CCL's model (`report.model`).

    Claim: every failure series of R2CC_MODE 2 or 3 with a prediction is within 5 % of the
    model, out-of-place and in-place."""
    from r2bench.analysis.r2cc_model import FLAG_ABOVE
    from r2bench.report.model import model_figure, model_frame

    frame = model_frame(tables)
    _require(
        "runs of R2CC_MODE 2 or 3 under a declared or real NIC failure (R-2CCL's artifact "
        "logs: `r2bench import` upstream's examples/cloudlab_r7525/logs)",
        not frame.empty,
    )
    predicted = frame.dropna(subset=["predicted"])
    _require(
        "a failure series whose settings give X (NCCL_IB_HCA and R2CC_FAILED_HCA or "
        "R2CC_FAILED_NIC_COUNT) and a healthy series beside it; here: "
        + "; ".join(sorted({str(n) for n in frame["note"] if n})),
        not predicted.empty,
    )
    numbers = [
        f"{r.schedule}{'' if r.k is None or r.k != r.k else f' K={int(r.k)}'} "
        f"(n={r.n}, X={r.x:.3f}, {int(r.size_bytes)} B): measured "
        f"{r.measured_out_of_place:.4f} / {r.measured_in_place:.4f} vs {r.predicted:.4f} "
        f"({r.deviation_out_of_place * 100:+.2f} % / {r.deviation_in_place * 100:+.2f} %)"
        for r in predicted.itertuples(index=False)
    ]
    numbers += [
        f"{r.series}: {r.note}"
        for r in frame.itertuples(index=False)
        if r.predicted != r.predicted or r.predicted is None
    ]
    text = f"every failure series is within {FLAG_ABOVE:.0%} of R-2CCL's model"
    verdict = "does not hold" if bool(predicted["flagged"].any()) else "holds"
    figure = model_figure(frame)
    layout = paper_layout(
        "T/T<sub>nf</sub>: measured vs R-2CCL's model",
        yaxis=figure.spec["layout"]["yaxis"],
        barmode="group",
        **legend_below(len(figure.spec["data"])),
    )
    out = rf.Figure("r2cc-model", "measured vs predicted T/T_nf", {**figure.spec, "layout": layout})
    return Drawn(out, Claim(text, verdict, numbers))


# --------------------------------------------------------------------------- training
# Step time per library and scenario with the overhead against the baseline library, and step
# time through the cut, from the `training_checks` (a row per training run: R-2CCL's test 09
# checks against its baseline run, `analysis.training`) and `training` (a row per update)
# tables. The claims are the paper's "< 1 % training overhead" through a NIC failure and that
# R-2CCL trains on through it; only real R-2CCL runs (not the CPU emulator) under a NIC fault
# that hit traffic count for them, as for the collective claims (`sweep_of`).

NEEDS = "training runs (a workload that prints `#train` lines: experiments/training.yaml)"
_FACTS = ["run_id", "paper", "mode", "scenario", "outcome", "claimed", "repeat"]


def training_runs(tables: Tables) -> pd.DataFrame:
    """Every training run: its `training_checks` row with its paper label, mode, scenario,
    outcome and whether the NIC-failure claim is checked on it (`registry.sweep_of`)."""
    checks = tables.training_checks
    if checks.empty:
        raise MissingInput(NEEDS)
    facts = sweep_of(tables).runs
    facts = facts[[c for c in _FACTS if c in facts.columns]]
    joined = checks.drop(columns=["scenario", "repeat"]).merge(facts, on="run_id", how="inner")
    if joined.empty:
        raise MissingInput(NEEDS)
    return joined.sort_values(["paper", "scenario", "run_id"], kind="stable")


def _fault_free_first(scenarios: list[str]) -> list[str]:
    return sorted(scenarios, key=lambda s: (s != rf.BASELINE_SCENARIO, s))


# --------------------------------------------------------------------------- step times


def draw_training_step_time(tables: Tables) -> Drawn:
    """Median step time per library (bars) and scenario (one bar group each, fault free first),
    labelled with the overhead against the baseline library's fault-free run; the step time
    of the update each fault hit starred above its bar."""
    runs = training_runs(tables)
    libraries = sorted(set(runs["paper"]))
    scenarios = _fault_free_first(sorted(set(runs["scenario"])))
    traces: list[dict[str, Any]] = []
    for i, scenario in enumerate(scenarios):
        mine = runs[runs["scenario"] == scenario].groupby("paper", sort=True)
        median = mine["step_s_median"].median()
        overhead = mine["overhead_pct"].median()
        traces.append(
            {
                "type": "bar",
                "name": rf.esc(f"median step, {scenario}"),
                "x": [rf.esc(p) for p in median.index],
                "y": median.tolist(),
                "offsetgroup": str(i),
                "text": [_training_overhead_text(v) for v in overhead.reindex(median.index)],
                "textposition": "outside",
                "marker": {"color": GREY if scenario == rf.BASELINE_SCENARIO
                           else series_colour(i)},
                "hovertemplate": "%{x}: median step %{y:.3g} s (%{text})<extra>"
                + rf.esc(scenario) + "</extra>",
            }
        )  # fmt: skip
        hit = mine["hit_step_s"].median().dropna()
        if len(hit):
            traces.append(
                {
                    "type": "scatter",
                    "mode": "markers",
                    "name": rf.esc(f"the update the fault hit, {scenario}"),
                    "x": [rf.esc(p) for p in hit.index],
                    "y": hit.tolist(),
                    "offsetgroup": str(i),
                    "marker": {"symbol": "star", "size": 13, "color": FAULT_TEXT},
                    "hovertemplate": "%{x}: the hit update took %{y:.3g} s<extra></extra>",
                }
            )
    sub = "bars: median step time; label: against the baseline library's fault-free run; star: the update the fault hit"
    layout = paper_layout(
        f"Training step time per library and scenario<br><sup>{rf.esc(sub)}</sup>",
        xaxis={"title": {"text": "library"}, "type": "category", "categoryarray": libraries},
        yaxis={"title": {"text": "step time (s)"}, "rangemode": "tozero"},
        barmode="group",
        scattermode="group",
        **legend_below(len(traces)),
    )
    figure = rf.Figure("training-step-time", "Training step time",
                       {"data": traces, "layout": layout})  # fmt: skip
    return Drawn(figure, _training_overhead_claim(tables, runs))


def _training_overhead_text(value: Any) -> str:
    if value is None or value != value:
        return "baseline"
    return f"{float(value):+.1f} %"


def _training_overhead_claim(tables: Tables, runs: pd.DataFrame) -> Claim:
    """The paper's < 1 % training overhead: every real R-2CCL run under a NIC fault that hit
    traffic trained to its end within 1 % of the baseline library's median step."""
    numbers = []
    for row in runs.itertuples(index=False):
        parts = [f"{row.paper}, {row.scenario} ({row.outcome}): median step "
                 f"{_training_seconds(row.step_s_median)}"]  # fmt: skip
        if row.overhead_pct == row.overhead_pct and row.overhead_pct is not None:
            parts.append(f"{row.overhead_pct:+.2f} % against the baseline library's")
        if row.hit_step_s == row.hit_step_s and row.hit_step_s is not None:
            parts.append(
                f"update {row.hit_update} (hit) took {_training_seconds(row.hit_step_s)} against a "
                f"median of {_training_seconds(row.step_s_median_before)} before it"
            )
        numbers.append(", ".join(parts))
    numbers += _untested_notes(sweep_of(tables))
    text = (
        f"R-2CCL trains through a NIC failure within {PAPER_TRAINING_PCT:g} % of the "
        "baseline library's step time (the paper's < 1 % training overhead)"
    )
    tested = runs[runs["claimed"].astype(bool)]
    if tested.empty:
        return Claim(text, "not tested", numbers)
    fine = (tested["outcome"] == "ok") & (tested["overhead_pct"] < PAPER_TRAINING_PCT)
    return Claim(text, "holds" if bool(fine.all()) else "does not hold", numbers)


def _training_seconds(value: Any) -> str:
    return "n/a" if value is None or value != value else f"{float(value):.3g} s"


# --------------------------------------------------------------------------- through the cut


def draw_training_timeline(tables: Tables) -> Drawn:
    """Step time against the time since the fault was applied, the first faulted training
    run of each library and scenario (any outcome: a crash is what it shows), the fault window
    shaded and each hit update starred."""
    runs = training_runs(tables)
    faulted = runs[runs["hit_update"].notna() | runs["run_id"].isin(tables.windows["run_id"])]
    firsts = faulted.sort_values(["paper", "scenario", "repeat", "run_id"]).drop_duplicates(
        ["paper", "scenario"]
    )
    if firsts.empty:
        raise MissingInput("a training run with a fault (a scenario other than `none`)")
    scenarios = sorted(set(firsts["scenario"]))
    traces: list[dict[str, Any]] = []
    numbers: list[str] = []
    ends: list[float] = []
    for row in firsts.itertuples(index=False):
        updates = tables.training[tables.training["run_id"] == row.run_id]
        windows = rf.run_windows(tables, row.run_id, float(updates["end"].max() or 0.0))
        if not windows or updates.empty:
            continue
        t0 = windows[0].start
        ends.append(windows[0].end - t0)  # each run's own: a link may come back later
        updates = updates.sort_values("update")
        dash = DASHES[scenarios.index(row.scenario) % len(DASHES)]
        label = f"{row.paper}, {row.scenario} ({row.outcome})"
        traces.append(_timeline_trace(updates, t0, label, colour(str(row.mode)), dash))
        hit = updates[updates["update"] == row.hit_update]
        if len(hit):
            traces.append(_hit_star(hit, t0, label))
        after = int((updates["start"] >= windows[0].end).sum())
        numbers.append(
            f"{label}: the fault hit update {_update_number(row.hit_update)}"
            + (
                f", which took {_training_seconds(row.hit_step_s)}"
                if len(hit)
                else ", never completed"
            )
            + f"; {after} updates started after the link came back"
        )
    if not traces:
        raise MissingInput("a faulted training run with its fault window and updates")
    layout = paper_layout(
        "Step time through the cut<br><sup>first faulted run of each library and scenario; "
        "fault window shaded; star: the update the fault hit</sup>",
        xaxis={"title": {"text": "time since the fault was applied (s)"}, "zeroline": True},
        yaxis={"title": {"text": "step time (s)"}, "rangemode": "tozero"},
        shapes=[_cut_window(end) for end in sorted(set(ends))],
        **legend_below(len(traces)),
    )
    figure = rf.Figure("training-step-timeline", "Step time through the cut",
                       {"data": traces, "layout": layout})  # fmt: skip
    numbers += _untested_notes(sweep_of(tables))
    text = "R-2CCL trains on through a NIC failure to the end of training; NCCL stops"
    tested = firsts[firsts["claimed"].astype(bool)]
    if tested.empty:
        return Drawn(figure, Claim(text, "not tested", numbers))
    verdict = "holds" if bool((tested["outcome"] == "ok").all()) else "does not hold"
    return Drawn(figure, Claim(text, verdict, numbers))


def _update_number(value: Any) -> str:
    return "none" if value is None or value != value else str(int(value))


def _timeline_trace(
    updates: pd.DataFrame, t0: float, label: str, line: str, dash: str
) -> dict[str, Any]:
    return {
        "type": "scatter",
        "mode": "lines+markers",
        "name": rf.esc(label),
        "x": (updates["end"].to_numpy(float) - t0).tolist(),
        "y": updates["step_s"].tolist(),
        "text": [f"update {n}" for n in updates["update"]],
        "line": {"color": line, "width": 1.5, "dash": dash},
        "marker": {"size": 4},
        "hovertemplate": "t=%{x:.3f}s %{text}: %{y:.3g} s<extra>%{fullData.name}</extra>",
    }


def _hit_star(hit: pd.DataFrame, t0: float, label: str) -> dict[str, Any]:
    return {
        "type": "scatter",
        "mode": "markers",
        "name": rf.esc(f"{label}: the update the fault hit"),
        "x": (hit["end"].to_numpy(float) - t0).tolist(),
        "y": hit["step_s"].tolist(),
        "marker": {"symbol": "star", "size": 13, "color": FAULT_TEXT},
        "hovertemplate": "the hit update took %{y:.3g} s<extra></extra>",
    }


def _cut_window(end: float) -> dict[str, Any]:
    return {"type": "rect", "xref": "x", "yref": "paper", "x0": 0.0, "x1": end, "y0": 0,
            "y1": 1, "fillcolor": FAULT_FILL, "line": {"width": 0}, "layer": "below"}  # fmt: skip


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
    FigureDef("r2cc-model", "measured vs predicted T/T_nf (R-2CCL's model)",
              ("results.time_us", "runs.R2CC_MODE", "runs.NCCL_IB_HCA"),
              "../r7525/07-nccl-tests-r2cc-allreduce-k-sweep.yaml", draw_model),
    FigureDef("training-step-time", "training step time per library and scenario, overhead "
              "vs the baseline library", ("training.step_s", "training_checks.overhead_pct"),
              "training.yaml", draw_training_step_time),
    FigureDef("training-step-timeline", "training step time through the cut",
              ("training.step_s", "windows.applied_at"), "training.yaml",
              draw_training_timeline),
)  # fmt: skip
"""Every figure, in the order they are drawn."""
