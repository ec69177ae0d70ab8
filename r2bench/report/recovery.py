"""The report's recovery section: a table per library/mode/scenario (median and p90 over
repeats), a figure of the metrics' distributions, and what NCCL RAS saw beside the truth.

Everything comes from the tables: the metrics of the registry (`analysis.metrics`) from the runs
table, where a faulted run too short of samples before its fault for a baseline of its own is
already measured against the fault-free runs of its series (the basis column says so), and the
RAS verdicts from the events table.
"""

from __future__ import annotations

import html
from typing import Any

import numpy as np
import pandas as pd

from r2bench.analysis.metrics import of_unit
from r2bench.report.inline import figure_json
from r2bench.tables.build import RAS_VERDICT, Tables

TIME_METRICS = of_unit("s")
RATIO_METRICS = of_unit("ratio")
FLAG_METRICS = of_unit("flag")
GROUP_KEYS = ("library", "mode", "scenario")
FIGURE_ID = "recovery-distributions"
_COLOURS = ("#1f77b4", "#2ca02c", "#9467bd", "#d62728", "#ff7f0e", "#8c564b", "#17becf")
_THIN = "too few measurements"


def _esc(value: Any) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return ""
    return html.escape(str(value), quote=True)


def run_metrics(tables: Tables) -> pd.DataFrame:
    """Per faulted run: identity and metric columns, as the runs table holds them (a run too
    short of samples before its fault is measured against its series there)."""
    runs = tables.runs
    if "detect_s" not in runs or runs.empty:
        return pd.DataFrame()
    frame = runs.copy()
    frame["mode"] = frame["R2CC_MODE"].astype("string") if "R2CC_MODE" in frame else pd.NA
    return frame[frame["n_faults"] > 0].copy()


def recovery_table(metrics: pd.DataFrame) -> pd.DataFrame:
    """Per library/mode/scenario: runs, then per metric `median`, `p90` and `n` defined (an
    undefined value is left out, its most common reason in `<metric> undefined`). Columns are
    taken out once and each group read by its positions: thousands of groups (a scenario per
    imported log) cost about what one does."""
    if metrics.empty:
        return pd.DataFrame()
    frame = metrics.copy()
    frame["mode"] = frame["mode"].fillna("-")
    numbers = {
        m: pd.to_numeric(frame[m], errors="coerce").to_numpy(dtype=float)
        for m in (*TIME_METRICS, *RATIO_METRICS)
    }
    reasons = {m: frame[f"{m}_reason"].to_numpy(dtype=object) for m in numbers}
    flags = {m: frame[m].to_numpy(dtype=object) for m in FLAG_METRICS}
    out = []
    for key, positions in _groups(frame):
        row: dict[str, Any] = dict(zip(GROUP_KEYS, key, strict=True))
        row["runs"] = len(positions)
        for m, column in numbers.items():
            values = sorted(v for v in column[positions].tolist() if v == v)  # NaN left out
            row[f"{m} median"] = _median(values) if values else None
            row[f"{m} p90"] = _quantile(values, 0.9) if values else None
            row[f"{m} n"] = len(values)
            row[f"{m} undefined"] = _most_common(reasons[m][positions])
        for m, column in flags.items():  # `true of defined`, e.g. lossless 3/4
            defined = [bool(v) for v in column[positions] if not pd.isna(v)]
            row[m] = f"{sum(defined)}/{len(defined)}" if defined else ""
        out.append(row)
    return pd.DataFrame(out)


def _groups(frame: pd.DataFrame) -> list[tuple[tuple[Any, ...], np.ndarray]]:
    """(library, mode, scenario) and the row positions of each group, in groupby's order
    (sorted, missing values last): one pass, instead of a frame per group."""
    codes = frame.groupby(list(GROUP_KEYS), dropna=False, sort=True).ngroup().to_numpy()
    order = np.argsort(codes, kind="stable")
    keys = [frame[k].to_numpy(dtype=object) for k in GROUP_KEYS]
    return [
        (tuple(column[positions[0]] for column in keys), positions)
        for positions in np.split(order, np.flatnonzero(np.diff(codes[order])) + 1)
    ]


