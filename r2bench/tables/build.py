"""Tidy tables derived from run folders (and only from them: rebuild them at any time).

- `results`: one row per run x size x placement x cycle (nccl-tests result lines)
- `iterations`: one row per timed iteration (`-I 1` per-iteration times from `-J`, else from
  a verifying workload's `#iter` lines: `row_printed` false for a size whose result row never
  printed), with an estimated timestamp when the run printed `-S 1` timestamps or was timed
  by the sweep
- `events`: one row per log event, fault step and RAS verdict
- `runs`: one row per run folder (complete or not): outcome, reason, times, recovery metrics
- `counters`: one row per node x NIC x counter sample (`tables.counters`)
- `windows`: one row per fault cycle applied (`analysis.windows.fault_windows`)
- `provenance`: one row per provenance field of a run
- `training`: one row per update of a training run (`tables.training`)
- `training_checks`: one row per training run, its checks against its baseline run
  (`analysis.training`)
- `recovery_cost`: one row per training run with a recovery strategy, what the fault cost it
  (`analysis.recovery_cost`)

Every time is on the controller's clock. `build_tables(sweep_dir)` reads the tables back from
`results/<sweep>/tables/` while they are current (`tables.tablefiles`: built by this code from
the run folders as they are now); else it takes each run folder's rows (`tables.rows`: kept from
an earlier build by `tables.rowcache`, else parsed) and makes one DataFrame per table; per-run
settings (experiment, library, env columns such as R2CC_MODE, scenario, repeat, outcome) are
joined onto `results` from `runs` in one merge. `rebuild` also writes each table as Parquet and
CSV there.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from r2bench.analysis import recovery
from r2bench.analysis.metrics import MIN_BASELINE
from r2bench.analysis.parsedrun import ParsedRun
from r2bench.analysis.recovery_cost import METRICS as COST_METRICS
from r2bench.analysis.training import CHECK_COLUMNS, TrainingRun, check_all
from r2bench.extras import require_report_extra
from r2bench.runfolder import runformat
from r2bench.runfolder import store as st
from r2bench.tables import rowcache, tablefiles, training
from r2bench.tables.counters import empty_counters, typed_counters
from r2bench.tables.recovery_cost import RECOVERY_COLUMNS, recovery_rows
from r2bench.tables.rows import (
    INCOMPLETE,
    INVALID,
    PROVENANCE_COLUMNS,
    RAS_VERDICT,
    RUN_KEYS,
    RUN_ROW_KEYS,
    TRAFFIC_COLUMNS,
    WINDOW_COLUMNS,
    Cols,
    IterBlocks,
    RunRows,
    env_column,
    folder_rows,
)

# Tables need the `report` extra (pandas here, pyarrow in tables.tablefiles); a module that
# only parses a run imports analysis.parsedrun instead.
try:
    import numpy as np
    import pandas as pd
except ImportError:  # pragma: no cover - exercised in a subprocess test
    pass

__all__ = [
    "INCOMPLETE",
    "INVALID",
    "RAS_VERDICT",
    "TABLE_NAMES",
    "WINDOW_COLUMNS",
    "Tables",
    "build_tables",
    "env_column",
    "rebuild",
    "write_tables",
]

TABLE_NAMES = (
    *("results", "iterations", "events", "runs", "counters", "windows", "provenance"),
    *("traffic", "training", "training_checks", "recovery_cost"),
)
MAX_WORKERS = 8
PARALLEL_MIN_RUNS = 64


# --------------------------------------------------------------------------- frames


def _assemble(rows: RunRows) -> Tables:
    """The frames of merged rows; each table's lists are let go once its frame is made (a
    large sweep's rows and frames are never all held at once)."""
    env_names = sorted(rows.env_names)
    runs = _runs_frame(rows.runs, env_names)
    results = _frame(rows.results)
    rows.results = Cols(rows.results.names)
    blocks, rows.iters = rows.iters, IterBlocks()
    if rows.thin:
        clean = set(_fault_free(runs)["run_id"])
        chosen = [i for i, run_id in enumerate(blocks.run_id) if run_id in clean]
        iterations = _iterations_frame(blocks.select(chosen))
        measured = _series_baselines(runs, iterations, results, rows.thin)
        runs = _with_series_baselines(runs, measured)
    results = _join_run_columns(results, runs, sorted(rows.env_names))
    trained = training.training_runs(rows.training.data, rows.training_runs)
    updates = _training_frame(rows.training.data)
    rows.training = Cols(rows.training.names)
    return Tables(
        results=results,
        blocks=blocks,
        events=_typed_events(_frame(rows.events)),
        runs=runs,
        counters=typed_counters(_frame(rows.counters)),
        windows=_typed_windows(_frame(rows.windows)),
        provenance=_frame(rows.provenance),
        traffic=_typed_traffic(_frame(rows.traffic)),
        training=updates,
        training_checks=_checks_frame(trained),
        recovery_cost=recovery_frame(recovery_rows(rows.training_runs, trained)),
        warnings=list(rows.warnings),
    )


