"""R-2CCL's model against the measurements: T/T_nf measured and predicted per failure series.

For every series of runs that ended ok (`report.series`: runs that differ only by repeat) whose
R2CC_MODE the model speaks of (2 R2CC-Balance, 3 R2CC-AllReduce) under a NIC failure, declared
in its settings (R2CC_FAILED_HCA or R2CC_FAILED_NIC_COUNT with NCCL_IB_HCA: the scenario may be
`none`, as in experiments/r7525) or real (a scenario other than `none`), the measured T/T_nf is its mean time at the largest size
it shares with the healthy runs of the same context (R2CC_MODE 0 or stock NCCL, scenario
`none`: same collective, ranks, hosts, GPUs, NCCL_* settings, and the same file for imported
logs where that file has healthy runs, else those of the other files), over their mean time, per placement (upstream's artifact divides by the mean of its
healthy runs too). The prediction comes from `analysis.r2cc_model` with n the run's ranks, X the
share of NCCL_IB_HCA declared failed (R2CC_FAILED_HCA or R2CC_FAILED_NIC_COUNT) and K its
R2CC_AR_STAGE2_CHUNKS (default 4). A measurement more than 5 % off is flagged.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd

from r2bench.analysis import r2cc_model as m
from r2bench.report import series as rs
from r2bench.report.charts import Figure, esc
from r2bench.tables.build import Tables
from r2bench.tables.rows import env_column

SECTION_TITLE = "R-2CCL's model: measured vs predicted T/T_nf"
PLACEMENTS = ("out_of_place", "in_place")
COLUMNS = (
    "series",
    "mode",
    "schedule",
    "k",
    "n",
    "x",
    "size_bytes",
    "baseline",
    "measured_out_of_place",
    "measured_in_place",
    "predicted",
    "deviation_out_of_place",
    "deviation_in_place",
    "flagged",
    "note",
)
_ENV_NEEDED = (
    "NCCL_IB_HCA",
    "R2CC_FAILED_HCA",
    "R2CC_FAILED_NIC_COUNT",
    "R2CC_AR_STAGE2_CHUNKS",
)


def _env_of(runs: pd.DataFrame, run_id: str) -> dict[str, str]:
    """The settings of one run the model reads, from the runs table's env columns."""
    row = runs[runs["run_id"].astype(str) == run_id]
    out: dict[str, str] = {}
    for name in _ENV_NEEDED:
        col = env_column(name)
        if col in row.columns and len(row):
            value = row[col].iloc[0]
            if value is not None and value is not pd.NA and value == value and str(value):
                out[name] = str(value)
    return out


def model_frame(tables: Tables) -> pd.DataFrame:
    """One row per failure series the model speaks of (see the module's docstring)."""
    if tables.runs.empty or tables.results.empty:
        return pd.DataFrame(columns=list(COLUMNS))
    info = rs.series_info(tables.runs)
    runs = info.runs.copy()
    runs["context"] = [rs.context_key(r, info.keys) for _, r in runs.iterrows()]
    # Imported logs of different files are kept apart (`source`); a file with no healthy run
    # of its own (upstream's 05 and 06) is measured against the healthy runs of the others.
    wide = [k for k in info.keys if k != "source"]
    runs["wide_context"] = [rs.context_key(r, wide) for _, r in runs.iterrows()]
    runs = runs[runs["outcome"] == rs.OK]
    ranks = dict(zip(tables.runs["run_id"].astype(str), tables.runs["ranks"], strict=True))
    results = tables.results[tables.results["run_id"].astype(str).isin(runs["run_id"])]
    times = (
        results.dropna(subset=["time_us"])
        .groupby(["run_id", "size_bytes", "placement"], observed=True)["time_us"]
        .mean()
        .reset_index()
    )
    healthy = runs[(runs["scenario"] == rs.BASELINE_SCENARIO) & runs["mode"].isin(["0", ""])]
    out = []
    modelled = runs[runs["mode"].isin([m.BALANCE_MODE, m.ALLREDUCE_MODE])]
    for label, group in modelled.groupby("series"):
        first = group.iloc[0]
        declared = m.failed_share(_env_of(tables.runs, str(first["run_id"]))) is not None
        if first["scenario"] == rs.BASELINE_SCENARIO and not declared:
            continue  # no failure, real or declared: nothing for the model to predict
        base = healthy[healthy["context"] == first["context"]]
        if base.empty:
            base = healthy[healthy["wide_context"] == first["wide_context"]]
        out.append(_row(str(label), group, base, times, ranks, tables.runs))
    frame = pd.DataFrame(out, columns=list(COLUMNS))
    return frame.sort_values(["mode", "k", "series"], na_position="first").reset_index(drop=True)