def _median(ordered: list[float]) -> float:
    """numpy's median of sorted values, to the last bit (the mean of the middle two)."""
    half = len(ordered) // 2
    return ordered[half] if len(ordered) % 2 else (ordered[half - 1] + ordered[half]) / 2


def _quantile(ordered: list[float], q: float) -> float:
    """numpy's default (linear) quantile of sorted values, to the last bit, without numpy's
    per-call cost (tens of microseconds, times five metrics, times thousands of groups)."""
    at = q * (len(ordered) - 1)
    low = int(at)
    high = min(low + 1, len(ordered) - 1)
    a, b, t = ordered[low], ordered[high], at - low
    return b - (b - a) * (1 - t) if t >= 0.5 else a + (b - a) * t


def _most_common(values: np.ndarray) -> Any:
    """The most common value that is not missing (the first in sort order on a tie), or ''."""
    counts: dict[Any, int] = {}
    for value in values:
        if not pd.isna(value):
            counts[value] = counts.get(value, 0) + 1
    if not counts:
        return ""
    most = max(counts.values())
    return sorted(v for v, n in counts.items() if n == most)[0]


def recovery_figure(metrics: pd.DataFrame) -> dict[str, Any]:
    """Box plots with every run's point: seconds (detect, stall, recover) on the left, ratios
    (degraded, failback) on the right; one colour per library/mode/scenario."""
    data: list[dict[str, Any]] = []
    if metrics.empty:
        return {"data": data, "layout": {}}
    frame = metrics.copy()
    frame["mode"] = frame["mode"].fillna("-")
    columns = {
        m: frame[m].to_numpy(dtype=object) for m in ("run_id", *TIME_METRICS, *RATIO_METRICS)
    }
    for index, (key, positions) in enumerate(_groups(frame)):
        name = _esc(f"{key[0]} mode {key[1]} / {key[2]}")
        colour = _COLOURS[index % len(_COLOURS)]
        run_ids = columns["run_id"][positions]
        for metrics_set, axis in ((TIME_METRICS, ""), (RATIO_METRICS, "2")):
            xs, ys, texts = [], [], []
            for m in metrics_set:
                for run_id, value in zip(run_ids, columns[m][positions], strict=True):
                    if value is not None and value == value:
                        xs.append(m)
                        ys.append(float(value))
                        texts.append(_esc(run_id))
            data.append(
                {
                    "type": "box",
                    "name": name,
                    "legendgroup": name,
                    "showlegend": axis == "",
                    "x": xs,
                    "y": ys,
                    "text": texts,
                    "boxpoints": "all",
                    "pointpos": 0,
                    "jitter": 0.3,
                    "offsetgroup": name,
                    "marker": {"color": colour},
                    "line": {"color": colour},
                    "xaxis": f"x{axis}",
                    "yaxis": f"y{axis}",
                    "hovertemplate": "%{text}<br>%{x} = %{y:.3f}<extra>" + name + "</extra>",
                }
            )
    layout = {
        "title": {"text": "Recovery metrics over repeats (faulted runs)"},
        "boxmode": "group",
        "height": 460,
        "xaxis": {"domain": [0, 0.56], "categoryorder": "array", "categoryarray": TIME_METRICS},
        "yaxis": {"title": {"text": "seconds"}, "rangemode": "tozero"},
        "xaxis2": {
            "domain": [0.66, 1],
            "anchor": "y2",
            "categoryorder": "array",
            "categoryarray": RATIO_METRICS,
        },
        "yaxis2": {
            "anchor": "x2",
            "title": {"text": "busbw / before the fault"},
            "rangemode": "tozero",
        },
        "legend": {"orientation": "h", "y": -0.15},
    }
    return {"data": data, "layout": layout}


