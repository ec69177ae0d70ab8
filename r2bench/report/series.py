"""Which runs may share a line in a figure, and which series is another's baseline.

A series holds the runs that differ only by repeat: same collective, library, its family
(nccl, rccl, r2ccl) and version (and whether the library is proven or guessed), R2CC_MODE,
scenario, nccl-tests version, GPU model, host set, ranks (processes), GPUs per rank, nodes,
transport (from NCCL's `via ...` lines) and every NCCL_*/R2CC_* variable whose value differs
between the runs of the sweep. An imported log that names no library version is never the same
version as another file's; imported runs of different files that nothing tells apart are drawn
per file, and the report says so, instead of being averaged into a value no run had. Only runs that ended `ok` go into busbw and
overhead figures; the others are counted beside them.

A series' baseline is the no-fault series (scenario `none`) with the same context (everything
above except library, its version, mode, scenario and R2CC_* variables): stock NCCL when the
sweep has it, else the same library and mode. A series is never its own baseline, nor is a
series whose results are identical to it (a copy of the same log).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from r2bench.config.r2ccl import is_r2cc_variable

MODE_ENV = "R2CC_MODE"
BASELINE_SCENARIO = "none"
STOCK_LIBRARY = "nccl"
STOCK_RECIPES = frozenset({"nccl", "system", "nccl-upstream", "emulated-nccl"})
"""Recipes of stock NCCL: a sweep labels its libraries freely (`stock`, `baseline`...)."""


def is_stock(row: Mapping[str, Any]) -> bool:
    """Stock NCCL: built from a stock recipe, or (imported logs) proven to be NCCL."""
    return (
        _text(row.get("library_recipe")) in STOCK_RECIPES
        or _text(row.get("library")) == STOCK_LIBRARY
    )


DEVICE_COLUMNS = ("device_kind", "device")
"""The runs table's device-kind column, where the records name it (`cpu`, `gpu`)."""
EMULATED_RECIPE_PREFIX = "emulated"
CPU = "CPU"


def is_cpu(row: Mapping[str, Any]) -> bool:
    """Whether the run's ranks ran on CPUs: the runs table's device kind where it has one,
    else a recipe of r2bench's emulated libraries (the CPU emulator over TCP)."""
    for column in DEVICE_COLUMNS:
        kind = _text(row.get(column)).strip().lower()
        if kind:
            return kind.startswith("cpu")
    return _text(row.get("library_recipe")).startswith(EMULATED_RECIPE_PREFIX)


OK = "ok"
GROUPED_ENV_PREFIXES = ("NCCL_", "R2CC_")
_ENV_COLUMN_RE = re.compile(r"^(env:)?[A-Z_][A-Z0-9_]*$")
# (column, label prefix) of the fixed parts of a series key, in label order.
FIXED_KEYS = (
    "collective",
    "library",
    "library_family",
    "library_version",
    "mode",
    "transport",
    "gpu",
    "hosts",
    "ranks",
    "gpus_per_rank",
    "n_nodes",
    "nccl_tests_version",
    "scenario",
)
# Parts of the key a baseline may differ in.
VARIANT_KEYS = ("library", "library_family", "library_version", "mode", "scenario")
UNKNOWN_VERSION = "unknown"
# Always named in a label (the rest only when they vary between series).
ALWAYS_LABELLED = ("collective", "library", "mode", "scenario")


def env_columns(runs: pd.DataFrame) -> list[str]:
    """Columns of `runs` that hold environment variables (upper-case names)."""
    return [c for c in runs.columns if _ENV_COLUMN_RE.match(str(c))]


def _env_name(column: str) -> str:
    return column.removeprefix("env:")


def grouping_env(runs: pd.DataFrame) -> list[str]:
    """NCCL_*/R2CC_* env columns (R2CC_MODE aside: it is `mode`) whose value differs between
    runs (unset counts as a value)."""
    out = []
    for col in env_columns(runs):
        name = _env_name(col)
        if name == MODE_ENV or not name.startswith(GROUPED_ENV_PREFIXES):
            continue
        if runs[col].astype("object").where(runs[col].notna(), None).nunique(dropna=False) > 1:
            out.append(col)
    return out