def _frame(cols: Cols) -> pd.DataFrame:
    return pd.DataFrame(cols.data, columns=list(cols.names))


def _series_baselines(
    runs: pd.DataFrame, iterations: pd.DataFrame, results: pd.DataFrame, thin: list[ParsedRun]
) -> dict[str, dict[str, Any]]:
    """run id -> the recovery columns of each thin run measured against the fault-free runs
    of its series instead (the median of their samples per size); the basis says so. Runs
    whose series has no pool are left out (their own columns stand)."""
    pools = _fault_free_pools(runs, iterations, results)
    measured = {}
    for run in thin:
        pool = pools.get(recovery.series_key(run.record.spec))
        if pool:
            columns = recovery.compute(run, pool, recovery.SERIES_NOTE).columns()
            measured[run.record.run_id] = columns
    return measured


def _with_series_baselines(runs: pd.DataFrame, measured: dict[str, dict[str, Any]]) -> pd.DataFrame:
    """A copy of the runs table with the thin runs' columns measured against their series
    (`_series_baselines`); the frame the rows were built into is left as it was."""
    out = runs.copy()
    index = {run_id: i for i, run_id in enumerate(out["run_id"])}
    for run_id, columns in measured.items():
        for key, value in columns.items():
            out.at[index[run_id], key] = value
    return out


def _fault_free_pools(
    runs: pd.DataFrame, iterations: pd.DataFrame, results: pd.DataFrame
) -> dict[tuple[Any, Any], dict[int, float]]:
    """(library, R2CC_MODE) -> size -> median busbw over the fault-free runs' iterations (or
    result rows, for runs without per-iteration times)."""
    clean = _fault_free(runs)
    if clean.empty:
        return {}
    ids = set(clean["run_id"])
    its = iterations[iterations["run_id"].isin(ids)]
    with_iters = set(its["run_id"].astype(str))
    rows = results[results["run_id"].isin(ids - with_iters) & (results["placement"] != "")]
    samples = pd.concat(
        [
            its[["run_id", "size_bytes", "busbw_gbps"]].astype({"run_id": str}),
            rows[["run_id", "size_bytes", "busbw_gbps"]],
        ]
    )
    mode = clean["R2CC_MODE"] if "R2CC_MODE" in clean else pd.Series(None, index=clean.index)
    series = clean[["run_id", "library"]].assign(mode=mode.astype("string").fillna("-"))
    keyed = samples.merge(series, on="run_id")
    out: dict[tuple[Any, Any], dict[int, float]] = {}
    for (lib, mode, size), values in keyed.groupby(["library", "mode", "size_bytes"], dropna=False)[
        "busbw_gbps"
    ]:
        values = values.dropna()
        if len(values) >= MIN_BASELINE:
            key = (lib, None if mode == "-" else str(mode))
            out.setdefault(key, {})[int(size)] = float(values.median())
    return out


def _categories(blocks: IterBlocks) -> dict[str, list[str]]:
    """The iterations table's categories: every run id and placement of the blocks."""
    return {"run_id": sorted(set(blocks.run_id)), "placement": sorted(set(blocks.placement))}


