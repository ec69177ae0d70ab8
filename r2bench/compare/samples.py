"""Cells and their samples, from the tables of a sweep (`tables.build.build_tables`).

A cell is one collective x size x placement x type x redop of one series; a series is what
tells runs apart besides their repeat: collective, library, scenario, R2CC_MODE, and every
other spec variable (env, ranks) that takes more than one value in either sweep. A cell's
samples are kept per run: each timed iteration (`-I 1`) when the run has them, else each
result row (one per cycle), so one repeat with many iterations or cycles can still be judged
while the bootstrap still treats runs as the unit of replication.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

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

    @property
    def fields(self) -> dict[str, Any]:
        return dict(self.key)

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
    per cycle). Built column-wise, with codes and one stable sort: no frame per cell or run,
    so a 1,000-run sweep's million iterations take a fraction of a second."""
    runs = tables.runs[tables.runs["complete"].astype(bool)]
    if runs.empty or tables.results.empty:
        return {}
    run_ids = runs["run_id"].astype(str).to_numpy()
    results = tables.results
    res_run = pd.Index(run_ids).get_indexer(results["run_id"].astype(str))
    kept = res_run >= 0
    fields = [_Codes.of(results[f].to_numpy()[kept]) for f in CELL_FIELDS]
    table = _Samples(
        res_run[kept],
        np.stack([f.codes for f in fields], axis=1),
        {m: results[m].to_numpy(dtype=float, na_value=np.nan)[kept] for m in METRICS},
    )
    if not tables.iterations.empty:
        table = table.with_iterations(tables.iterations, run_ids, fields)
    series = [make_key(row, names) for row in _series_frame(runs, names).to_dict("records")]
    return table.cells(run_ids, series, fields)


@dataclass(frozen=True)
class _Codes:
    """A key column as integer codes into its distinct normed values (`norm`): values that
    norm alike share a code, as they share a key."""

    codes: np.ndarray
    values: list[Any]

    @classmethod
    def of(cls, column: np.ndarray) -> _Codes:
        raw, uniques = pd.factorize(pd.Series(column, dtype=object).fillna(""), sort=False)
        normed = [norm(v) for v in uniques]
        distinct = list(dict.fromkeys(normed))
        position = {value: i for i, value in enumerate(distinct)}
        remap = np.array([position[v] for v in normed], dtype=np.int64)
        codes: np.ndarray = remap[raw] if len(raw) else raw.astype(np.int64)
        return cls(codes, distinct)

    def lookup(self, column: np.ndarray) -> np.ndarray:
        """The codes of other values (-1 where a value is not among these)."""
        raw, uniques = pd.factorize(pd.Series(column, dtype=object).fillna(""), sort=False)
        position = {value: i for i, value in enumerate(self.values)}
        remap = np.array([position.get(norm(v), -1) for v in uniques], dtype=np.int64)
        codes: np.ndarray = remap[raw] if len(raw) else raw.astype(np.int64)
        return codes


def _row_keys(run: np.ndarray, size: np.ndarray, placement: np.ndarray) -> np.ndarray:
    """One int64 per (run, size code, placement code): what an iteration's result row is."""
    keys: np.ndarray = (run.astype(np.int64) << 40) | (size.astype(np.int64) << 20) | placement
    return keys


@dataclass(frozen=True)
class _Samples:
    """Samples in columns: the run (an index into the complete runs), the cell fields'
    codes (CELL_FIELDS order) and each metric's value."""

    run: np.ndarray
    fields: np.ndarray
    metrics: dict[str, np.ndarray]

    def with_iterations(
        self, iters: pd.DataFrame, run_ids: np.ndarray, fields: list[_Codes]
    ) -> _Samples:
        """The iterations of each (run, size, placement) that has a result row, with that
        row's fields (its first row's), then the result rows of those without iterations."""
        if not len(self.run):
            return self
        size, placement = CELL_FIELDS.index("size_bytes"), CELL_FIELDS.index("placement")
        row_keys = _row_keys(self.run, self.fields[:, size], self.fields[:, placement])
        unique_keys, first = np.unique(row_keys, return_index=True)
        it_run = pd.Index(run_ids).get_indexer(iters["run_id"].astype(str))
        it_size = fields[size].lookup(iters["size_bytes"].to_numpy())
        it_place = fields[placement].lookup(iters["placement"].astype(str).to_numpy())
        known = (it_run >= 0) & (it_size >= 0) & (it_place >= 0)
        it_keys = _row_keys(it_run, it_size, it_place)
        pos = np.minimum(np.searchsorted(unique_keys, it_keys), len(unique_keys) - 1)
        matched = known & (unique_keys[pos] == it_keys)
        rows = first[pos[matched]]
        covered = np.isin(row_keys, unique_keys[np.unique(pos[matched])])
        rest = ~covered
        return _Samples(
            np.concatenate([it_run[matched], self.run[rest]]),
            np.concatenate([self.fields[rows], self.fields[rest]]),
            {
                m: np.concatenate(
                    [iters[m].to_numpy(dtype=float, na_value=np.nan)[matched], values[rest]]
                )
                for m, values in self.metrics.items()
            },
        )

    def cells(
        self, run_ids: np.ndarray, series: list[Key], fields: list[_Codes]
    ) -> dict[Key, Cell]:
        """The cells, each run's samples in table order, runs in run-id order."""
        series_codes, series_keys = pd.factorize(pd.Series(series, dtype=object), sort=False)
        columns = np.column_stack([series_codes[self.run], self.fields])
        cell_rows, cell_of = np.unique(columns, axis=0, return_inverse=True)
        cell_of = cell_of.reshape(-1)
        rank = np.empty(len(run_ids), dtype=np.int64)
        rank[np.argsort(run_ids, kind="stable")] = np.arange(len(run_ids))
        order = np.lexsort((rank[self.run], cell_of))
        group = cell_of[order] * len(run_ids) + rank[self.run[order]]
        starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
        group_cell = cell_of[order][starts]
        group_run = self.run[order][starts]
        per_metric = {
            m: self._split(values[order], group, starts) for m, values in self.metrics.items()
        }
        out: dict[Key, Cell] = {}
        for g, (c, r) in enumerate(zip(group_cell.tolist(), group_run.tolist(), strict=True)):
            codes = cell_rows[c]
            key = (
                *series_keys[codes[0]],
                *(
                    (name, fields[i].values[code])
                    for i, (name, code) in enumerate(zip(CELL_FIELDS, codes[1:], strict=True))
                ),
            )
            cell = out.setdefault(key, Cell(key))
            cell.runs.append(str(run_ids[r]))
            for metric in METRICS:
                cell.samples[metric].append(per_metric[metric][g])
        return out

    @staticmethod
    def _split(values: np.ndarray, group: np.ndarray, starts: np.ndarray) -> list[np.ndarray]:
        """Each group's finite, positive values (an empty array where it has none)."""
        valid = np.isfinite(values) & (values > 0)
        index = np.cumsum(np.r_[False, group[1:] != group[:-1]])  # the group of each sample
        counts = np.bincount(index[valid], minlength=len(starts))
        return np.split(values[valid], np.cumsum(counts)[:-1])


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
