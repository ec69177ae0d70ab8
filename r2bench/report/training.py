"""The report's training section: what a training job did through its fault, from the
`training` (a row per update) and `training_checks` (a row per run, R-2CCL's test 09 checks
against the baseline run) tables.

- `step_time_figures`: per scenario, each run's step time against the time since its first
  update, its fault window shaded as the collective timelines shade it (`report.charts`) and
  the update the fault hit marked;
- `loss_figure`: every run's loss per update, and below it the loss less the baseline run's
  (bit identity is a flat zero; a drift after the hit shows as it leaves zero);
- `checks_html`: the checks table, a row per run, and each run's sentence.

A sweep without training runs gets no section (`training_section` returns nothing).
"""

from __future__ import annotations

import html
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pandas as pd

from r2bench.report import numbers
from r2bench.report.charts import (
    BASELINE_SCENARIO,
    Figure,
    esc,
    run_windows,
)
from r2bench.report.charts import _layout as layout_of
from r2bench.report.charts import _window_note as window_note
from r2bench.report.charts import _window_shape as window_shape
from r2bench.report.colours import FAULT_TEXT, series_colour
from r2bench.report.series import MODE_ENV
from r2bench.report.summary import subject_of
from r2bench.tables.build import Tables

TITLE = "Training: step time, loss and the checks against the baseline run"
ANCHOR = "training"
FIGURE_PREFIX = "training"
"""Figure ids start `training-` (the page groups figures by the part before the dash)."""
MAX_TRAINING_RUNS = 24
"""Runs drawn per figure; the table lists every run."""
HIT_MARKER = {"symbol": "star", "size": 14, "line": {"width": 1, "color": FAULT_TEXT}}


def has_training(tables: Tables) -> bool:
    """Whether the sweep has a training run (a row of `training_checks`)."""
    return not tables.training_checks.empty


@dataclass(frozen=True)
class TrainedRun:
    """One training run as the figures draw it: its label, colour, updates and checks."""

    run_id: str
    label: str
    colour: str
    scenario: str
    outcome: str
    updates: pd.DataFrame
    """Its rows of the `training` table, in update order."""
    checks: dict[str, Any]
    """Its row of `training_checks`."""

    @property
    def hit_update(self) -> int | None:
        """The update its fault hit (None: no fault, or one that hit no update)."""
        value = _get(self.checks, "hit_update")
        return None if _missing(value) else int(value)

    @property
    def first_start(self) -> float | None:
        """When its first update started (controller clock)."""
        return float(self.updates["start"].iloc[0]) if len(self.updates) else None


def _get(row: dict[str, Any], key: str) -> Any:
    """A row's value (Any: a table row holds numbers, texts and NA alike)."""
    return row.get(key)


def _missing(value: Any) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and value != value)


def _text(value: Any) -> str:
    return "" if _missing(value) else str(value)


def trained_runs(tables: Tables) -> list[TrainedRun]:
    """Every training run, in the checks table's order (the runs table's), labelled
    `R-2CCL mode 0 (r2ccl-m0)` (with its repeat where a library and scenario has several),
    coloured by library."""
    checks = tables.training_checks
    runs = tables.runs.set_index("run_id", drop=False) if len(tables.runs) else tables.runs
    libraries = sorted({_text(v) for v in checks["library"]})
    repeats = checks.groupby(["library", "scenario"], dropna=False)["run_id"].transform("size")
    updates = tables.training
    out = []
    for i, row in enumerate(checks.to_dict("records")):
        run_id = str(row["run_id"])
        facts = runs.loc[run_id].to_dict() if run_id in runs.index else {}
        mode = _text(facts.get(MODE_ENV))
        label = f"{subject_of(facts or {'library': row['library']}, mode)} ({row['library']})"
        if int(repeats.iloc[i]) > 1:
            label += f" r{_text(row['repeat'])}"
        mine = updates[updates["run_id"] == run_id].sort_values("update", kind="stable")
        out.append(
            TrainedRun(
                run_id=run_id,
                label=label,
                colour=series_colour(libraries.index(_text(row["library"]))),
                scenario=_text(row["scenario"]),
                outcome=_text(facts.get("outcome")),
                updates=mine,
                checks=row,
            )
        )
    return out


def _scenarios(runs: list[TrainedRun]) -> list[str]:
    """Scenarios with a fault first (by name), the fault-free one last."""
    names = sorted({r.scenario for r in runs})
    return sorted(names, key=lambda s: (s == BASELINE_SCENARIO, s))


