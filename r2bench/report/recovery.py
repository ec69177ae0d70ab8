"""The report's recovery section: a table per library/mode/scenario (median and p90 over
repeats), a figure of the metrics' distributions, and what NCCL RAS saw beside the truth.

Metrics come from the runs table (`records.recovery`, one run at a time); a faulted run too
short of samples before its fault for a baseline of its own is computed again against the
fault-free runs of its series (`records.recovery.compute(..., fallback=...)`), and the basis
column says so.
"""

from __future__ import annotations

import html
from pathlib import Path
from statistics import median
from typing import Any

import numpy as np
import pandas as pd
from plotly.io.json import to_json_plotly

from r2bench.records import recovery as rc
from r2bench.records import store as st
from r2bench.records.tables import Tables, parse_run

TIME_METRICS = ("detect_s", "stall_s", "recover_s")
RATIO_METRICS = ("degraded_ratio", "failback_ratio")
GROUP_KEYS = ("library", "mode", "scenario")
FIGURE_ID = "recovery-distributions"
_COLOURS = ("#1f77b4", "#2ca02c", "#9467bd", "#d62728", "#ff7f0e", "#8c564b", "#17becf")
_THIN = "too few measurements"


def _esc(value: Any) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return ""
    return html.escape(str(value), quote=True)


def run_metrics(sweep_dir: Path, tables: Tables) -> pd.DataFrame:
    """Per faulted run: identity and metric columns; runs whose own baseline was too thin are
    computed again against the fault-free runs of their series (library, R2CC_MODE)."""
    runs = tables.runs
    if "detect_s" not in runs or runs.empty:
        return pd.DataFrame()
    frame = runs.copy()
    frame["mode"] = frame["R2CC_MODE"].astype("string") if "R2CC_MODE" in frame else pd.NA
    faulted = frame[frame["n_faults"] > 0].copy()
    pools = _fault_free_pools(tables, frame)
    for i, row in faulted.iterrows():
        thin = any(_THIN in str(row.get(f"{m}_reason") or "") for m in RATIO_METRICS)
        pool = pools.get((row["library"], _mode_key(row["mode"])), {})
        if not thin or not pool:
            continue
        parsed = parse_run(st.load_run(Path(sweep_dir) / str(row["path"])))
        outcome = parsed.outcome.status.value if parsed.outcome else None
        note = "the fault-free runs of the same series"
        cols = rc.compute(parsed.record, parsed.parsed, outcome, pool, note).columns()
        for key, value in cols.items():
            faulted.at[i, key] = value
    return faulted


def _mode_key(value: Any) -> str | None:
    return None if value is None or value is pd.NA or value != value else str(value)


def _fault_free_pools(
    tables: Tables, runs: pd.DataFrame
) -> dict[tuple[Any, str | None], dict[int, float]]:
    """(library, mode) -> size -> median busbw over the fault-free runs' iterations (or rows)."""
    clean = runs[(runs["scenario"] == "none") & (runs["n_faults"] == 0) & runs["complete"]]
    if clean.empty:
        return {}
    ids = set(clean["run_id"])
    its = tables.iterations[tables.iterations["run_id"].isin(ids)]
    with_iters = set(its["run_id"].astype(str))
    rows = tables.results[
        tables.results["run_id"].isin(ids - with_iters) & (tables.results["placement"] != "")
    ]
    samples = pd.concat(
        [
            its[["run_id", "size_bytes", "busbw_gbps"]].astype({"run_id": str}),
            rows[["run_id", "size_bytes", "busbw_gbps"]],
        ]
    )
    keyed = samples.merge(clean[["run_id", "library", "mode"]], on="run_id")
    out: dict[tuple[Any, str | None], dict[int, float]] = {}
    for (lib, mode, size), values in keyed.groupby(
        ["library", keyed["mode"].fillna("-"), "size_bytes"], dropna=False
    )["busbw_gbps"]:
        vals = [v for v in values if v == v]
        if len(vals) >= rc.MIN_BASELINE:
            out.setdefault((lib, None if mode == "-" else str(mode)), {})[int(size)] = median(vals)
    return out