def _text(value: Any) -> str:
    if value is None or (isinstance(value, float) and value != value) or value is pd.NA:
        return ""
    return str(value)


def _library(row: Mapping[str, Any]) -> str:
    lib = _text(row.get("library"))
    basis = _text(row.get("library_basis"))
    return f"{lib} (guessed)" if basis.startswith("guess") else lib


@dataclass(frozen=True)
class SeriesInfo:
    """The series of every run of a sweep."""

    runs: pd.DataFrame  # run_id, outcome, series (label), plus one column per key part
    keys: list[str]  # key columns, in label order
    env: list[str]  # the env columns among `keys`
    shared: str  # what every series has in common, as text

    def ok_runs(self) -> pd.DataFrame:
        """Runs that ended ok."""
        return self.runs[self.runs["outcome"] == OK]

    def left_out(self) -> str:
        """`N runs left out (not ok): 3 crashed, 2 timeout`, or '' when none was."""
        bad = self.runs[self.runs["outcome"] != OK]
        if bad.empty:
            return ""
        counts = Counter(bad["outcome"].astype(str))
        parts = ", ".join(f"{n} {name}" for name, n in sorted(counts.items()))
        return f"{len(bad)} run{'s' if len(bad) != 1 else ''} left out (did not end ok): {parts}"


# How a key's value reads in a label.
_LABEL_FORMATS = {
    "mode": "mode {}",
    "gpus_per_rank": "{} GPU/rank",
    "nccl_tests_version": "nccl-tests {}",
    "library_family": "{} family",
    "hosts": "on {}",
    "source": "from {}",
}


def _part(key: str, value: str) -> str:
    if key == "gpus_per_rank" and value == CPU:
        return "CPU ranks"
    if key in _LABEL_FORMATS:
        return _LABEL_FORMATS[key].format(value)
    if key in ("ranks", "n_nodes"):
        noun = "rank" if key == "ranks" else "node"
        return f"{value} {noun}{'s' if value != '1' else ''}"
    if key == "transport":
        return value or "transport not logged"
    if key == "library_version":
        return value if value.startswith(UNKNOWN_VERSION) else f"v{value}"
    if key.startswith(("env:", "NCCL_", "R2CC_")):
        return f"{_env_name(key)}={value}"
    return value


def series_info(runs: pd.DataFrame) -> SeriesInfo:
    """Series key and label of every run (labels are plain text: escape where shown)."""
    frame = runs.copy()
    frame["mode"] = frame[MODE_ENV] if MODE_ENV in frame.columns else None
    records = frame.to_dict("records")  # rows as dicts: iterrows costs ~50 us a row
    frame["stock"] = [is_stock(r) for r in records]
    frame["library"] = [_library(r) for r in records]
    frame["library_family"] = _column(frame, "library_recipe")
    frame["hosts"] = _column(frame, "nodes")
    frame["source"] = [_source(v) for v in _column(frame, "imported_from")]
    # A CPU rank has no GPU: its series says CPU, not `1 GPU/rank`.
    frame["gpus_per_rank"] = [
        CPU if is_cpu(r) else v
        for r, v in zip(records, _column(frame, "gpus_per_rank"), strict=True)
    ]
    env = grouping_env(frame)
    keys = [*FIXED_KEYS[:-1], *env, FIXED_KEYS[-1]]
    for key in keys:
        if key not in frame.columns:
            frame[key] = None
        frame[key] = [_text(v) for v in frame[key]]
    # 2.28.9+cuda13.0 (NCCL's line) is 2.28.9; an imported log that names no version is
    # its own: two unknowns from two files are not the same library.
    frame["library_version"] = [
        _text(v).split("+")[0] or (f"{UNKNOWN_VERSION} ({src})" if src else "")
        for v, src in zip(frame["library_version"], frame["source"], strict=True)
    ]
    untold = _untold(frame, keys)
    if untold:
        keys.append("source")
    varying = [k for k in keys if frame[k].nunique() > 1]
    if len(frame) and frame.groupby("library")["library_family"].nunique().max() <= 1:
        varying = [k for k in varying if k != "library_family"]  # the library's label says it
    labelled = [k for k in keys if k in ALWAYS_LABELLED or k in varying]
    frame["series"] = [
        " · ".join(_part(k, row[k]) for k in labelled if row[k] != "" or k == "transport")
        for row in frame[labelled].to_dict("records")
    ]
    constant = [
        k for k in keys if k not in labelled and frame[k].nunique() == 1 and k != "library_family"
    ]
    shared = ", ".join(_part(k, frame[k].iloc[0]) for k in constant if frame[k].iloc[0] != "")
    if "transport" in constant and frame["transport"].iloc[0] == "":
        shared += (", " if shared else "") + "transport not logged (no NCCL INFO `via` lines)"
    if untold:
        shared += (". " if shared else "") + (
            f"{untold} series held imported runs of different files that nothing in the logs "
            "tells apart (same library, version, GPU and hosts, or none of them printed): "
            "each file is drawn on its own, not averaged with the others"
        )
    cols = ["run_id", "outcome", "series", "stock", *keys]
    return SeriesInfo(frame[cols].reset_index(drop=True), keys, env, shared)