# --------------------------------------------------------------------------- step time


def step_time_figures(tables: Tables) -> list[Figure]:
    """One step-time timeline per scenario (none without training runs)."""
    runs = trained_runs(tables)
    return [
        step_time_figure(tables, [r for r in runs if r.scenario == scenario], i)
        for i, scenario in enumerate(_scenarios(runs))
    ]


def step_time_figure(tables: Tables, runs: list[TrainedRun], index: int) -> Figure:
    """Step time of each run of one scenario against the time since its first update, every
    run's fault window shaded (each on its own run's clock) and the hit update starred."""
    shown = [r for r in runs if len(r.updates)][:MAX_TRAINING_RUNS]
    traces, shapes, notes, hits = [], [], [], []
    for run in shown:
        t0 = float(run.first_start or 0.0)
        u = run.updates
        traces.append(_step_trace(run, t0))
        last = float(u["end"].max())
        for w in run_windows(tables, run.run_id, last):
            shapes.append(window_shape(w, t0))
            notes.append(window_note(w, t0))
        hit = u[u["update"] == run.hit_update] if run.hit_update is not None else u.iloc[:0]
        if len(hit):
            hits.append((run, float(hit["end"].iloc[0]) - t0, float(hit["step_s"].iloc[0])))
    if hits:
        traces.append(_hit_trace(hits))
    scenario = runs[0].scenario if runs else ""
    layout = layout_of(
        esc(f"Step time, scenario {scenario} (fault window shaded, the hit update starred)"),
        xaxis={"title": {"text": "time since the run's first update (s)"}},
        yaxis={"title": {"text": "step time (s)"}, "rangemode": "tozero"},
        shapes=shapes,
        annotations=_deduplicated(notes),
        height=460,
    )
    spec = {"data": traces, "layout": layout}
    meta = {"scenario": scenario, "runs": [r.run_id for r in shown]}
    caption = " ".join(_hit_words(r) for r in runs if _hit_words(r))
    note = "" if traces else "no training update logged in this scenario"
    return Figure(
        f"{FIGURE_PREFIX}-steps-{index}", f"Step time, {esc(scenario)}", spec, note, meta, caption
    )


def _step_trace(run: TrainedRun, t0: float) -> dict[str, Any]:
    u = run.updates
    return {
        "type": "scatter",
        "mode": "lines+markers",
        "name": esc(f"{run.label}: {run.outcome}" if run.outcome else run.label),
        "x": (u["end"].to_numpy(float) - t0).tolist(),
        "y": u["step_s"].tolist(),
        "text": [f"update {n}" for n in u["update"]],
        "hovertemplate": "t=%{x:.3f}s %{text}: %{y:.3g} s<extra>%{fullData.name}</extra>",
        "marker": {"size": 4, "color": run.colour},
        "line": {"color": run.colour, "width": 1.5},
    }


def _hit_trace(hits: list[tuple[TrainedRun, float, float]]) -> dict[str, Any]:
    """The hit updates, one star each, in its run's colour."""
    return {
        "type": "scatter",
        "mode": "markers",
        "name": "the update the fault hit",
        "x": [x for _, x, _ in hits],
        "y": [y for _, _, y in hits],
        "text": [esc(f"{r.label}: update {r.hit_update}") for r, _, _ in hits],
        "hovertemplate": "%{text} took %{y:.3g} s<extra></extra>",
        "marker": {**HIT_MARKER, "color": [r.colour for r, _, _ in hits]},
    }


