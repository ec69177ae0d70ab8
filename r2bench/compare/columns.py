"""A sweep's samples grouped by cell and run, in columns (numpy), for `samples.cells`.

Each result row gets a cell (its series' code and its CELL_FIELDS' codes) and a group (cell x
run); each timed iteration takes the group of the first result row of its (run, size,
placement); the result rows of a (run, size, placement) without iterations are samples
themselves. The iterations are read a slice at a time, reduced to their group and metric
values, so a million-iteration sweep never holds more than a slice in Python-free columns
beside its two metric columns. One stable sort orders the samples by (cell, run id), each
group's samples in table order (iterations first).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

SLICE_ROWS = 262_144
"""Iteration rows reduced at a time (bounds the memory of the reduction)."""


@dataclass(frozen=True)
class Codes:
    """A key column as integer codes into its distinct normed values: values that norm alike
    share a code, as they share a key."""

    codes: np.ndarray
    values: list[Any]

    @classmethod
    def of(cls, column: pd.Series, norm: Callable[[Any], Any]) -> Codes:
        """The codes of a column, values normed by `norm` (missing: norm(None))."""
        raw, normed = _factorized(column, norm)
        distinct = list(dict.fromkeys(normed))
        position = {value: i for i, value in enumerate(distinct)}
        return cls(_remapped(raw, [position[v] for v in normed]), distinct)

    def lookup(self, column: pd.Series, norm: Callable[[Any], Any]) -> np.ndarray:
        """The codes of other values (-1 where a value is not among these)."""
        raw, normed = _factorized(column, norm)
        position = {value: i for i, value in enumerate(self.values)}
        return _remapped(raw, [position.get(v, -1) for v in normed])


def _factorized(column: pd.Series, norm: Callable[[Any], Any]) -> tuple[np.ndarray, list[Any]]:
    """Codes of the distinct values (numbers and categories stay as they are: no Python
    object per row) and those values normed; a missing value is the last, norm(None)."""
    raw, uniques = pd.factorize(column, use_na_sentinel=True)
    return raw, [*(norm(v) for v in uniques), norm(None)]


def _remapped(raw: np.ndarray, codes: list[int]) -> np.ndarray:
    """`raw` codes (-1: missing, the last of `codes`) as `codes`."""
    out: np.ndarray = np.array(codes, dtype=np.int64)[raw]
    return out


def run_index(column: pd.Series, run_ids: np.ndarray) -> np.ndarray:
    """Each row's place among `run_ids` (-1: another run); a categorical column is looked up
    once per category, not once per row."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        places = pd.Index(run_ids).get_indexer(column.cat.categories.astype(str))
        codes = column.cat.codes.to_numpy()
        index: np.ndarray = np.where(codes >= 0, places[codes], -1)
        return index
    found: np.ndarray = pd.Index(run_ids).get_indexer(column.astype(str))
    return found


def _row_keys(run: np.ndarray, size: np.ndarray, placement: np.ndarray) -> np.ndarray:
    """One int64 per (run, size code, placement code): which result row an iteration is of."""
    keys: np.ndarray = (run.astype(np.int64) << 40) | (size.astype(np.int64) << 20) | placement
    return keys


@dataclass(frozen=True)
class ResultRows:
    """The result rows of complete runs as codes: run, cell fields, series, and each metric."""

    run: np.ndarray  # index into the run ids
    fields: list[Codes]  # CELL_FIELDS order
    series: np.ndarray  # each run's series code
    metrics: dict[str, np.ndarray]
    size: int  # the index of size_bytes among the fields
    placement: int  # ... and of placement

    def cell_of(self) -> np.ndarray:
        """Each row's cell: its series and fields codes as one number, factorized."""
        mixed = self.series[self.run].astype(np.int64)
        for codes in self.fields:
            mixed = mixed * max(1, len(codes.values)) + codes.codes
        cells: np.ndarray = pd.factorize(mixed, sort=False)[0].astype(np.int64)
        return cells