def recovery_table(metrics: pd.DataFrame) -> pd.DataFrame:
    """Per library/mode/scenario: runs, then per metric `median`, `p90` and `n` defined (an
    undefined value is left out, its most common reason in `<metric> undefined`)."""
    if metrics.empty:
        return pd.DataFrame()
    frame = metrics.copy()
    frame["mode"] = frame["mode"].fillna("-")
    out = []
    for key, group in frame.groupby(list(GROUP_KEYS), dropna=False, sort=True):
        row: dict[str, Any] = dict(zip(GROUP_KEYS, key, strict=True))
        row["runs"] = len(group)
        for m in (*TIME_METRICS, *RATIO_METRICS):
            values = pd.to_numeric(group[m], errors="coerce").dropna()
            row[f"{m} median"] = float(values.median()) if len(values) else None
            row[f"{m} p90"] = float(np.percentile(values, 90)) if len(values) else None
            row[f"{m} n"] = len(values)
            reasons = group[f"{m}_reason"].dropna()
            row[f"{m} undefined"] = reasons.mode().iloc[0] if len(reasons) else ""
        lossless = group["lossless"].dropna()
        row["lossless"] = (
            f"{int(lossless.astype(bool).sum())}/{len(lossless)}" if len(lossless) else ""
        )
        out.append(row)
    return pd.DataFrame(out)


def recovery_figure(metrics: pd.DataFrame) -> dict[str, Any]:
    """Box plots with every run's point: seconds (detect, stall, recover) on the left, ratios
    (degraded, failback) on the right; one colour per library/mode/scenario."""
    data: list[dict[str, Any]] = []
    if metrics.empty:
        return {"data": data, "layout": {}}
    frame = metrics.copy()
    frame["mode"] = frame["mode"].fillna("-")
    for index, (key, group) in enumerate(frame.groupby(list(GROUP_KEYS), dropna=False, sort=True)):
        name = _esc(f"{key[0]} mode {key[1]} / {key[2]}")
        colour = _COLOURS[index % len(_COLOURS)]
        for metrics_set, axis in ((TIME_METRICS, ""), (RATIO_METRICS, "2")):
            xs, ys, texts = [], [], []
            for m in metrics_set:
                for run_id, value in zip(group["run_id"], group[m], strict=True):
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
    out["lossless"] = table["lossless"]
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


def observer_rows(sweep_dir: Path, metrics: pd.DataFrame) -> pd.DataFrame:
    """Per faulted run with an NCCL RAS record: the truth (NIC, when) beside RAS's verdict."""
    from r2bench.records.ras import RAS_FILE, ras_verdict

    rows = []
    for row in metrics.itertuples(index=False):
        folder = Path(sweep_dir) / str(row.path) / st.NODE_DIR
        files = sorted(folder.glob(f"*/{RAS_FILE}")) if folder.is_dir() else []
        for path in files:
            verdict = ras_verdict(path.read_text(errors="replace"))
            rows.append(
                {
                    "run_id": row.run_id,
                    "observer node": path.parent.name,
                    "truth: NIC down": f"{row.fault_node}/{row.fault_nic}",
                    "truth: applied at": row.fault_applied_at,
                    "RAS verdict": verdict.summary,
                    "RAS first problem at": verdict.first_problem_at,
                }
            )
    return pd.DataFrame(rows)


def _any_emulated(tables: Tables) -> bool:
    """Whether a run of the sweep used one of r2bench's emulated libraries (their recipes)."""
    if "library_recipe" not in tables.runs:
        return False
    return bool(tables.runs["library_recipe"].astype(str).str.startswith("emulated").any())


def recovery_section(sweep_dir: Path, tables: Tables) -> str:
    """The report's "Recovery" section (table, figure, RAS beside the truth) as HTML."""
    metrics = run_metrics(sweep_dir, tables)
    title = "<h2>Recovery after faults (docs/recovery.md)</h2>"
    if metrics.empty:
        return f"<section>{title}<p>No run with faults in this sweep.</p></section>"
    emulated = (
        " Runs of the emulated libraries stand in for stock NCCL and R-2CCL (an emulation of "
        "their design on the virtual testbed, not the libraries; docs/gpu.md has the real ones)."
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
        f"{to_json_plotly(spec)}</script></div>"
    )
    parts = [title, note, _html_table(_display(recovery_table(metrics))), figure]
    observed = observer_rows(sweep_dir, metrics)
    if not observed.empty:
        parts += ["<h3>What NCCL RAS saw, beside the truth</h3>", _html_table(observed)]
    return "<section>" + "\n".join(parts) + "</section>"