def _fault_free(runs: pd.DataFrame) -> pd.DataFrame:
    """The complete runs of scenario `none` with no fault: the baseline of their series."""
    return runs[(runs["scenario"] == "none") & (runs["n_faults"] == 0) & runs["complete"]]


def _runs_frame(rows: list[dict[str, Any]], env_names: list[str]) -> pd.DataFrame:
    cols: dict[str, list[Any]] = {}
    keys = [k for k in rows[0] if k != "env"] if rows else list(RUN_ROW_KEYS)
    for key in keys:
        cols[key] = [r[key] for r in rows]
    for name in env_names:
        cols[env_column(name)] = [r["env"].get(name) for r in rows]
    frame = pd.DataFrame(cols)
    for name in ("repeat", "ranks", "gpus_per_rank", "n_nodes", "failed_rank", "exit_code"):
        frame[name] = frame[name].astype("Int64")
    return frame


def _join_run_columns(results: pd.DataFrame, runs: pd.DataFrame, env: list[str]) -> pd.DataFrame:
    """Put the per-run columns (experiment, library, env, scenario, ...) onto every result row."""
    keys = ["run_id", *RUN_KEYS[:3], *(env_column(n) for n in env), *RUN_KEYS[3:]]
    merged = results.merge(runs[keys], on="run_id", how="left", sort=False)
    order = [*keys, *(c for c in results.columns if c != "run_id")]
    merged = merged[order]
    merged["wrong"] = merged["wrong"].astype("Int64")
    return merged


def _iterations_frame(
    b: IterBlocks, categories: dict[str, list[str]] | None = None
) -> pd.DataFrame:
    """One row per iteration from the per-block columns; each temporary array is dropped as
    soon as it is used (at 10,000 runs a column is about 100 MB)."""
    n = np.asarray(b.n, dtype=np.int64)
    times = np.array(b.times, dtype=np.float64)
    ends = np.cumsum(n)
    index = np.arange(len(times), dtype=np.int64) - np.repeat(ends - n, n)
    csum = np.cumsum(times)
    after_s = (csum[np.repeat(ends - 1, n)] - csum) / 1e6 if len(times) else csum
    del csum
    timestamp = np.repeat(np.asarray(b.end_time, dtype=np.float64), n)
    timestamp -= after_s
    del after_s
    size = np.repeat(np.asarray(b.size_bytes, dtype=np.int64), n)
    with np.errstate(divide="ignore", invalid="ignore"):
        busbw = size / (times * 1e3)
        busbw *= np.repeat(np.asarray(b.bus_factor, dtype=np.float64), n)
    busbw[~(times > 0)] = np.nan
    columns = {
        "run_id": _repeated_categories(b.run_id, n, (categories or {}).get("run_id")),
        "size_bytes": size,
        "placement": _repeated_categories(b.placement, n, (categories or {}).get("placement")),
        "cycle": np.repeat(np.asarray(b.cycle, dtype=np.int64), n),
        "iteration": index,
        "time_us": times,
        "busbw_gbps": busbw,
        "timestamp": timestamp,
        "row_printed": np.repeat(np.asarray(b.row_printed, dtype=bool), n),
    }
    del size, index, times, busbw, timestamp
    return pd.DataFrame(columns)


def _repeated_categories(
    values: list[str], n: np.ndarray, categories: list[str] | None = None
) -> pd.Categorical:
    """A categorical of each block's value repeated `n` times, coded per block (never an
    object array of every row); `categories` (sorted) those of the whole table."""
    if categories is None:
        found, codes = np.unique(np.asarray(values, dtype=object), return_inverse=True)
        return pd.Categorical.from_codes(np.repeat(codes, n), categories=found)
    index = {value: i for i, value in enumerate(categories)}
    codes = np.asarray([index[v] for v in values], dtype=np.int64)
    return pd.Categorical.from_codes(np.repeat(codes, n), categories=categories)