@dataclass(frozen=True)
class Metric:
    """One metric's finite positive values of every group, back to back in group order, and
    where each group's begin (`bounds[g]` to `bounds[g + 1]`): a cell's groups are adjacent,
    so its pooled samples are one slice."""

    values: np.ndarray
    bounds: np.ndarray

    def per_group(self) -> list[np.ndarray]:
        """Each group's values (views, an empty array where a group has none)."""
        return np.split(self.values, self.bounds[1:-1])


@dataclass(frozen=True)
class Groups:
    """Samples grouped by (cell, run), groups in (cell, run id) order: for each group a
    result row of its cell (to key it) and its run; each metric's values; where each cell's
    groups begin (`cells[c]` to `cells[c + 1]`)."""

    row: np.ndarray
    run: np.ndarray
    metrics: dict[str, Metric]
    cells: np.ndarray


def group_samples(
    rows: ResultRows,
    run_ids: np.ndarray,
    slices: Iterable[pd.DataFrame],
    norm: Callable[[Any], Any],
) -> Groups:
    """The samples of every (cell, run): each iteration slice (run_id, size_bytes, placement
    and the metrics) reduced to its group as it is read."""
    n_runs = len(run_ids)
    rank = np.empty(n_runs, dtype=np.int64)
    rank[np.argsort(run_ids, kind="stable")] = np.arange(n_runs)
    group_of_row = rows.cell_of() * n_runs + rank[rows.run]
    keys = _row_keys(rows.run, rows.fields[rows.size].codes, rows.fields[rows.placement].codes)
    unique_keys, first = np.unique(keys, return_index=True)
    covered = np.zeros(len(unique_keys), dtype=bool)
    groups: list[np.ndarray] = []
    values: dict[str, list[np.ndarray]] = {m: [] for m in rows.metrics}
    for part in slices if len(unique_keys) else ():
        it_run = run_index(part["run_id"], run_ids)
        it_size = rows.fields[rows.size].lookup(part["size_bytes"], norm)
        it_place = rows.fields[rows.placement].lookup(part["placement"], norm)
        it_keys = _row_keys(it_run, it_size, it_place)
        pos = np.minimum(np.searchsorted(unique_keys, it_keys), len(unique_keys) - 1)
        matched = (it_run >= 0) & (it_size >= 0) & (it_place >= 0) & (unique_keys[pos] == it_keys)
        covered[pos[matched]] = True
        groups.append(group_of_row[first[pos[matched]]])
        for metric in values:
            values[metric].append(part[metric].to_numpy(dtype=float, na_value=np.nan)[matched])
    rest = ~covered[np.searchsorted(unique_keys, keys)] if len(unique_keys) else slice(None)
    group = np.concatenate([*groups, group_of_row[rest]])
    order = np.argsort(group, kind="stable")
    group = group[order]
    starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    run_at_rank = np.argsort(run_ids, kind="stable")
    row_of_cell = _first_row_of_cell(group_of_row // n_runs)
    cell_of_group = group[starts] // n_runs
    return Groups(
        row_of_cell[cell_of_group],
        run_at_rank[group[starts] % n_runs],
        {
            m: _split(np.concatenate([*parts, rows.metrics[m][rest]])[order], group, starts)
            for m, parts in values.items()
        },
        np.flatnonzero(np.r_[True, cell_of_group[1:] != cell_of_group[:-1], True]),
    )


def _first_row_of_cell(cell_of_row: np.ndarray) -> np.ndarray:
    """For each cell code, a result row of it (its first)."""
    out = np.zeros(int(cell_of_row.max()) + 1 if len(cell_of_row) else 0, dtype=np.int64)
    cells, first = np.unique(cell_of_row, return_index=True)
    out[cells] = first
    return out


def _split(values: np.ndarray, group: np.ndarray, starts: np.ndarray) -> Metric:
    """Each group's finite, positive values."""
    valid = np.isfinite(values) & (values > 0)
    index = np.cumsum(np.r_[False, group[1:] != group[:-1]])  # the group of each sample
    counts = np.bincount(index[valid], minlength=len(starts))
    return Metric(values[valid], np.r_[0, np.cumsum(counts)])
