"""A sweep's tables on disk, under `<sweep>/tables/`: each table as `<name>.parquet` and
`<name>.csv`, and `BUILD`, written last, naming what they were built from (the build key of
`tables.rowcache`), each file's size and time, each column's dtype and the build's warnings.

While `BUILD` still holds (the same key, every file as it was written) the tables are read back
from their Parquet instead of being built again (`current`, `read_frame`): the frames that were
written, each column at the dtype it had (Parquet alone gives strings and all-missing columns
back at other dtypes); the iterations table a few runs or a slice at a time (`StoredIterations`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import chain
from pathlib import Path

from r2bench.errors import InputError
from r2bench.extras import require_report_extra
from r2bench.safeio import (
    JSON_RECORD_LIMIT,
    InputRefused,
    OutsideFolder,
    atomic_write,
    inside,
    read_text_bounded,
    replacing,
)

try:
    import numpy as np
    import pandas as pd
    import pyarrow as pa
    import pyarrow.csv as pa_csv
    import pyarrow.parquet as pq
except ImportError:  # pragma: no cover - tables need the report extra
    pass

BUILD_FILE = "BUILD"
"""In the tables folder, written last: what the tables were built from (see the module doc)."""
WRITE_ROWS = 1 << 20
"""Rows converted to Arrow at a time when a table is written."""
ROW_GROUP_ROWS = 1 << 16
"""Rows per Parquet row group: the rows of a few runs are read a group or two at a time."""
FORMAT = 2
"""Of the BUILD file; a BUILD of another format is never read back (the tables are rebuilt)."""

Dtypes = dict[str, str]
"""Column name -> pandas dtype name, in column order."""


@dataclass(frozen=True)
class TableSlices:
    """One table to write: its consecutive slices (all of it at least once, even empty), with
    the same columns and categories, and its Arrow schema when known up front."""

    name: str
    slices: Iterator[pd.DataFrame]
    schema: pa.Schema | None = None


@dataclass(frozen=True)
class Build:
    """What a tables folder's BUILD file says."""

    key: str
    files: dict[str, list[int]]
    dtypes: dict[str, Dtypes]
    warnings: list[str]


def _paths(out_dir: Path, names: Iterable[str]) -> list[Path]:
    """Every file the tables `names` are written to, Parquet and CSV."""
    return [out_dir / f"{name}.{ext}" for name in names for ext in ("parquet", "csv")]


def write(
    out_dir: Path, tables: list[TableSlices], key: str, warnings: list[str], root: Path | None
) -> list[Path]:
    """Write each table as Parquet and CSV (atomically), then BUILD (only with a key); returns
    the paths. With `root` (the sweep folder), `out_dir` must stay under it once links are
    followed (OutsideFolder otherwise); a link at a table's path is replaced, never written
    through. A folder already holding tables built from `key` is left as it is."""
    require_report_extra("tables")
    if root is not None:
        inside(root, out_dir)
    files = _paths(out_dir, [t.name for t in tables])
    if key and current(out_dir, key, [t.name for t in tables]) is not None:
        return files  # the same runs and code as last time: the same tables are there
    build = out_dir / BUILD_FILE
    if build.is_file() and not build.is_symlink():
        build.unlink()  # a build cut short never looks complete
    out_dir.mkdir(parents=True, exist_ok=True)
    dtypes = {t.name: _write_table(out_dir, t) for t in tables}
    if key:
        stamps = {p.name: _stamp(p) for p in files}
        doc = {"format": FORMAT, "key": key, "files": stamps, "dtypes": dtypes}
        atomic_write(build, json.dumps({**doc, "warnings": warnings}), root)
    return files