def _deduplicated(notes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One label per fault text and place (runs cut at the same moment share theirs)."""
    seen, out = set(), []
    for note in notes:
        where = (note["text"], round(float(note["x"]), 1))
        if where not in seen:
            seen.add(where)
            out.append(note)
    return out


def _hit_words(run: TrainedRun) -> str:
    """`R-2CCL mode 0 (r2ccl-m0): the fault hit update 21, which took 0.801 s against a median
    of 0.348 s before it.` ('' for a run without a hit update)."""
    n = run.hit_update
    if n is None:
        return ""
    step, before = _get(run.checks, "hit_step_s"), _get(run.checks, "step_s_median_before")
    if _missing(step):
        return f"{run.label}: the fault hit update {n}, which never completed ({run.outcome})."
    against = (
        f" against a median of {numbers.seconds(before)} before it" if not _missing(before) else ""
    )
    return f"{run.label}: the fault hit update {n}, which took {numbers.seconds(step)}{against}."


# --------------------------------------------------------------------------- loss


def loss_figure(tables: Tables) -> Figure:
    """Every run's loss per update (top) and its loss less its baseline run's (bottom), the
    hit updates marked by dotted lines."""
    runs = [r for r in trained_runs(tables) if len(r.updates)][:MAX_TRAINING_RUNS]
    by_id = {r.run_id: r for r in trained_runs(tables)}
    traces: list[dict[str, Any]] = []
    for run in runs:
        u = run.updates
        traces.append(_loss_trace(run, u["update"].tolist(), u["loss"].tolist(), "y", True))
        base = by_id.get(_text(_get(run.checks, "baseline_run_id")))
        if base is not None:
            diff = _loss_less(run.updates, base.updates)
            traces.append(_loss_trace(run, diff["update"].tolist(), diff["d"].tolist(), "y2"))
    hits = sorted({r.hit_update for r in runs if r.hit_update is not None})
    shapes = [_hit_line(n, axis) for n in hits for axis in ("y", "y2")]
    notes = [_hit_note(n) for n in hits]
    layout = layout_of(
        "Loss per update, and each run's loss less its baseline run's",
        xaxis={"title": {"text": "update"}, "anchor": "y2"},
        yaxis={"title": {"text": "loss"}, "domain": [0.42, 1.0]},
        yaxis2={"title": {"text": "loss − baseline's"}, "domain": [0.0, 0.32], "zeroline": True},
        shapes=shapes,
        annotations=notes,
        height=620,
    )
    spec = {"data": traces, "layout": layout}
    note = "" if traces else "no training update logged"
    caption = (
        "Bottom: 0 where a run's loss is bit for bit its baseline run's (the fault-free run of "
        "the experiment's `training.baseline` library with the same repeat and options); a "
        "drift after the hit leaves 0. Dotted: the update a fault hit."
    )
    meta = {"runs": [r.run_id for r in runs], "hits": hits}
    return Figure(f"{FIGURE_PREFIX}-loss", "Loss per update", spec, note, meta, caption)


def _loss_less(ours: pd.DataFrame, base: pd.DataFrame) -> pd.DataFrame:
    """(update, d): our loss less the baseline's, at the updates both logged."""
    joined = ours[["update", "loss"]].merge(
        base[["update", "loss"]], on="update", suffixes=("", "_base")
    )
    return pd.DataFrame({"update": joined["update"], "d": joined["loss"] - joined["loss_base"]})


def _loss_trace(
    run: TrainedRun, x: list[Any], y: list[Any], axis: str, legend: bool = False
) -> dict[str, Any]:
    return {
        "type": "scatter",
        "mode": "lines",
        "name": esc(run.label + ("" if run.scenario == BASELINE_SCENARIO else f", {run.scenario}")),
        "legendgroup": esc(run.run_id),
        "showlegend": legend,
        "xaxis": "x",
        "yaxis": axis,
        "x": x,
        "y": [None if _missing(v) else v for v in y],
        "hovertemplate": "update %{x}: %{y:.6g}<extra>%{fullData.name}</extra>",
        "line": {
            "color": run.colour,
            "width": 1.5,
            "dash": "solid" if run.scenario == BASELINE_SCENARIO else "dot",
        },
    }


def _hit_line(update: int, axis: str) -> dict[str, Any]:
    return {
        "type": "line",
        "xref": "x",
        "yref": f"{axis} domain",
        "x0": update,
        "x1": update,
        "y0": 0,
        "y1": 1,
        "line": {"color": FAULT_TEXT, "width": 1, "dash": "dot"},
    }


def _hit_note(update: int) -> dict[str, Any]:
    return {
        "x": update,
        "y": 1,
        "xref": "x",
        "yref": "paper",
        "text": esc(f"fault hit update {update}"),
        "showarrow": False,
        "xanchor": "left",
        "yanchor": "bottom",
        "font": {"color": FAULT_TEXT, "size": 11},
    }


def training_figures(tables: Tables) -> list[Figure]:
    """The section's figures, in page order (none for a sweep without training runs)."""
    if not has_training(tables):
        return []
    return [*step_time_figures(tables), loss_figure(tables)]


# --------------------------------------------------------------------------- the checks table


@dataclass(frozen=True)
class CheckColumn:
    """A column of the checks table: its header and how a `training_checks` row reads."""

    header: str
    text: Callable[[dict[str, Any]], str]
    number: bool = True


def _number(key: str, write: Callable[[Any], str] = numbers.significant) -> Callable[..., str]:
    return lambda row: "" if _missing(_get(row, key)) else write(row[key])


def _signed(value: Any) -> str:
    text = numbers.significant(value)
    return text if text.startswith("-") or text == "0" else f"+{text}"


def _identical(row: dict[str, Any]) -> str:
    value = _get(row, "identical")
    if _missing(value):
        return ""
    if bool(value):
        hit = _get(row, "hit_update")
        return "yes" if _missing(hit) else f"yes, before update {int(hit)}"
    first = _get(row, "first_difference_update")
    return "no" if _missing(first) else f"no, from update {int(first)}"


def _tokens(value: Any) -> str:
    return f"{float(value):,.0f}"


CHECK_COLUMNS: tuple[CheckColumn, ...] = (
    CheckColumn("library", lambda r: _text(r.get("library")), number=False),
    CheckColumn("scenario", lambda r: _text(r.get("scenario")), number=False),
    CheckColumn("outcome", lambda r: _text(r.get("outcome")), number=False),
    CheckColumn("bit-identical to the baseline", _identical, number=False),
    CheckColumn("first difference", lambda r: _text(r.get("first_difference")), number=False),
    CheckColumn("update hit", _number("hit_update", lambda v: str(int(v)))),
    CheckColumn("its step (s)", _number("hit_step_s")),
    CheckColumn("median step before it (s)", _number("step_s_median_before")),
    CheckColumn("median step (s)", _number("step_s_median")),
    CheckColumn("step vs the baseline's (%)", _number("overhead_pct", _signed)),
    CheckColumn("largest loss drift after the hit", _number("max_abs_dloss_after")),
    CheckColumn("eval perplexity Δ (%)", _number("eval_ppl_delta_pct", _signed)),
    CheckColumn("tokens/s", _number("tokens_per_s", _tokens)),
)
"""The checks table's columns, in order."""


def checks_html(tables: Tables) -> str:
    """The `training_checks` table (a row per run, with its outcome) and each run's sentence."""
    checks = tables.training_checks
    outcomes = dict(zip(tables.runs["run_id"], tables.runs["outcome"], strict=True))
    rows = [{**r, "outcome": outcomes.get(r["run_id"])} for r in checks.to_dict("records")]
    head = "".join(f"<th>{html.escape(c.header)}</th>" for c in CHECK_COLUMNS)
    body = []
    for row in rows:
        cells = "".join(
            f"<td class='{'num' if c.number else 'cell'}'>{html.escape(c.text(row))}</td>"
            for c in CHECK_COLUMNS
        )
        tone = "" if _get(row, "outcome") in (None, "ok") else " class='bad'"
        body.append(f"<tr{tone}>{cells}</tr>")
    sentences = "".join(
        f"<li><b>{html.escape(_text(r['library']))}, {html.escape(_text(r['scenario']))}</b> "
        f"<span class='mono small'>{html.escape(_text(r['run_id']))}</span>: "
        f"{html.escape(_text(r['sentence']))}</li>"
        for r in rows
    )
    return (
        f"<table id='training-checks'><tr>{head}</tr>{''.join(body)}</table>"
        f"<ul class='sentences'>{sentences}</ul>"
    )


def training_section(
    tables: Tables,
    section: Callable[[str, str, str], str],
    blocks: Callable[[list[Figure] | None], str],
    figures: list[Figure] | None,
) -> list[str]:
    """The section (none for a sweep without training runs): the step-time timelines, the
    loss chart, then the checks; `figures`: the report's training figures."""
    if not has_training(tables):
        return []
    intro = (
        "<p class='cell small'>R-2CCL's training checks (artifact test 09): each run against "
        "its baseline run (the fault-free run of the experiment's <code>training.baseline</code> "
        "library with the same repeat and options): bit identity fault free, under a fault the "
        "update it hit, the loss equal before it and its drift after it, the hit update's step "
        "time against the median before it, and every run's median step against the "
        "baseline's. Step times are the slowest rank's.</p>"
    )
    body = intro + checks_html(tables) + blocks(figures)
    return [section(TITLE, body, ANCHOR)]