def _display(table: pd.DataFrame) -> pd.DataFrame:
    """One cell per metric: `median / p90 (n)`, or the reason nothing is defined."""
    out = table[[*GROUP_KEYS, "runs"]].copy()
    for m in (*TIME_METRICS, *RATIO_METRICS):
        cells = []
        for values in table.to_dict(orient="records"):
            n, med, p90 = values[f"{m} n"], values[f"{m} median"], values[f"{m} p90"]
            why = values[f"{m} undefined"]
            text = f"{med:.3g} / {p90:.3g} (n={n})" if n else "undefined"
            if why and n < values["runs"]:
                text += f"; {values['runs'] - n} undefined: {why}"
            cells.append(text)
        out[f"{m} median / p90"] = cells
    for m in FLAG_METRICS:
        out[m] = table[m]
    return out


def _html_table(frame: pd.DataFrame) -> str:
    def cell(v: Any) -> str:
        if isinstance(v, float) and v == v:
            return f"{v:.3g}"
        return _esc(v)

    head = "".join(f"<th>{_esc(c)}</th>" for c in frame.columns)
    body = "".join(
        "<tr>" + "".join(f"<td class='cell'>{cell(v)}</td>" for v in row) + "</tr>"
        for row in frame.itertuples(index=False)
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def observer_rows(tables: Tables, metrics: pd.DataFrame) -> pd.DataFrame:
    """Per faulted run with an NCCL RAS record: the truth (NIC, when) beside RAS's verdict
    (the events table's `ras_verdict` rows)."""
    events = tables.events
    verdicts = events[events["kind"].astype(str) == RAS_VERDICT]
    by_run: dict[Any, list[Any]] = {}  # one pass: a filter per run is quadratic in runs
    for v in verdicts.itertuples(index=False):
        by_run.setdefault(v.run_id, []).append(v)
    rows = []
    for row in metrics.itertuples(index=False):
        for v in by_run.get(row.run_id, []):
            rows.append(
                {
                    "run_id": row.run_id,
                    "observer node": v.host,
                    "truth: NIC down": f"{row.fault_node}/{row.fault_nic}",
                    "truth: applied at": row.fault_applied_at,
                    "RAS verdict": v.message,
                    "RAS first problem at": None if v.time != v.time else v.time,
                }
            )
    return pd.DataFrame(rows)


def _any_emulated(tables: Tables) -> bool:
    """Whether a run of the sweep used one of r2bench's emulated libraries (their recipes)."""
    if "library_recipe" not in tables.runs:
        return False
    return bool(tables.runs["library_recipe"].astype(str).str.startswith("emulated").any())


def recovery_section(tables: Tables) -> str:
    """The report's "Recovery" section (table, figure, RAS beside the truth) as HTML."""
    metrics = run_metrics(tables)
    title = "<h2>Recovery after faults (docs/recovery.md)</h2>"
    if metrics.empty:
        return f"<section id='recovery'>{title}<p>No run with faults in this sweep.</p></section>"
    emulated = (
        " Runs of the emulated libraries stand in for stock NCCL and R-2CCL (an emulation of "
        "their design on the virtual testbed, not the libraries; docs/gpu-notes.md has the real ones)."
        if _any_emulated(tables)
        else ""
    )
    note = (
        "<p class='cell'>Median and p90 over the repeats of each library/mode/scenario; an "
        "undefined value (crashed run, no reaction logged, ...) is left out and its most "
        f"common reason shown.{emulated}</p>"
    )
    spec = recovery_figure(metrics)
    figure = (
        f"<div class='fig'><div id='plot-{FIGURE_ID}' class='r2-plot'></div>"
        f"<script type='application/json' class='r2-figure' id='figure-{FIGURE_ID}'>"
        f"{figure_json(spec)}</script></div>"
    )
    parts = [title, note, _html_table(_display(recovery_table(metrics))), figure]
    observed = observer_rows(tables, metrics)
    if not observed.empty:
        parts += ["<h3>What NCCL RAS saw, beside the truth</h3>", _html_table(observed)]
    return "<section id='recovery'>" + "\n".join(parts) + "</section>"