def _write_table(out_dir: Path, table: TableSlices) -> Dtypes:
    """`<name>.parquet` and `<name>.csv` from consecutive slices of a table, each file through
    a temporary file and a rename: a sweep's largest table is never held whole or twice.
    Returns the table's column dtypes."""
    first = next(table.slices)
    schema = table.schema or pa.Schema.from_pandas(first, preserve_index=False)
    with (
        replacing(out_dir / f"{table.name}.parquet", durable=False) as parquet_path,
        replacing(out_dir / f"{table.name}.csv", durable=False) as csv_path,
        pq.ParquetWriter(parquet_path, schema) as parquet,
        pa_csv.CSVWriter(csv_path, schema) as csv,
    ):
        for part in chain([first], table.slices):
            chunk = pa.Table.from_pandas(part, schema=schema, preserve_index=False)
            parquet.write_table(chunk, row_group_size=ROW_GROUP_ROWS)
            csv.write_table(chunk)
    return {str(name): str(dtype) for name, dtype in first.dtypes.items()}


def _stamp(path: Path) -> list[int]:
    info = path.stat()
    return [info.st_size, info.st_mtime_ns]


def current(out_dir: Path, key: str, names: list[str], root: Path | None = None) -> Build | None:
    """What BUILD says, when `out_dir` holds the tables `names` built from `key`, every file
    as it was written (and, with `root`, the folder inside it once links are followed); else
    None."""
    build = out_dir / BUILD_FILE
    try:
        if root is not None:
            inside(root, out_dir)
        if build.is_symlink():
            return None
        doc = json.loads(read_text_bounded(build, JSON_RECORD_LIMIT, BUILD_FILE))
        if doc["format"] != FORMAT or doc["key"] != key:
            return None
        found = Build(doc["key"], doc["files"], doc["dtypes"], [str(w) for w in doc["warnings"]])
        unchanged = all(
            not p.is_symlink() and found.files.get(p.name) == _stamp(p)
            for p in _paths(out_dir, names)
        )
        has_types = all(isinstance(found.dtypes.get(name), dict) for name in names)
    except (OSError, ValueError, KeyError, TypeError, AttributeError, InputRefused, OutsideFolder):
        return None
    return found if unchanged and has_types else None


def read_frames(out_dir: Path, names: list[str], build: Build) -> dict[str, pd.DataFrame] | None:
    """The tables `names` read back whole, each column at the dtype it was written with; None
    when a file does not hold what BUILD says (the tables are built again)."""
    try:
        return {
            name: _restored(pq.read_table(out_dir / f"{name}.parquet"), build.dtypes[name])
            for name in names
        }
    except (OSError, ValueError, pa.ArrowException):
        return None


def frame_slices(name: str, frame: pd.DataFrame) -> TableSlices:
    """A table held whole, to write WRITE_ROWS rows at a time."""
    starts = range(0, max(len(frame), 1), WRITE_ROWS)
    slices = (frame.iloc[start : start + WRITE_ROWS] for start in starts)
    return TableSlices(name, slices, pa.Schema.from_pandas(frame, preserve_index=False))


def _read_rows(source: pq.ParquetFile, rows: range) -> pa.Table:
    """The rows `rows` of a Parquet file, reading only the row groups that hold them."""
    groups: list[int] = []
    offset = at = 0
    for group in range(source.num_row_groups):
        size = source.metadata.row_group(group).num_rows
        if at < rows.stop and rows.start < at + size:
            offset = offset if groups else rows.start - at
            groups.append(group)
        at += size
    if not groups and source.num_row_groups:
        groups = [0]  # no rows: none of the first group's, with the table's categories
    if not groups:
        return source.schema_arrow.empty_table()
    return source.read_row_groups(groups).slice(offset, len(rows))


def _restored(table: pa.Table, dtypes: Dtypes) -> pd.DataFrame:
    """The frame of an Arrow table, each column at its written dtype. A column written as
    `object` comes back as strings or floats: it is made `object` again, a missing value
    None (as the table builder makes it)."""
    frame = table.to_pandas()
    if list(frame.columns) != list(dtypes):
        raise ValueError(f"columns {list(frame.columns)} are not those written ({list(dtypes)})")
    for column, dtype in dtypes.items():
        if str(frame[column].dtype) == dtype:
            continue
        if dtype == "object":
            values = frame[column].astype(object)
            frame[column] = values.where(values.notna(), None)
        else:
            frame[column] = frame[column].astype(dtype)
    return frame


