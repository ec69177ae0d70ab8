"""The report's fault-campaign section: outcome classes per series, every trial with its draw
and its detection beside the predicted one, predictions scored, and degraded runs against their
bound (docs/campaigns.md).
"""

from __future__ import annotations

import html
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from r2bench.analysis.armed import Armed
from r2bench.analysis.predictions import Score, ScoredRun, score
from r2bench.analysis.verdict import SCORED, OutcomeClass
from r2bench.config.errors import ConfigError
from r2bench.config.predictions import read_predictions
from r2bench.runfolder.predictions import Registered, registered
from r2bench.tables.build import Tables

SECTION_TITLE = "Fault campaign: outcome classes, predictions and bounds"
ANCHOR = "campaign"
MAX_TRIALS_LISTED = 200
_SERIES = ["library", "scenario", "told"]
_TRIAL_COLUMNS = [
    *("run_id", "library", "scenario", "trial", "drawn_s", "outcome", "verdict"),
    *("armed", "told", "detect_s", "detect_textbook_s", "detect_bound_textbook"),
    *("detect_floor_s", "detect_bound_floor"),
]
_BOUND_COLUMNS = [
    *("run_id", "library", "scenario", "lost_share", "measured_ratio", "bound_ratio"),
    *("bound_efficiency", "balance_ratio", "model_schedule", "model_ratio"),
]

Section = Callable[[str, str, str], str]
TableHtml = Callable[[pd.DataFrame], str]


def campaign_section(
    sweep_dir: Path, tables: Tables, section: Section, table: TableHtml
) -> list[str]:
    """The section (none without a faulted run): `section(title, body, anchor)` and
    `table(frame)` are the report's own wrappers."""
    runs = tables.runs
    if "verdict" not in runs or not (runs["verdict"] != OutcomeClass.NO_FAULT.value).any():
        return []
    faulted = runs[runs["verdict"] != OutcomeClass.NO_FAULT.value]
    parts = [
        "<p>Each faulted run's outcome class: TRANSPARENT (the job never noticed), DECLINED "
        "(it stopped with an error), HUNG (the deadline ended it), SILENT_WRONG (it finished "
        "with wrong data), OTHER, MISSED (the fault hit no traffic, or never fired), UNSCORED "
        "(the run never tested it). Runs whose failover could not have worked (not armed) are "
        "counted apart, never as a failover failure or success; pre-told runs (the library was "
        "told which NIC would fail) apart from blind ones.</p>",
        table(_class_counts(faulted)),
        *_predictions_html(sweep_dir, faulted, table),
        "<h3>Trials</h3><p>Each run with its drawn time (campaigns), and its measured detection "
        "beside the time predicted by the textbook IB model (4.096 us x 2^T x (R+1)) and the "
        "ConnectX floor (T below 16 acts as 16, each retry after the first costs two "
        "timeouts), each labelled timer-bound (the library's failover timer fires first) or "
        "retry-bound.</p>",
        table(_present(faulted, _TRIAL_COLUMNS).head(MAX_TRIALS_LISTED)),
        *_bounds_html(faulted, table),
    ]
    return [section(SECTION_TITLE, "\n".join(parts), ANCHOR)]


def _present(frame: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """The columns of `columns` the frame has, their names breakable after each `_` (a zero
    width space): a table of 14 such headers must fit a 1400 px window."""
    shown = frame[[c for c in columns if c in frame]]
    return shown.rename(columns=lambda name: str(name).replace("_", "_\u200b"))


def _class_counts(faulted: pd.DataFrame) -> pd.DataFrame:
    """Runs per series (library, scenario, pre-told or blind) and class; not-armed runs in a
    column of their own."""
    frame = faulted.assign(told=faulted["told"].fillna("-"))
    armed = frame["armed"].fillna("") != Armed.UNARMED.value
    counted = frame[armed]
    wide = (
        counted.groupby([*_SERIES, "verdict"]).size().unstack("verdict", fill_value=0)
        if len(counted)
        else pd.DataFrame(index=pd.MultiIndex.from_tuples([], names=_SERIES))
    )
    order = [c.value for c in (*SCORED, OutcomeClass.UNSCORED)]
    wide = wide.reindex(columns=order, fill_value=0)
    unarmed = frame[~armed].groupby(_SERIES).size().rename("not armed")
    wide = wide.join(unarmed, how="outer").fillna(0).astype(int)
    return wide.reset_index()


def _predictions_html(sweep_dir: Path, faulted: pd.DataFrame, table: TableHtml) -> list[str]:
    state = registered(sweep_dir)
    if state is None:
        return []
    head = (
        f"<h3>Predictions</h3><p>Registered before the first run: "
        f"<code>{html.escape(state.record.path)}</code>, SHA-256 "
        f"<code>{state.record.sha256}</code> ({html.escape(state.record.registered_at)}).</p>"
    )
    parts = [head, _change_note(state)]
    try:
        file = read_predictions(state.copy)
    except ConfigError as error:
        return [*parts, f"<p class='note'>The registered copy cannot be read: "
                f"{html.escape(str(error))}</p>"]  # fmt: skip
    result = score(file, _scored_runs(faulted))
    return [*parts, _score_line(result), table(_confusion(result))]


def _change_note(state: Registered) -> str:
    if not state.changed:
        return "<p>The file is unchanged since (same SHA-256).</p>"
    now = state.now_sha256 or "gone or unreadable"
    return (
        f"<p class='note'><b>The predictions file changed after it was registered</b> (now "
        f"{html.escape(now)}): scored below is the registered copy.</p>"
    )


def _scored_runs(faulted: pd.DataFrame) -> list[ScoredRun]:
    runs = []
    for row in faulted.to_dict("records"):
        values: dict[str, Any] = {k: v for k, v in row.items() if not _missing(v)}
        armed = row.get("armed") != Armed.UNARMED.value
        runs.append(ScoredRun(values, OutcomeClass(row["verdict"]), armed))
    return runs


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and value != value)


def _score_line(result: Score) -> str:
    return (
        f"<p>{result.hits} of {result.scored} scored runs as predicted; "
        f"{result.unpredicted} faulted runs no prediction covers, {result.unarmed} not armed "
        f"(left out), {result.unscored} unscored.</p>"
    )


def _confusion(result: Score) -> pd.DataFrame:
    """Expected (rows) against observed (columns)."""
    names = [c.value for c in SCORED]
    rows = [
        {"predicted": want, **{got: result.confusion.get((OutcomeClass(want), OutcomeClass(got)), 0)
                               for got in names}}
        for want in names
        if any(w.value == want for w, _ in result.confusion)
    ]  # fmt: skip
    return pd.DataFrame(rows, columns=["predicted", *names])


def _bounds_html(faulted: pd.DataFrame, table: TableHtml) -> list[str]:
    if "bound_ratio" not in faulted or faulted["bound_ratio"].isna().all():
        return []
    rows = faulted[faulted["bound_ratio"].notna()]
    return [
        "<h3>Degraded runs against their bounds</h3><p>T/T_fault-free measured (1 / busbw "
        "during the fault over before it) beside the lower bound any schedule must respect "
        "(a node keeping a share beta of its bandwidth must still move its data: "
        "T/T_nf >= max(1, p/(2 beta (p-1))), p the ring's nodes; the OptCC paper proves a "
        "tighter one), the Balance line 1/(1-X) and R-2CCL's model for its schedule and K. "
        "Efficiency is bound / measured (1.0: as fast as any schedule can be; above 1, the "
        "measurement beat the bound: the NICs were not the bottleneck or the window was not "
        "steady).</p>",
        table(_present(rows, _BOUND_COLUMNS)),
    ]
