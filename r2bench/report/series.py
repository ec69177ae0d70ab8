"""Which runs may share a line in a figure, and which series is another's baseline.

A series holds the runs that differ only by repeat: same collective, library and its version
(and whether the library is proven or guessed), R2CC_MODE, scenario, nccl-tests version, ranks,
GPUs per rank, nodes, transport (from NCCL's `via ...` lines) and every NCCL_*/R2CC_* variable
whose value differs between the runs of the sweep. Only runs that ended `ok` go into busbw and
overhead figures; the others are counted beside them.

A series' baseline is the no-fault series (scenario `none`) with the same context (everything
above except library, its version, mode, scenario and R2CC_* variables): stock NCCL when the
sweep has it, else the same library and mode. A series is never its own baseline, nor is a
series whose results are identical to it (a copy of the same log).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

import pandas as pd

MODE_ENV = "R2CC_MODE"
BASELINE_SCENARIO = "none"
STOCK_LIBRARY = "nccl"
STOCK_RECIPES = frozenset({"nccl", "system", "nccl-upstream", "emulated-nccl"})
"""Recipes of stock NCCL: a sweep labels its libraries freely (`stock`, `baseline`...)."""


def _is_stock(row: pd.Series) -> bool:
    """Stock NCCL: built from a stock recipe, or (imported logs) proven to be NCCL."""
    return (
        _text(row.get("library_recipe")) in STOCK_RECIPES
        or _text(row.get("library")) == STOCK_LIBRARY
    )


OK = "ok"
GROUPED_ENV_PREFIXES = ("NCCL_", "R2CC_")
_ENV_COLUMN_RE = re.compile(r"^(env:)?[A-Z_][A-Z0-9_]*$")
# (column, label prefix) of the fixed parts of a series key, in label order.
FIXED_KEYS = (
    "collective",
    "library",
    "library_version",
    "mode",
    "transport",
    "ranks",
    "gpus_per_rank",
    "n_nodes",
    "nccl_tests_version",
    "scenario",
)
# Parts of the key a baseline may differ in.
VARIANT_KEYS = ("library", "library_version", "mode", "scenario")
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


def _library(row: pd.Series) -> str:
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


def _part(key: str, value: str) -> str:
    if key == "mode":
        return f"mode {value}"
    if key == "ranks":
        return f"{value} rank{'s' if value != '1' else ''}"
    if key == "gpus_per_rank":
        return f"{value} GPU/rank"
    if key == "n_nodes":
        return f"{value} node{'s' if value != '1' else ''}"
    if key == "transport":
        return value or "transport not logged"
    if key == "nccl_tests_version":
        return f"nccl-tests {value}"
    if key == "library_version":
        return f"v{value}"
    if key.startswith(("env:", "NCCL_", "R2CC_")):
        return f"{_env_name(key)}={value}"
    return value


def series_info(runs: pd.DataFrame) -> SeriesInfo:
    """Series key and label of every run (labels are plain text: escape where shown)."""
    frame = runs.copy()
    frame["mode"] = frame[MODE_ENV] if MODE_ENV in frame.columns else None
    frame["stock"] = [_is_stock(r) for _, r in frame.iterrows()] if len(frame) else []
    frame["library"] = [_library(r) for _, r in frame.iterrows()] if len(frame) else []
    env = grouping_env(frame)
    keys = [*FIXED_KEYS[:-1], *env, FIXED_KEYS[-1]]
    for key in keys:
        if key not in frame.columns:
            frame[key] = None
        frame[key] = [_text(v) for v in frame[key]]
    if "library_version" in frame.columns:  # 2.28.9+cuda13.0 (NCCL's line) is 2.28.9
        frame["library_version"] = [_text(v).split("+")[0] for v in frame["library_version"]]
    varying = [k for k in keys if frame[k].nunique() > 1]
    labelled = [k for k in keys if k in ALWAYS_LABELLED or k in varying]
    frame["series"] = [
        " · ".join(_part(k, row[k]) for k in labelled if row[k] != "" or k == "transport")
        for _, row in frame[keys].iterrows()
    ]
    constant = [k for k in keys if k not in labelled and frame[k].nunique() == 1]
    shared = ", ".join(_part(k, frame[k].iloc[0]) for k in constant if frame[k].iloc[0] != "")
    if "transport" in constant and frame["transport"].iloc[0] == "":
        shared += (", " if shared else "") + "transport not logged (no NCCL INFO `via` lines)"
    cols = ["run_id", "outcome", "series", "stock", *keys]
    return SeriesInfo(frame[cols].reset_index(drop=True), keys, env, shared)


def context_key(row: pd.Series, keys: list[str]) -> tuple[str, ...]:
    """The part of a series key its baseline must share."""
    return tuple(
        str(row[k]) for k in keys if k not in VARIANT_KEYS and not _env_name(k).startswith("R2CC_")
    )


def baselines(info: SeriesInfo) -> dict[str, str]:
    """series label -> its baseline's label, for ok series that have one (never themselves)."""
    ok = info.ok_runs().drop_duplicates("series")
    by_context: dict[tuple[str, ...], list[pd.Series]] = {}
    for _, row in ok.iterrows():
        by_context.setdefault(context_key(row, info.keys), []).append(row)
    out: dict[str, str] = {}
    r2cc_keys = [k for k in info.keys if _env_name(k).startswith("R2CC_")]
    for _, row in ok.iterrows():
        candidates = [
            c
            for c in by_context[context_key(row, info.keys)]
            if c["scenario"] == BASELINE_SCENARIO and c["series"] != row["series"]
        ]
        stock = [c for c in candidates if c["stock"] and c["mode"] == ""]
        # The same library's own baseline must also share its R2CC_* knobs: two variants of
        # one knob (e.g. R2CC_DISCONNECTED_HCA) are not each other's baseline.
        same = [
            c
            for c in candidates
            if c["library"] == row["library"]
            and c["mode"] == row["mode"]
            and all(c[k] == row[k] for k in r2cc_keys)
        ]
        stock_none = row["scenario"] == BASELINE_SCENARIO and row["stock"] and row["mode"] == ""
        if stock_none:
            continue  # the stock no-fault series is the baseline, not compared
        pick = stock or same
        if pick:
            out[row["series"]] = sorted(str(c["series"]) for c in pick)[0]
    return out