def _column(frame: pd.DataFrame, name: str) -> list[Any]:
    return list(frame[name]) if name in frame.columns else [None] * len(frame)


def _source(imported_from: Any) -> str:
    """The file an imported run came from (without the `(runN)` of a file holding several),
    '' for runs r2bench ran itself."""
    return _text(imported_from).split(" (run", 1)[0]


def _untold(frame: pd.DataFrame, keys: list[str]) -> int:
    """Series (by `keys`) that hold imported runs of more than one file: runs r2bench cannot
    tell apart, which a median would mix into a value no run had."""
    if not frame["source"].astype(bool).any():
        return 0
    imported = frame[frame["source"] != ""]
    sources = imported.groupby(keys, dropna=False)["source"].nunique()
    return int((sources > 1).sum())


def context_key(row: Mapping[str, Any], keys: list[str]) -> tuple[str, ...]:
    """The part of a series key its baseline must share."""
    return tuple(str(row[k]) for k in _context_keys(keys))


def _context_keys(keys: list[str]) -> list[str]:
    return [k for k in keys if k not in VARIANT_KEYS and not is_r2cc_variable(_env_name(k))]


def _keep_two(smallest: list[str], label: str) -> None:
    """Keep the two smallest labels seen (the smallest other than a series' own is one)."""
    smallest.append(label)
    smallest.sort()
    del smallest[2:]


def _first_other(smallest: list[str], label: str) -> str | None:
    return next((c for c in smallest if c != label), None)


def baselines(info: SeriesInfo) -> dict[str, str]:
    """series label -> its baseline's label, for ok series that have one (never themselves):
    the first (by label) stock no-fault series of the same context, else the first no-fault
    series of the same library, mode and R2CC_* knobs. The no-fault series are indexed once,
    so thousands of series (one scenario each) cost no more than a few."""
    ok = info.ok_runs().drop_duplicates("series")
    rows = ok.to_dict("records")
    context = _context_keys(info.keys)
    r2cc_keys = [k for k in info.keys if is_r2cc_variable(_env_name(k))]

    def own(where: tuple[str, ...], row: Mapping[str, Any]) -> tuple[Any, ...]:
        # The same library's own baseline must also share its R2CC_* knobs: two variants of
        # one knob (e.g. R2CC_DISCONNECTED_HCA) are not each other's baseline.
        return (where, row["library"], row["mode"], *(row[k] for k in r2cc_keys))

    stock: defaultdict[tuple[str, ...], list[str]] = defaultdict(list)
    same: defaultdict[tuple[Any, ...], list[str]] = defaultdict(list)
    for row in rows:
        if row["scenario"] != BASELINE_SCENARIO:
            continue
        where = tuple(str(row[k]) for k in context)
        if row["stock"] and row["mode"] == "":
            _keep_two(stock[where], str(row["series"]))
        _keep_two(same[own(where, row)], str(row["series"]))
    out: dict[str, str] = {}
    for row in rows:
        label = str(row["series"])
        if row["scenario"] == BASELINE_SCENARIO and row["stock"] and row["mode"] == "":
            continue  # the stock no-fault series is the baseline, not compared
        where = tuple(str(row[k]) for k in context)
        pick = _first_other(stock.get(where, []), label) or _first_other(
            same.get(own(where, row), []), label
        )
        if pick:
            out[label] = pick
    return out
