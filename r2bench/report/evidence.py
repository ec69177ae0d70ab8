"""The report's failure evidence: did each fault hit live traffic, and what each NIC moved.

Per faulted run, the evidence line of each NIC fault (`analysis.evidence`: the target NIC's
bytes before, just before and after the fault, the iteration in flight, the verdict), then a
per-iteration, per-NIC traffic table around the fault (MB each NIC moved in each measured
collective, the faulted NIC marked) and the same as a figure: the faulted NIC falls to zero,
the others pick up its share.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from r2bench.report import panels
from r2bench.report.charts import Figure, esc
from r2bench.report.colours import FAULT_TEXT, series_colour
from r2bench.tables.build import Tables

SECTION_TITLE = "Failure evidence: did each fault hit live traffic"
MAX_EVIDENCE_RUNS = 200
MAX_TRAFFIC_RUNS = 12
ITERATIONS_BEFORE = 3
ITERATIONS_AFTER = 7
"""The traffic table shows the iterations around the first fault (10, as R-2CCL's artifact)."""
_VERDICT_CLASS = {"hit": "", "between_collectives": "", "unknown": " class='warn'"}


def evidence_rows(tables: Tables) -> pd.DataFrame:
    """One row per NIC fault window with its verdict and evidence line, with run columns."""
    windows = tables.windows
    if windows.empty or "verdict" not in windows:
        return pd.DataFrame()
    nic = windows[windows["verdict"].notna()]
    cols = ["run_id", "library", "scenario", "outcome"]
    runs = tables.runs[[c for c in cols if c in tables.runs]]
    return nic.merge(runs, on="run_id", how="left")


def evidence_html(tables: Tables) -> str:
    """The evidence table, then the traffic tables and figures of the first faulted runs."""
    rows = evidence_rows(tables)
    if rows.empty:
        return ""
    head = (
        "<tr><th>run</th><th>library</th><th>scenario</th><th>outcome</th><th>verdict</th>"
        "<th>evidence</th></tr>"
    )
    body = []
    for r in rows.head(MAX_EVIDENCE_RUNS).itertuples(index=False):
        cls = _VERDICT_CLASS.get(str(r.verdict), " class='bad'")
        body.append(
            f"<tr{cls}><td class='mono'>{esc(r.run_id)}</td><td>{esc(r.library)}</td>"
            f"<td>{esc(r.scenario)}</td><td>{esc(r.outcome)}</td><td>{esc(r.verdict)}</td>"
            f"<td class='cell'>{esc(r.evidence)}</td></tr>"
        )
    more = len(rows) - MAX_EVIDENCE_RUNS
    tail = f"<p>... and {more} more (see tables/windows.csv).</p>" if more > 0 else ""
    intro = (
        "<p>From each node's NIC counters (sampled every 50 ms by default): the faulted NIC's "
        "bytes in the 2 s and the 0.25 s before the fault, and after it (tx+rx for a port or "
        "link down, rx for a drop, tx for a cap). <b>hit</b>: traffic was flowing when it was "
        "applied and the cut held; <b>touched no traffic</b> / <b>did not cut the traffic</b>: "
        "an ok run under it is <code>fault_without_effect</code>, never a survived fault; "
        "<b>unknown</b>: no counters around it.</p>"
    )
    return intro + f"<table class='runs'>{head}{''.join(body)}</table>{tail}"


@dataclass(frozen=True)
class TrafficWindow:
    """MB per NIC (columns `node/nic`) per iteration (rows) around a run's first NIC fault,
    and the faulted NIC (None when the run has no NIC fault)."""

    run_id: str
    wide: pd.DataFrame
    target: tuple[str, str] | None

    @property
    def marked(self) -> str:
        """The faulted NIC's column name ('' when none)."""
        return f"{self.target[0]}/{self.target[1]}" if self.target else ""


def traffic_windows(tables: Tables) -> list[TrafficWindow]:
    """The traffic windows of the first faulted runs with traffic rows (`traffic_runs`), the
    evidence rows built once for all of them."""
    wanted = traffic_runs(tables)
    if not wanted:
        return []
    faults = evidence_rows(tables)
    first_fault = (
        {str(row["run_id"]): row for _, row in faults.drop_duplicates("run_id").iterrows()}
        if not faults.empty
        else {}
    )
    return [_window(r, tables.of_run("traffic", r), first_fault.get(r)) for r in wanted]


def _window(run_id: str, traffic: pd.DataFrame, fault: pd.Series | None) -> TrafficWindow:
    """One run's window: `ITERATIONS_BEFORE` iterations before the one the fault hit and
    `ITERATIONS_AFTER` from it on."""
    target = None
    centre = int(traffic["iteration"].min())
    if fault is not None:
        target = (str(fault["node"]), str(fault["nic"]))
        started = traffic[traffic["end"] >= float(fault["applied_at"])]["iteration"]
        centre = int(started.min()) if len(started) else int(traffic["iteration"].max())
    lo, hi = centre - ITERATIONS_BEFORE, centre + ITERATIONS_AFTER - 1
    chosen = traffic[(traffic["iteration"] >= lo) & (traffic["iteration"] <= hi)].copy()
    chosen["nic_name"] = chosen["node"].astype(str) + "/" + chosen["nic"].astype(str)
    chosen["MB"] = (chosen["tx_bytes"] + chosen["rx_bytes"]) / 1e6
    cut = ~chosen["completed"].astype(bool)
    chosen["label"] = (
        chosen["iteration"]
        .astype(str)
        .where(~cut, chosen["iteration"].astype(str) + " (cut short)")
    )
    wide = chosen.pivot_table(
        index="label", columns="nic_name", values="MB", aggfunc="sum", sort=False
    )
    return TrafficWindow(run_id, wide, target)


def traffic_table_html(window: TrafficWindow) -> str:
    """The per-iteration, per-NIC MB table of one run (the faulted NIC's column marked)."""
    wide, marked = window.wide, window.marked
    if wide.empty:
        return ""
    head = "<th>iteration</th>" + "".join(
        f"<th>{esc(c)}{' (faulted)' if c == marked else ''}</th>" for c in wide.columns
    )
    body = "".join(
        f"<tr><td>{esc(i)}</td>"
        + "".join(f"<td>{'-' if v != v else f'{v:.1f}'}</td>" for v in row)
        + "</tr>"
        for i, row in zip(wide.index, wide.to_numpy(), strict=True)
    )
    return (
        f"<h3>MB moved per NIC (tx+rx) per iteration: {esc(window.run_id)}</h3>"
        f"<table><tr>{head}</tr>{body}</table>"
    )


def traffic_figure(window: TrafficWindow, index: int) -> Figure | None:
    """MB each NIC moved in each iteration around the fault: a panel per node, its NICs'
    bars stacked (the faulted NIC red), so the faulted NIC's share falls away and the others'
    grow while the total holds."""
    wide, marked, run_id = window.wide, window.marked, window.run_id
    if wide.empty:
        return None
    names = [str(c) for c in wide.columns]
    nodes = sorted({n.split("/", 1)[0] for n in names})
    nics = sorted({n.split("/", 1)[1] for n in names})
    per_node = [wide[[c for c in names if c.startswith(f"{n}/")]].sum(axis=1) for n in nodes]
    tallest = max(float(t.max()) for t in per_node)
    grid, axes = panels.grid(len(nodes), 1, "iteration", "MB (tx+rx)", tallest)
    traces = []
    for column in names:
        node, nic = column.split("/", 1)
        panel = grid[nodes.index(node)]
        faulted = column == marked
        traces.append(
            {
                "type": "bar",
                "name": esc(f"{nic}{' (faulted)' if faulted else ''}" if faulted else nic),
                "legendgroup": esc(nic),
                "showlegend": node == nodes[0] or faulted,
                "xaxis": panel.x,
                "yaxis": panel.y,
                "x": [str(i) for i in wide.index],
                "y": [None if v != v else round(float(v), 3) for v in wide[column]],
                "marker": {"color": FAULT_TEXT if faulted else series_colour(nics.index(nic))},
                "hovertemplate": f"{esc(column)}: " + "%{y:.3g} MB<extra></extra>",
            }
        )
    titles = [panels.title(p, esc(n)) for p, n in zip(grid, nodes, strict=True)]
    layout = {
        "title": {"text": esc(f"MB per NIC per iteration: {run_id}"), "font": {"size": 14}},
        "template": "plotly_white",
        "barmode": "stack",
        "height": panels.height(len(nodes)) + 40,
        "margin": {"l": 60, "r": 20, "t": 70, "b": 50},
        "annotations": titles,
        "legend": {"orientation": "h", "y": -0.2},
        **{k: {**v, "type": "category"} if k.startswith("xaxis") else v for k, v in axes.items()},
    }
    spec = {"data": traces, "layout": layout}
    return Figure(f"traffic-{index}", f"Traffic per iteration {esc(run_id)}", spec, "", {}, "")


def traffic_runs(tables: Tables) -> list[str]:
    """The first faulted runs with traffic rows, in the runs table's order."""
    if tables.traffic.empty:
        return []
    have = set(tables.traffic["run_id"].astype(str))
    return [r for r in tables.runs["run_id"].astype(str) if r in have][:MAX_TRAFFIC_RUNS]