def _typed_windows(frame: pd.DataFrame) -> pd.DataFrame:
    for name in ("fault", "cycle"):
        frame[name] = frame[name].astype("int64")
    for name in (
        *("applied_at", "back_at", "before_bytes", "live_bytes", "after_bytes"),
        "link_back_at",
    ):
        frame[name] = frame[name].astype("float64")
    frame["iteration"] = frame["iteration"].astype("Int64")
    for name in ("verdict", "after_what", "evidence", "ended_by"):
        frame[name] = frame[name].astype(object)
    return frame


def _typed_traffic(frame: pd.DataFrame) -> pd.DataFrame:
    for name in ("iteration", "size_bytes"):
        frame[name] = frame[name].astype("int64")
    for name in ("start", "end", "tx_bytes", "rx_bytes"):
        frame[name] = frame[name].astype("float64")
    frame["completed"] = frame["completed"].astype(bool)
    return frame


def empty_traffic() -> pd.DataFrame:
    """The traffic table of a sweep without NIC faults."""
    return _typed_traffic(pd.DataFrame({name: [] for name in TRAFFIC_COLUMNS}))


def empty_windows() -> pd.DataFrame:
    """The windows table of a sweep without faults (or of tables written before it existed)."""
    return _typed_windows(pd.DataFrame({name: [] for name in WINDOW_COLUMNS}))


def empty_provenance() -> pd.DataFrame:
    """The provenance table with no rows."""
    return pd.DataFrame({name: pd.Series([], dtype=object) for name in PROVENANCE_COLUMNS})


_TRAINING_FLOATS = ("start", "end", "step_s", "loss", "tokens_per_s", "grad_norm")
_CHECK_FLOATS = (
    *("hit_step_s", "step_s_median_before", "step_s_median", "overhead_pct"),
    *("max_abs_dloss_after", "final_loss_delta", "eval_ppl_delta_pct", "tokens_per_s"),
)


def _training_frame(columns: dict[str, list[Any]]) -> pd.DataFrame:
    """The `training` table from its columns, typed (an empty one keeps its columns)."""
    texts = ("run_id", "library", "scenario", "digest")
    frame = pd.DataFrame(
        {  # texts as objects: a missing one stays None (pandas would make a str column of NaN)
            name: pd.Series(columns.get(name, []), dtype=object if name in texts else None)
            for name in training.TRAINING_COLUMNS
        }
    )
    frame["repeat"] = frame["repeat"].astype("Int64")
    for name in ("update", "allreduce_bytes"):
        frame[name] = frame[name].astype("int64")
    for name in _TRAINING_FLOATS:
        frame[name] = frame[name].astype("float64")
    frame["digests_agree"] = frame["digests_agree"].astype("boolean")
    return frame


def recovery_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """The `recovery_cost` table, typed (an empty one keeps its columns)."""
    floats = ("fault_at", "step_s", *COST_METRICS)
    frame = pd.DataFrame(
        {
            name: pd.Series(
                [r.get(name) for r in rows], dtype="float64" if name in floats else object
            )
            for name in RECOVERY_COLUMNS
        }
    )
    for name in ("repeat", "frontier"):
        frame[name] = frame[name].astype("Int64")
    return frame


def _checks_frame(runs: list[TrainingRun]) -> pd.DataFrame:
    """The `training_checks` table: a row per training run, checked against its baseline
    (`analysis.training.check_all`)."""
    rows = [c.row() for c in check_all(runs)]
    texts = ("run_id", "library", "scenario", "baseline_run_id", "first_difference", "sentence")
    frame = pd.DataFrame(
        {
            name: pd.Series([r[name] for r in rows], dtype=object if name in texts else None)
            for name in CHECK_COLUMNS
        }
    )
    for name in ("repeat", "first_difference_update", "hit_update"):
        frame[name] = frame[name].astype("Int64")
    frame["identical"] = frame["identical"].astype("boolean")
    for name in _CHECK_FLOATS:
        frame[name] = frame[name].astype("float64")
    return frame


def _typed_events(frame: pd.DataFrame) -> pd.DataFrame:
    for name in ("line", "pid", "rank", "fault", "cycle"):
        frame[name] = frame[name].astype("Int64")
    frame["time"] = frame["time"].astype("float64")
    frame["ok"] = frame["ok"].astype("boolean")
    return frame