class TablesChanged(InputError):
    """A table file was rewritten after its tables were read back (another build ran): the
    command is run again (exit 2)."""


class StoredIterations:
    """The iterations table read back from its Parquet on demand: whole, the rows of a few
    runs, or consecutive slices (the largest table is never read whole to write or draw).
    Each read checks the file is still the one BUILD named (TablesChanged otherwise)."""

    def __init__(self, path: Path, dtypes: Dtypes, stamp: list[int]) -> None:
        self.path = path
        self.dtypes = dtypes
        self.stamp = stamp
        self._rows_of: dict[str, range] | None = None
        self._indexed = False

    def _file(self) -> pq.ParquetFile:
        if not self.path.is_file() or _stamp(self.path) != self.stamp:
            raise TablesChanged(f"{self.path}: rewritten since it was read back; run again")
        return pq.ParquetFile(self.path)

    def __len__(self) -> int:
        return int(self._file().metadata.num_rows)

    def frame(self) -> pd.DataFrame:
        """The whole table."""
        return _restored(self._file().read(), self.dtypes)

    def of_runs(self, run_ids: set[str]) -> pd.DataFrame:
        """The rows of these runs only, in table order: only the row groups that hold them
        are read."""
        source = self._file()
        rows_of = self._index(source)
        if pa.types.is_null(source.schema_arrow.field("run_id").type):
            # No row names a run (an empty table's column has no type): none of these.
            return _restored(source.read().slice(0, 0), self.dtypes)
        if rows_of is None:  # not one stretch per run: filtered on the whole file
            wanted = sorted(run_ids)
            found = pq.read_table(self.path, filters=[("run_id", "in", wanted)])
            return _restored(found, self.dtypes)
        ranges = sorted((rows_of[r] for r in run_ids if r in rows_of), key=lambda r: r.start)
        parts = [_read_rows(source, rows) for rows in ranges] or [_read_rows(source, range(0))]
        return _restored(pa.concat_tables(parts), self.dtypes)

    def _index(self, source: pq.ParquetFile) -> dict[str, range] | None:
        """Where each run's rows are (one stretch per run: the table is written run by run),
        from the run id column alone, read once; None when a run's rows are not one stretch."""
        if not self._indexed:
            self._indexed = True
            ids = source.read(columns=["run_id"]).column("run_id").to_pandas()
            codes = ids.cat.codes.to_numpy() if isinstance(ids.dtype, pd.CategoricalDtype) else None
            if codes is not None:
                edges = np.flatnonzero(np.diff(codes)) + 1
                starts, stops = np.r_[0, edges], np.r_[edges, len(codes)]
                stretches = [(a, b) for a, b in zip(starts, stops, strict=True) if b > a]
                if len(stretches) == len(np.unique(codes)):  # one stretch per run
                    self._rows_of = {
                        str(ids.cat.categories[codes[a]]): range(int(a), int(b))
                        for a, b in stretches
                    }
        return self._rows_of

    def slices(self, rows: int, columns: list[str] | None = None) -> Iterator[pd.DataFrame]:
        """Consecutive slices of about `rows` rows (all of it at least once, even empty);
        only `columns` (None: all) are read."""
        source = self._file()
        empty = True
        dtypes = self.dtypes if columns is None else {c: self.dtypes[c] for c in columns}
        for batch in source.iter_batches(batch_size=rows, columns=columns):
            empty = False
            yield _restored(pa.Table.from_batches([batch]), dtypes)
            # Arrow's allocator keeps what a slice's read freed: give it back, or reading
            # slice after slice holds as much as reading the whole table would.
            pa.default_memory_pool().release_unused()
        if empty:
            yield _restored(source.schema_arrow.empty_table().select(list(dtypes)), dtypes)
