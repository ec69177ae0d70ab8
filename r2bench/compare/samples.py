"""Cells and their samples, from the tables of a sweep (`tables.build.build_tables`).

A cell is one collective x size x placement x type x redop of one series; a series is what
tells runs apart besides their repeat: collective, library, scenario, R2CC_MODE, and every
other spec variable (env, ranks) that takes more than one value in either sweep. A cell's
samples are kept per run: each timed iteration (`-I 1`) when the run has them, else each
result row (one per cycle), so one repeat with many iterations or cycles can still be judged
while the bootstrap still treats runs as the unit of replication.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from r2bench.compare import columns
from r2bench.compare.policy import METRICS, RECOVERY_METRICS
from r2bench.errors import InputError
from r2bench.runfolder import store as st
from r2bench.tables.build import Tables, build_tables

MODE = "R2CC_MODE"
SERIES_FIXED = ("collective", "library", "scenario")
CELL_FIELDS = ("size_bytes", "placement", "type", "redop")
_OPTIONAL_SERIES = ("ranks",)

Key = tuple[tuple[str, Any], ...]


class CompareInputError(InputError, ValueError):
    """An input that cannot be compared (no sweep there, no runs, a bad reference): exit 2,
    as `compare` documents."""


@dataclass
class SweepData:
    """One side of a comparison: a sweep's name and tables."""

    name: str
    path: Path
    tables: Tables


def load_sweep(path: Path) -> SweepData:
    """The tables of the sweep folder `path`; CompareInputError when it holds no run."""
    path = Path(path)
    if not path.is_dir():
        raise CompareInputError(f"{path}: not a sweep folder")
    if not any(st.RunStore.at(path).run_dirs()):
        raise CompareInputError(f"{path}: no run folders (is it a sweep, results/<name>?)")
    return SweepData(path.name, path, build_tables(path))


def env_columns(tables: Tables) -> list[str]:
    """The spec's env columns: in the results table they sit between `collective` and
    `scenario` (tables.build puts them there); without result rows, R2CC_MODE if present."""
    cols = list(tables.results.columns)
    if "collective" in cols and "scenario" in cols:
        found = cols[cols.index("collective") + 1 : cols.index("scenario")]
        if found or not tables.results.empty:
            return found
    return [MODE] if MODE in tables.runs.columns else []


def series_columns(*sides: Tables) -> list[str]:
    """What tells series apart over both sides: the fixed keys, R2CC_MODE when there, and every
    spec variable with more than one value within a side."""
    names: list[str] = list(SERIES_FIXED)
    candidates: list[str] = []
    for tables in sides:
        for column in [*_OPTIONAL_SERIES, *env_columns(tables)]:
            if column not in candidates:
                candidates.append(column)
    for column in candidates:
        if column == MODE or any(_varies(t.runs, column) for t in sides):
            names.append(column)
    return names


def _varies(runs: pd.DataFrame, column: str) -> bool:
    """Whether `column` takes several values over the complete runs (a run that did not finish
    lacks what its output would have told, such as its ranks: that is no other series)."""
    if column not in runs.columns or runs.empty:
        return False
    done = runs[runs["complete"].astype(bool)] if "complete" in runs.columns else runs
    return len({norm(v) for v in done[column]}) > 1


def norm(value: Any) -> Any:
    """A key value as plain data: text, or an int for numbers that are whole; missing -> ''."""
    if value is None or value is pd.NA:
        return ""
    if isinstance(value, float):
        if math.isnan(value):
            return ""
        return int(value) if value.is_integer() else value
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value)).lower()
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, np.floating):
        return norm(float(value))
    return str(value)


def make_key(values: Mapping[str, Any], names: Iterable[str]) -> Key:
    """A hashable key (in `names` order) from a row or a mapping."""
    return tuple((n, norm(values.get(n))) for n in names)


@dataclass
class Cell:
    """A cell's samples of each metric, one array per run, and which runs they came from."""

    key: Key
    runs: list[str] = field(default_factory=list)
    samples: dict[str, list[np.ndarray]] = field(default_factory=lambda: {m: [] for m in METRICS})
    pooled: dict[str, np.ndarray] = field(default_factory=dict, repr=False, compare=False)
    """Each metric's samples of all runs back to back, once asked for (or given: `cells`
    builds them as one slice); the runs' arrays must not change after."""

    @property
    def fields(self) -> dict[str, Any]:
        return dict(self.key)

    def pooled_of(self, metric: str) -> np.ndarray:
        """The samples of `metric` of all runs, in run order."""
        if metric not in self.pooled:
            groups = self.samples[metric]
            self.pooled[metric] = np.concatenate(groups) if groups else np.empty(0)
        return self.pooled[metric]

    def count(self, metric: str) -> int:
        """How many samples of `metric` the cell has (all runs)."""
        return int(sum(len(a) for a in self.samples[metric]))