# --------------------------------------------------------------------------- public API


class _Iterations:
    """The `iterations` field of `Tables`: a frame, or made from the compact per-block form
    (`Tables.blocks`) the first time it is read."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.slot = f"_{name}"

    def __get__(self, tables: Tables | None, owner: type | None = None) -> Any:
        if tables is None:
            return None  # the field's default: made from the blocks
        frame = tables.__dict__.get(self.slot)
        if frame is None and tables.stored_iterations is not None:
            frame = tables.stored_iterations.frame()
            tables.__dict__[self.slot], tables.stored_iterations = frame, None
        elif frame is None:
            blocks = tables.blocks or IterBlocks()
            frame = _iterations_frame(blocks, _categories(blocks))
            tables.__dict__[self.slot], tables.blocks = frame, None
        return frame

    def __set__(self, tables: Tables, frame: pd.DataFrame | None) -> None:
        tables.__dict__[self.slot] = frame


RunTable = Literal["windows", "counters", "events", "traffic"]
"""Tables with a run_id column that the report reads run by run (`Tables.of_run`)."""


@dataclass
class Tables:
    """The tidy tables of a sweep.

    `iterations` (one row per timed iteration: 11.8 million at 10,000 runs) may be kept in
    its compact per-block form (`blocks`), or left in its Parquet file (`stored_iterations`,
    tables read back), and made into a frame on first read; a reader that needs a few runs
    asks `iterations_of`, and `write_tables` writes it a slice at a time, so a report never
    holds it whole."""

    results: pd.DataFrame
    iterations: _Iterations = _Iterations()
    events: pd.DataFrame = field(default_factory=lambda: pd.DataFrame())
    runs: pd.DataFrame = field(default_factory=lambda: pd.DataFrame())
    counters: pd.DataFrame = field(default_factory=empty_counters)
    windows: pd.DataFrame = field(default_factory=empty_windows)
    provenance: pd.DataFrame = field(default_factory=empty_provenance)
    traffic: pd.DataFrame = field(default_factory=empty_traffic)
    training: pd.DataFrame = field(default_factory=lambda: _training_frame({}))
    training_checks: pd.DataFrame = field(default_factory=lambda: _checks_frame([]))
    recovery_cost: pd.DataFrame = field(default_factory=lambda: recovery_frame([]))
    """A row per training run with a recovery strategy: what the fault cost it."""
    warnings: list[str] = field(default_factory=list)
    """Runs skipped or counted once, values left out: one line each, naming file and field."""
    build_key: str = ""
    """What the tables were built from (tables.rowcache.build_key); empty when unknown."""
    blocks: IterBlocks | None = field(default=None, repr=False, compare=False)
    stored_iterations: tablefiles.StoredIterations | None = field(
        default=None, repr=False, compare=False
    )
    _by_run: dict[str, tuple[pd.DataFrame, dict[str, pd.DataFrame]]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    """`of_run`'s split of each per-run table, with the frame it was made from."""

    @property
    def _made(self) -> pd.DataFrame | None:
        """The iterations frame if it was made (or given)."""
        return self.__dict__.get("_iterations")

    @property
    def n_iterations(self) -> int:
        """Rows of the iterations table, without making it."""
        if self._made is not None:
            return len(self._made)
        if self.stored_iterations is not None:
            return len(self.stored_iterations)
        return len(self.blocks.times) if self.blocks else 0

    def iterations_of(self, run_ids: Iterable[str]) -> pd.DataFrame:
        """The iterations table's rows of these runs only."""
        ids = {str(r) for r in run_ids}
        if self._made is None and self.stored_iterations is not None:
            return self.stored_iterations.of_runs(ids)
        if self._made is not None or self.blocks is None:
            frame = self.iterations
            return frame[frame["run_id"].astype(str).isin(ids)]
        blocks = self.blocks
        chosen = [i for i, run_id in enumerate(blocks.run_id) if run_id in ids]
        return _iterations_frame(blocks.select(chosen), _categories(blocks))

    def of_run(self, table: RunTable, run_id: str) -> pd.DataFrame:
        """The rows of one run in a per-run table (`windows`, `counters`, `events`,
        `traffic`), in table order. The table is split by run once and the split kept while
        the table is the same frame: a report's figures ask run by run, and filtering the
        whole table each time costs its length per figure."""
        frame: pd.DataFrame = getattr(self, table)
        kept = self._by_run.get(table)
        if kept is None or kept[0] is not frame:
            if frame.empty or "run_id" not in frame:
                split: dict[str, pd.DataFrame] = {}
            else:
                keys = frame["run_id"].astype(str)
                split = {str(k): rows for k, rows in frame.groupby(keys, sort=False)}
            kept = self._by_run[table] = (frame, split)
        rows = kept[1].get(str(run_id))
        return frame.iloc[0:0] if rows is None else rows

    def iteration_slices(
        self, rows: int, columns: list[str] | None = None
    ) -> Iterator[pd.DataFrame]:
        """The iterations table in consecutive slices of about `rows` rows (all of it at
        least once, even empty), each with the whole table's categories; read back, only
        `columns` are read (the other forms may hold more)."""
        if self._made is None and self.stored_iterations is not None:
            yield from self.stored_iterations.slices(rows, columns)
            return
        if self._made is not None or self.blocks is None:
            frame = self.iterations
            for start in range(0, max(len(frame), 1), rows):
                yield frame.iloc[start : start + rows]
            return
        blocks, first, count = self.blocks, 0, 0
        categories = _categories(blocks)
        for i, n in enumerate(blocks.n):
            count += n
            if count >= rows:
                yield _iterations_frame(blocks.select(range(first, i + 1)), categories)
                first, count = i + 1, 0
        if first < len(blocks.n) or not blocks.n:
            yield _iterations_frame(blocks.select(range(first, len(blocks.n))), categories)

    def items(self) -> list[tuple[str, pd.DataFrame]]:
        """(name, frame) pairs in TABLE_NAMES order (the iterations table made whole)."""
        return [(name, getattr(self, name)) for name in TABLE_NAMES]


