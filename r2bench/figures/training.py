"""The paper's training figures (`figures.registry` draws them): step time per library and
scenario with the overhead against the baseline library, and step time through the cut.

Both read the `training_checks` table (a row per training run: R-2CCL's test 09 checks against
its baseline run, `analysis.training`) and the `training` table (a row per update). The claim
they check is the paper's "< 1 % training overhead" through a NIC failure and that R-2CCL
trains on through it; only real R-2CCL runs (not the CPU emulator) under a NIC fault that hit
traffic count for it, as for the collective claims (`registry.sweep_of`).
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from r2bench.figures.registry import (
    DASHES,
    PAPER_TRAINING_PCT,
    Claim,
    Drawn,
    MissingInput,
    _untested_notes,
    colour,
    legend_below,
    paper_layout,
    sweep_of,
)
from r2bench.report import charts as rf
from r2bench.report.colours import FAULT_FILL, FAULT_TEXT, GREY, series_colour
from r2bench.tables.build import Tables

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


def draw_step_times(tables: Tables) -> Drawn:
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
                "text": [_overhead_text(v) for v in overhead.reindex(median.index)],
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
    return Drawn(figure, _overhead_claim(tables, runs))


def _overhead_text(value: Any) -> str:
    if value is None or value != value:
        return "baseline"
    return f"{float(value):+.1f} %"


def _overhead_claim(tables: Tables, runs: pd.DataFrame) -> Claim:
    """The paper's < 1 % training overhead: every real R-2CCL run under a NIC fault that hit
    traffic trained to its end within 1 % of the baseline library's median step."""
    numbers = []
    for row in runs.itertuples(index=False):
        parts = [f"{row.paper}, {row.scenario} ({row.outcome}): median step "
                 f"{_seconds(row.step_s_median)}"]  # fmt: skip
        if row.overhead_pct == row.overhead_pct and row.overhead_pct is not None:
            parts.append(f"{row.overhead_pct:+.2f} % against the baseline library's")
        if row.hit_step_s == row.hit_step_s and row.hit_step_s is not None:
            parts.append(
                f"update {row.hit_update} (hit) took {_seconds(row.hit_step_s)} against a "
                f"median of {_seconds(row.step_s_median_before)} before it"
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


def _seconds(value: Any) -> str:
    return "n/a" if value is None or value != value else f"{float(value):.3g} s"


# --------------------------------------------------------------------------- through the cut


def draw_step_timeline(tables: Tables) -> Drawn:
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
            f"{label}: the fault hit update {_update(row.hit_update)}"
            + (f", which took {_seconds(row.hit_step_s)}" if len(hit) else ", never completed")
            + f"; {after} updates started after the link came back"
        )
    if not traces:
        raise MissingInput("a faulted training run with its fault window and updates")
    layout = paper_layout(
        "Step time through the cut<br><sup>first faulted run of each library and scenario; "
        "fault window shaded; star: the update the fault hit</sup>",
        xaxis={"title": {"text": "time since the fault was applied (s)"}, "zeroline": True},
        yaxis={"title": {"text": "step time (s)"}, "rangemode": "tozero"},
        shapes=[_window(end) for end in sorted(set(ends))],
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


def _update(value: Any) -> str:
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


def _window(end: float) -> dict[str, Any]:
    return {"type": "rect", "xref": "x", "yref": "paper", "x0": 0.0, "x1": end, "y0": 0,
            "y1": 1, "fillcolor": FAULT_FILL, "line": {"width": 0}, "layer": "below"}  # fmt: skip
