"""The report's recovery-strategy section, from the `recovery_cost` table (a row per training run
with a strategy) and the `training` table (its updates):

- the answer first, `answer_html`: "what one NIC failure cost", a row per strategy x library x
  fault, each metric the median over its runs, hovering a value shows its basis, an unknown one
  says why;
- `timeline_figures`: per strategy, each run's useful progress (its frontier update) against the
  time since the fault, the fault at 0 and each recovery step marked (abort, exit, restart,
  resume, shrink, failover);
- `extrapolation_html`: labelled as an extrapolation, never mixed with the measured rows, every
  input shown (`analysis.extrapolate`).

A sweep without a training run with a strategy gets no section.
"""

from __future__ import annotations

import html
import json
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from r2bench.analysis.extrapolate import (
    SCALE_FILE,
    MeasuredTimes,
    ScaleInputs,
    extrapolate,
    scale_inputs,
)
from r2bench.analysis.recovery_cost import STRATEGIES
from r2bench.report.charts import Figure
from r2bench.report.charts import _layout as layout_of
from r2bench.report.colours import series_colour
from r2bench.tables.build import Tables

TITLE = "Recovery strategies: what one NIC failure cost"
ANCHOR = "recovery-cost"
FIGURE_PREFIX = "recoverycost"
"""Figure ids start `recoverycost-` (the page groups figures by the part before the dash)."""
ANSWER_COLUMNS = (
    ("detect_s", "detect (s)"),
    ("progress_s", "progress again (s)"),
    ("back_s", "back at the frontier (s)"),
    ("updates_lost", "updates lost"),
    ("recomputed", "recomputed"),
    ("lost_gpu_s", "lost GPU-s"),
    ("goodput", "goodput (updates/s)"),
    ("goodput_fault_free", "fault-free rate"),
    ("loss_delta", "loss Δ"),
    ("final_loss_delta", "final loss Δ"),
)
STEP_DASH = {"abort": "dot", "exit": "dot", "restart": "dash", "resume": "dash"}


def has_recovery_cost(tables: Tables) -> bool:
    """Whether the sweep has a training run with a recovery strategy."""
    return not tables.recovery_cost.empty


def _groups(frame: pd.DataFrame) -> list[tuple[tuple[str, str, str], pd.DataFrame]]:
    """(strategy, library, scenario) groups in the strategies' order."""
    order = {s: i for i, s in enumerate(STRATEGIES)}
    keys = ["strategy", "library", "scenario"]
    groups = [
        ((str(s), str(lib), str(scen)), g) for (s, lib, scen), g in frame.groupby(keys, sort=False)
    ]
    return sorted(groups, key=lambda kg: (order.get(kg[0][0], len(order)), kg[0]))


def _cell(group: pd.DataFrame, name: str) -> str:
    """The median over the group's runs, its basis on hover; unknown: the first reason."""
    values = [float(v) for v in group[name] if pd.notna(v)]
    bases = [str(b) for b in group[f"{name}_basis"] if isinstance(b, str)]
    if not values:
        why = bases[0] if bases else "unknown"
        return f"<td title='{html.escape(why)}'>unknown</td>"
    median = statistics.median(values)
    shown = f"{median:.3g}" if len(values) == len(group) else f"{median:.3g} ({len(values)})"
    return f"<td title='{html.escape(bases[0] if bases else '')}'>{shown}</td>"


def answer_html(tables: Tables) -> str:
    """The measured table: a row per strategy x library x fault, medians over its runs."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in ("strategy", "library", "fault", "runs"))
    head += "".join(f"<th>{html.escape(label)}</th>" for _, label in ANSWER_COLUMNS)
    rows = []
    for (strategy, library, scenario), group in _groups(tables.recovery_cost):
        cells = "".join(
            f"<td>{html.escape(v)}</td>" for v in (strategy, library, scenario, str(len(group)))
        )
        cells += "".join(_cell(group, name) for name, _ in ANSWER_COLUMNS)
        rows.append(f"<tr>{cells}</tr>")
    return (
        "<table class='recovery-cost'><thead><tr>" + head + "</tr></thead><tbody>"
        + "".join(rows) + "</tbody></table>"
    )  # fmt: skip


def _frontier(updates: pd.DataFrame, fault: float) -> tuple[list[float], list[int]]:
    """(time since the fault, frontier update) at each update that moved the frontier."""
    xs, ys, frontier = [], [], 0
    for n, end in sorted(zip(updates["update"], updates["end"], strict=True), key=lambda p: p[1]):
        if n > frontier:
            frontier = int(n)
            xs.append(float(end) - fault)
            ys.append(frontier)
    return xs, ys


def timeline_figures(tables: Tables) -> list[Figure]:
    """Per strategy: each run's frontier update against the time since its fault."""
    frame = tables.recovery_cost
    out = []
    for strategy in [s for s in STRATEGIES if s in set(frame["strategy"])]:
        runs = frame[(frame["strategy"] == strategy) & frame["fault_at"].notna()]
        traces, shapes = [], []
        for i, row in enumerate(runs.itertuples()):
            updates = tables.training[tables.training["run_id"] == row.run_id]
            xs, ys = _frontier(updates, float(row.fault_at))
            traces.append(
                {"type": "scatter", "mode": "lines", "x": xs, "y": ys, "name": str(row.run_id),
                 "line": {"shape": "hv", "color": series_colour(i)}}
            )  # fmt: skip
            for name, at in json.loads(str(row.steps) or "[]"):
                shapes.append(_mark(float(at) - float(row.fault_at), str(name)))
        shapes.append(_mark(0.0, "fault"))
        layout = layout_of(
            f"{strategy}: useful progress through the fault",
            xaxis={"title": {"text": "seconds since the fault"}},
            yaxis={"title": {"text": "frontier update"}},
            shapes=[s for s, _ in shapes],
            annotations=[a for _, a in shapes],
        )
        caption = (
            "The frontier: the highest update completed so far (redone updates leave it flat). "
            "Lines: the fault at 0 and each recovery step after it."
        )
        out.append(
            Figure(
                f"{FIGURE_PREFIX}-{strategy}",
                f"Progress through the fault: {strategy}",
                {"data": traces, "layout": layout},
                "" if traces else "no faulted run",
                {"runs": list(runs["run_id"])},
                caption,
            )
        )
    return out