def build_tables(sweep_dir: Path, workers: int | None = None, keep: bool = False) -> Tables:
    """The tables of a sweep: read back from its tables folder while they are current (built
    by this code from the run folders as they are now), else built from each run folder's rows,
    kept from an earlier build while the folder is unchanged (tables.rowcache), else parsed
    (and, with `keep`, kept for the next build: `rebuild` keeps them beside the tables it
    writes).

    Many runs to parse are parsed by `workers` processes (default: one per CPU, at most 8);
    rows keep folder order. A folder holding the same spec.json run id as an earlier one (a
    copy) is counted once, with a warning.
    """
    require_report_extra("tables")
    sweep_dir = Path(sweep_dir)
    store = st.RunStore.at(sweep_dir)
    paths = list(store.run_dirs())
    links = store.links_out()
    prints = {path: rowcache.fingerprint(path) for path in paths}
    key = rowcache.build_key(sweep_dir, prints, links)
    stored = _read_back(sweep_dir, key)
    if stored is not None:
        return stored
    kept = {path: rowcache.is_kept(sweep_dir, path, prints[path]) for path in paths}
    jobs = [(path, prints[path]) for path in paths if not kept[path]]
    builder, copies = RunRows(sweep_dir), _Copies()
    with ExitStack() as stack:
        parsed = _parse_all(stack, sweep_dir, jobs, workers, keep)  # in folder order
        for path in paths:
            one = _kept_rows(sweep_dir, path, prints[path]) if kept[path] else next(parsed)
            if copies.first_of(path, one):
                builder.merge(one)
    builder.warnings[:0] = [*links, *copies.warnings]
    tables = _assemble(builder)
    tables.build_key = key
    return tables