def _mean_times(times: pd.DataFrame, run_ids: pd.Series) -> pd.DataFrame:
    """Mean time per size and placement over these runs."""
    chosen = times[times["run_id"].isin(set(run_ids.astype(str)))]
    return chosen.groupby(["size_bytes", "placement"], observed=True)["time_us"].mean()


def _row(
    label: str,
    group: pd.DataFrame,
    base: pd.DataFrame,
    times: pd.DataFrame,
    ranks: dict[str, Any],
    all_runs: pd.DataFrame,
) -> dict[str, Any]:
    first = group.iloc[0]
    env = _env_of(all_runs, str(first["run_id"]))
    n = ranks.get(str(first["run_id"]))
    row: dict[str, Any] = {c: None for c in COLUMNS}
    row.update(series=label, mode=first["mode"], k=m.stage2_chunks(env), flagged=False, note="")
    x = m.failed_share(env)
    if n is None or n != n or x is None:
        row["note"] = "n or X unknown: the runs state no NCCL_IB_HCA and failed NIC"
        return row
    row.update(n=int(n), x=x)
    if base.empty:
        row["note"] = "no healthy runs (R2CC_MODE 0 or stock NCCL, no fault) of the same context"
        return row
    mine, healthy = _mean_times(times, group["run_id"]), _mean_times(times, base["run_id"])
    shared = sorted(set(mine.index.get_level_values(0)) & set(healthy.index.get_level_values(0)))
    if not shared:
        row["note"] = "no message size measured both here and in the healthy runs"
        return row
    size = int(shared[-1])
    prediction = m.predict(str(first["mode"]), int(n), x, row["k"], size)
    assert prediction is not None  # modes 2 and 3 always have one
    row.update(
        size_bytes=size,
        schedule=prediction.schedule,
        k=prediction.k,
        predicted=prediction.ratio,
        note=prediction.note,
        baseline=", ".join(sorted(set(base["series"].astype(str)))),
    )
    for placement in PLACEMENTS:
        key = (size, placement)
        if key in mine.index and key in healthy.index:
            measured = float(mine[key]) / float(healthy[key])
            row[f"measured_{placement}"] = measured
            row[f"deviation_{placement}"] = m.deviation(measured, prediction.ratio)
            row["flagged"] = row["flagged"] or m.flagged(measured, prediction.ratio)
    return row


def _pct(value: Any) -> str:
    return "" if value is None or value != value else f"{value * 100:+.2f} %"


def _ratio(value: Any) -> str:
    return "" if value is None or value != value else f"{value:.4f}"