def _mark(x: float, name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A vertical line at `x` and its label."""
    dash = STEP_DASH.get(name, "solid")
    line = {"type": "line", "x0": x, "x1": x, "yref": "paper", "y0": 0, "y1": 1,
            "line": {"dash": dash, "width": 1}}  # fmt: skip
    note = {"x": x, "yref": "paper", "y": 1.02, "text": name, "showarrow": False,
            "textangle": -45, "font": {"size": 10}}  # fmt: skip
    return line, note


def measured_times(frame: pd.DataFrame) -> list[MeasuredTimes]:
    """Per strategy, the medians the extrapolation starts from."""
    out = []
    for strategy in [s for s in STRATEGIES if s in set(frame["strategy"])]:
        runs = frame[frame["strategy"] == strategy]
        out.append(
            MeasuredTimes(
                strategy,
                _median(runs["detect_s"]),
                _median(runs["back_s"]),
                _median(runs["step_s"]),
            )
        )
    return out


def _median(values: Sequence[Any] | pd.Series) -> float | None:
    known = [float(v) for v in values if pd.notna(v)]
    return statistics.median(known) if known else None


def read_scale(sweep_dir: Path) -> tuple[ScaleInputs, str]:
    """The sweep's at-scale.yaml (the defaults without one) and where the inputs came from;
    ValueError names the file and the field when it is wrong."""
    path = sweep_dir / SCALE_FILE
    if not path.is_file():
        return ScaleInputs(), f"the defaults (write {SCALE_FILE} in the sweep folder to set them)"
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ValueError(f"{path}: not readable YAML ({exc})") from None
    return scale_inputs(doc, str(path)), f"{SCALE_FILE}, the defaults where it says nothing"


def extrapolation_html(tables: Tables, scale: ScaleInputs, origin: str) -> str:
    """The extrapolated table, its inputs (and where they came from) listed above it."""
    inputs = "".join(
        f"<li><code>{html.escape(k)}</code> = {html.escape(str(v))}</li>"
        for k, v in scale.__dict__.items()
    )
    rows = []
    for m in measured_times(tables.recovery_cost):
        e = extrapolate(m, scale)
        per_day = f"{e.gpu_hours_per_day:,.1f}" if e.gpu_hours_per_day is not None else "—"
        rows.append(
            f"<tr><td>{html.escape(e.strategy)}</td><td>{per_day}</td>"
            f"<td>{html.escape(e.formula)}</td></tr>"
        )
    return (
        "<h3>Extrapolation (not measured)</h3><p class='cell small'>Expected GPU-hours lost a "
        "day to NIC failures at the scale below, from the medians measured above "
        f'(docs/recovery.md, "Extrapolation"). Inputs, from {html.escape(origin)}:</p><ul>'
        + inputs
        + "</ul>"
        "<table class='extrapolation'><thead><tr><th>strategy</th><th>GPU-h a day</th>"
        "<th>formula</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>"
    )


def recovery_cost_section(
    sweep_dir: Path,
    tables: Tables,
    section: Callable[[str, str, str], str],
    blocks: Callable[[list[Figure] | None], str],
    figures: list[Figure] | None,
) -> list[str]:
    """The section (none without a run with a strategy): the answer, the timelines, then the
    extrapolation at the scale of the sweep's at-scale.yaml."""
    if not has_recovery_cost(tables):
        return []
    scale, origin = read_scale(sweep_dir)
    intro = (
        "<p class='cell small'>Each metric's median over the runs of a strategy, library and "
        'fault (docs/recovery.md, "Recovery strategies"); hover a value for its basis.</p>'
    )
    extrapolated = extrapolation_html(tables, scale, origin)
    body = intro + answer_html(tables) + blocks(figures) + extrapolated
    return [section(TITLE, body, ANCHOR)]