def _kept_rows(sweep_dir: Path, path: Path, prints: rowcache.Prints | None) -> RunRows:
    """A run folder's rows kept by an earlier build, or parsed when they cannot be read."""
    doc = rowcache.load(sweep_dir, path, prints)
    rows = RunRows.from_doc(sweep_dir, doc) if doc is not None else None
    return rows if rows is not None else _parse_one(sweep_dir, (path, None), False)


@dataclass
class _Copies:
    """Which run folders hold a run id an earlier folder holds (a copy): those are left out.
    The attempts a resumed sweep moved aside share their run's id by design and are kept."""

    seen: dict[str, Path] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def first_of(self, path: Path, rows: RunRows) -> bool:
        """Whether `path` (whose rows are `rows`) is the first folder of its run id."""
        run_id = None if st.is_moved_aside(path.name) else rows.spec_run_id
        first = self.seen.setdefault(run_id, path) if run_id else path
        if first is not path:
            self.warnings.append(
                f"{path}: the same run id as {first.name} (spec.json run_id {run_id}); counted once"
            )
        return first is path


def _read_back(sweep_dir: Path, key: str) -> Tables | None:
    """The tables written under the sweep's tables folder by a build from `key`; None when
    there are none (or they cannot be read: they are built again)."""
    out_dir = sweep_dir / runformat.TABLES_DIR
    build = tablefiles.current(out_dir, key, list(TABLE_NAMES), root=sweep_dir)
    if build is None:
        return None
    frames = tablefiles.read_frames(out_dir, [n for n in TABLE_NAMES if n != "iterations"], build)
    if frames is None:
        return None
    path = out_dir / "iterations.parquet"
    tables = Tables(**frames, warnings=list(build.warnings), build_key=key)
    tables.stored_iterations = tablefiles.StoredIterations(
        path, build.dtypes["iterations"], build.files[path.name]
    )
    return tables


def _parse_one(sweep_dir: Path, job: tuple[Path, rowcache.Prints | None], keep: bool) -> RunRows:
    """One run folder's rows, parsed (and, with `keep`, kept: `rows.folder_rows`)."""
    path, prints = job
    return folder_rows(sweep_dir, path, prints, keep)


def _parse_all(
    stack: ExitStack,
    sweep_dir: Path,
    jobs: list[tuple[Path, rowcache.Prints | None]],
    workers: int | None,
    keep: bool,
) -> Iterator[RunRows]:
    """The rows of each job, in order, as they come: many in `workers` processes."""
    workers = min(workers or os.cpu_count() or 1, MAX_WORKERS)
    if workers < 2 or len(jobs) < PARALLEL_MIN_RUNS:
        return (_parse_one(sweep_dir, job, keep) for job in jobs)
    chunk = max(1, len(jobs) // (workers * 8))
    n = len(jobs)
    pool = stack.enter_context(ProcessPoolExecutor(max_workers=workers))
    return pool.map(_parse_one, [sweep_dir] * n, jobs, [keep] * n, chunksize=chunk)


def write_tables(tables: Tables, out_dir: Path, root: Path | None = None) -> list[Path]:
    """Write each table as `<name>.parquet` and `<name>.csv` (atomically), then what they were
    built from (`tables.tablefiles`); returns the paths. With `root` (the sweep folder),
    `out_dir` must stay under it once links are followed (OutsideFolder otherwise); a link at
    a table's path is replaced, never written through."""
    require_report_extra("tables")
    parts = [_table_slices(tables, name) for name in TABLE_NAMES]
    return tablefiles.write(out_dir, parts, tables.build_key, tables.warnings, root)


def _table_slices(tables: Tables, name: str) -> tablefiles.TableSlices:
    """One table to write, a slice at a time (the iterations table is never made whole)."""
    if name == "iterations":
        return tablefiles.TableSlices(name, tables.iteration_slices(tablefiles.WRITE_ROWS))
    return tablefiles.frame_slices(name, getattr(tables, name))


def rebuild(sweep_dir: Path) -> Tables:
    """Build the tables of a sweep and write them under `<sweep>/tables/`."""
    tables = build_tables(sweep_dir, keep=True)
    write_tables(tables, Path(sweep_dir) / runformat.TABLES_DIR, Path(sweep_dir))
    return tables
