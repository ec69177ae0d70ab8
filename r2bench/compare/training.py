"""Training runs' samples for `compare`, per series (the series of `compare.samples`: what tells
runs apart besides their repeat), from the `training`, `training_checks` and `recovery_cost`
tables.

- `training_cells`: per series of training runs, each complete run's samples of every
  `TRAINING_METRICS` entry: its updates' step times and tokens/s (each update a sample, as a
  collective's iterations), the step time of the update its fault hit and its median step over
  its baseline run's (one sample a run, none where undefined: a crashed run's hit update never
  completed, the baseline run has no baseline), and of a run with a recovery strategy the
  cost of its fault (`recovery_cost`: detect_s, back_s, lost_gpu_s, goodput over the
  fault-free rate; one sample a run, none where unknown);
- `identity_counts`: per series, how many runs are bit-identical to their baseline run and how
  many are not (runs without a baseline left out): a run that was identical and is not any
  more is a regression (`compare.verdict`).

A series' key is its runs-table row's (`samples.make_key`), so training rows sit with the
series' outcome row. Pure: reads the tables only.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from r2bench.compare.policy import COST_METRICS, TRAINING_METRICS
from r2bench.compare.samples import Cell, Key, make_key
from r2bench.runfolder import store as st
from r2bench.tables.build import Tables

IDENTICAL, DIFFERS = "identical", "differs"
"""The two kinds of run `identity_counts` counts."""
_PER_UPDATE = ("step_s", "tokens_per_s")


@dataclass(frozen=True)
class TrainedRun:
    """A complete training run's series key and its `training_checks` row."""

    run_id: str
    key: Key
    checks: dict[str, Any]


def trained_runs(tables: Tables, names: list[str]) -> list[TrainedRun]:
    """Every complete training run with its series key (the attempts a resumed sweep moved
    aside are left out, as `samples.series_outcomes` leaves them)."""
    checks = tables.training_checks
    if checks.empty or tables.runs.empty:
        return []
    runs = tables.runs[tables.runs["complete"].astype(bool)]
    by_id = {str(r["run_id"]): r for r in runs.to_dict("records")}
    out = []
    for row in checks.to_dict("records"):
        run_id = str(row["run_id"])
        if run_id in by_id and not st.is_moved_aside(run_id):
            out.append(TrainedRun(run_id, make_key(by_id[run_id], names), row))
    return out


def training_cells(tables: Tables, names: list[str]) -> dict[Key, Cell]:
    """Per series of training runs, each run's samples of every training metric."""
    runs = trained_runs(tables, names)
    updates = _updates_by_run(tables.training, {r.run_id for r in runs})
    costs = {str(r["run_id"]): r for r in tables.recovery_cost.to_dict("records")}
    out: dict[Key, Cell] = {}
    for run in runs:
        cell = out.setdefault(run.key, Cell(run.key, samples={m: [] for m in TRAINING_METRICS}))
        cell.runs.append(run.run_id)
        mine = updates.get(run.run_id)
        for metric in _PER_UPDATE:
            values = mine[metric].to_numpy(float) if mine is not None else np.empty(0)
            cell.samples[metric].append(values[np.isfinite(values) & (values > 0)])
        hit = _finite(run.checks.get("hit_step_s"))
        overhead = _finite(run.checks.get("overhead_pct"))
        ratio = 1 + overhead / 100 if overhead is not None else None
        per_run = [("hit_step_s", hit), ("overhead_ratio", ratio)]
        per_run += list(zip(COST_METRICS, _cost_values(costs.get(run.run_id)), strict=True))
        for metric, value in per_run:
            cell.samples[metric].append(np.array([] if value is None else [value], dtype=float))
    return out


def _cost_values(row: dict[str, Any] | None) -> list[float | None]:
    """A run's `COST_METRICS` from its `recovery_cost` row (None where unknown or no row)."""
    if row is None:
        return [None] * len(COST_METRICS)
    goodput, free = _finite(row.get("goodput")), _finite(row.get("goodput_fault_free"))
    ratio = goodput / free if goodput is not None and free else None
    return [
        _finite(row.get("detect_s")), _finite(row.get("back_s")),
        _finite(row.get("lost_gpu_s")), ratio,
    ]  # fmt: skip


def identity_counts(tables: Tables, names: list[str]) -> dict[Key, Counter[str]]:
    """Per series, its runs bit-identical to their baseline run and those that are not (under
    a fault: up to the update it hit); series whose runs have no baseline are left out."""
    out: dict[Key, Counter[str]] = {}
    for run in trained_runs(tables, names):
        value = run.checks.get("identical")
        if value is None or value is pd.NA or (isinstance(value, float) and value != value):
            continue
        out.setdefault(run.key, Counter())[IDENTICAL if bool(value) else DIFFERS] += 1
    return out


def _updates_by_run(training: pd.DataFrame, run_ids: set[str]) -> dict[str, pd.DataFrame]:
    """The `training` table's rows of these runs, per run."""
    if training.empty or not run_ids:
        return {}
    mine = training[training["run_id"].astype(str).isin(run_ids)]
    return {str(run_id): rows for run_id, rows in mine.groupby("run_id", sort=False)}


def _finite(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None