@dataclass
class Series:
    """The outcomes of a series' runs."""

    key: Key
    outcomes: list[str] = field(default_factory=list)


def _series_frame(runs: pd.DataFrame, names: list[str]) -> pd.DataFrame:
    frame = pd.DataFrame({"run_id": runs["run_id"]})
    for name in names:
        frame[name] = runs[name] if name in runs.columns else None
    return frame


def cells(tables: Tables, names: list[str]) -> dict[Key, Cell]:
    """Every cell of a sweep with its per-run samples (complete runs only): the timed
    iterations of a result row where the run has them, else the result rows themselves (one
    per cycle). Built in columns (`compare.columns`): no frame per cell or run, and the
    iterations read a slice at a time."""
    runs = tables.runs[tables.runs["complete"].astype(bool)]
    if runs.empty or tables.results.empty:
        return {}
    run_ids = runs["run_id"].astype(str).to_numpy()
    results = tables.results
    res_run = columns.run_index(results["run_id"], run_ids)
    kept = res_run >= 0
    series = [make_key(row, names) for row in _series_frame(runs, names).to_dict("records")]
    series_codes, series_keys = pd.factorize(pd.Series(series, dtype=object), sort=False)
    rows = columns.ResultRows(
        res_run[kept],
        [columns.Codes.of(results[f][kept], norm) for f in CELL_FIELDS],
        series_codes,
        {m: results[m].to_numpy(dtype=float, na_value=np.nan)[kept] for m in METRICS},
        CELL_FIELDS.index("size_bytes"),
        CELL_FIELDS.index("placement"),
    )
    read = ["run_id", "size_bytes", "placement", *METRICS]
    slices = tables.iteration_slices(columns.SLICE_ROWS, read) if tables.n_iterations else ()
    groups = columns.group_samples(rows, run_ids, slices, norm)
    if not len(groups.run):
        return {}
    per_group = {m: metric.per_group() for m, metric in groups.metrics.items()}
    out: dict[Key, Cell] = {}
    for first, end in itertools.pairwise(groups.cells.tolist()):
        row = int(groups.row[first])
        key = (
            *series_keys[series_codes[rows.run[row]]],
            *(
                (f, rows.fields[i].values[rows.fields[i].codes[row]])
                for i, f in enumerate(CELL_FIELDS)
            ),
        )
        out[key] = Cell(
            key,
            [str(run_ids[r]) for r in groups.run[first:end]],
            {m: per_group[m][first:end] for m in METRICS},
            {
                m: groups.metrics[m].values[
                    groups.metrics[m].bounds[first] : groups.metrics[m].bounds[end]
                ]
                for m in METRICS
            },
        )
    return out


def series_outcomes(tables: Tables, names: list[str]) -> dict[Key, Series]:
    """The outcome of every run (complete or not) per series; the attempts a resumed sweep
    moved aside (`<run-id>.incomplete-<n>`) are left out."""
    out: dict[Key, Series] = {}
    for row in tables.runs.to_dict("records"):
        if st.is_moved_aside(str(row["run_id"])):
            continue  # an earlier attempt of a run the sweep redid: the redone one counts
        key = make_key(row, names)
        out.setdefault(key, Series(key)).outcomes.append(str(row["outcome"]))
    return out


def recovery_cells(tables: Tables, names: list[str]) -> dict[Key, Cell]:
    """Per series with faulted runs: each recovery metric's value of every complete run (one
    sample a run; none where the metric is undefined, e.g. a crashed run's stall)."""
    runs = tables.runs[tables.runs["complete"].astype(bool)]
    present = [m for m in RECOVERY_METRICS if m in runs.columns]
    out: dict[Key, Cell] = {}
    for row in runs.to_dict("records"):
        values = {m: _finite(row.get(m)) for m in present}
        if all(v is None for v in values.values()):
            continue  # no fault, or nothing measured: not a recovery sample
        key = make_key(row, names)
        cell = out.setdefault(key, Cell(key, samples={m: [] for m in RECOVERY_METRICS}))
        cell.runs.append(str(row["run_id"]))
        for metric in RECOVERY_METRICS:
            value = values.get(metric)
            cell.samples[metric].append(np.array([] if value is None else [value], dtype=float))
    return out


def _finite(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None