def model_table_html(frame: pd.DataFrame) -> str:
    """The rows as an HTML table, flagged rows marked."""
    head = (
        "<tr><th>series</th><th>schedule</th><th>K</th><th>n</th><th>X</th><th>size (B)</th>"
        "<th>measured T/T_nf oop / ip</th><th>predicted</th><th>off oop / ip</th>"
        "<th>note</th></tr>"
    )
    body = []
    for r in frame.itertuples(index=False):
        cls = " class='bad'" if r.flagged else ""
        flag = " <b>more than 5 % off</b>" if r.flagged else ""
        body.append(
            f"<tr{cls}><td class='cell'>{esc(r.series)}</td><td>{esc(r.schedule)}</td>"
            f"<td>{esc('' if r.k is None or r.k != r.k else int(r.k))}</td>"
            f"<td>{esc(r.n)}</td><td>{_ratio(r.x)}</td><td>{esc(r.size_bytes)}</td>"
            f"<td>{_ratio(r.measured_out_of_place)} / {_ratio(r.measured_in_place)}</td>"
            f"<td>{_ratio(r.predicted)}</td>"
            f"<td>{_pct(r.deviation_out_of_place)} / {_pct(r.deviation_in_place)}{flag}</td>"
            f"<td class='cell'>{esc(r.note)}</td></tr>"
        )
    return f"<table>{head}{''.join(body)}</table>"


def _short(row: Any) -> str:
    """An x-axis name: the schedule and K (the full label is in the hover and the table)."""
    k = "" if row.k is None or row.k != row.k else f" K={int(row.k)}"
    return f"{row.schedule}{k}"


def model_figure(frame: pd.DataFrame) -> Figure:
    """Measured T/T_nf (bars, out-of-place and in-place) beside the prediction (markers)."""
    drawn = frame.dropna(subset=["predicted"])
    names = [f"{i + 1}. {_short(r)}" for i, r in enumerate(drawn.itertuples(index=False))]
    hover = [esc(s) for s in drawn["series"]]
    data: list[dict[str, Any]] = [
        {
            "type": "bar",
            "name": f"measured ({placement.replace('_', '-')})",
            "x": names,
            "y": drawn[f"measured_{placement}"].tolist(),
            "hovertext": hover,
        }
        for placement in PLACEMENTS
    ]
    data.append(
        {
            "type": "scatter",
            "mode": "markers",
            "name": "predicted (model)",
            "x": names,
            "y": drawn["predicted"].tolist(),
            "marker": {"symbol": "line-ew-open", "size": 28, "line": {"width": 3}},
            "hovertext": hover,
        }
    )
    layout = {
        "title": {"text": "T/T_nf: measured vs R-2CCL's model (per failure series)"},
        "template": "plotly_white",
        "barmode": "group",
        "height": 520,
        "yaxis": {"title": {"text": "T / T_nf"}, "rangemode": "tozero"},
        "margin": {"l": 70, "r": 30, "t": 60, "b": 120},
    }
    flagged = int(drawn["flagged"].sum())
    note = f"{flagged} series more than 5 % off the model" if flagged else ""
    worst = drawn[["deviation_out_of_place", "deviation_in_place"]].abs().max().max()
    caption = (
        f"{len(drawn)} series; largest deviation from the model {worst * 100:.2f} %"
        if len(drawn) and worst == worst
        else ""
    )
    return Figure(
        "model-ratio",
        "measured vs predicted T/T_nf",
        {"data": data, "layout": layout},
        note,
        caption=caption,
    )


def model_section(
    tables: Tables,
    section: Callable[[str, str], str],
    blocks: Callable[[list[Figure] | None], str],
) -> list[str]:
    """The report's section (none when no failure series of mode 2 or 3 has a prediction):
    `section(title, body)` and `blocks(figures)` are the report's own wrappers."""
    frame = model_frame(tables)
    if frame["predicted"].isna().all():
        return []  # no failure series the model can speak of (X unknown): nothing to show
    intro = (
        "<p>T/T_nf: each failure series' time over the healthy runs' time at the same size "
        "(same collective, ranks, hosts and settings; R2CC_MODE 0 or stock NCCL, no fault), "
        "against R-2CCL's model: R2CC-Balance 1/(1-X), R2CC-AllReduce "
        "1 + (1 + 1/K) nX/(2(n-1)(1-X)) (n ranks, X the share of one node's NICs failed, K "
        "stage-2 chunks, default 4; Balance below 16 MiB). More than 5 % off is flagged.</p>"
    )
    body = intro + blocks([model_figure(frame)]) + model_table_html(frame)
    return [section(SECTION_TITLE, body)]
