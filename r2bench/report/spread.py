"""When a difference between two series is overhead, and when it is noise.

A series' time at a size varies from run to run; one run says nothing about that spread. So a
difference against the baseline counts as overhead only where the two series' run-to-run
ranges (min..max of each run's median over its repeats) do not overlap. With fewer than two
runs on either side the spread is unknown, and the difference is drawn as such, not as
overhead. A size whose rows all completed before a faulted series' fault was injected was not
touched by the fault: a difference there is no fault overhead either.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

OVERHEAD = "outside the run-to-run spread"
WITHIN = "within the run-to-run spread"
UNKNOWN = "spread unknown (1 repeat)"
BEFORE_FAULT = "completed before the fault"
VERDICTS = (OVERHEAD, WITHIN, UNKNOWN, BEFORE_FAULT)
MIN_RUNS = 2
STAMP_RESOLUTION_S = 1.0
"""A result row's timestamp may be nccl-tests' `-S 1` stamp, whole seconds: a row stamped T
completed before T + 1 s, so only that is taken as before the fault."""


@dataclass(frozen=True)
class Spread:
    """One series' time at one size over its runs: each run's median, their range."""

    runs: int
    low: float
    high: float


def run_spreads(rows: pd.DataFrame, value: str = "time_us") -> dict[tuple[str, int], Spread]:
    """(series, size) -> the range of each run's median `value` (out-of-place rows of
    `figures.series_rows`)."""
    chosen = rows[(rows["placement"] == "out_of_place") & rows[value].notna()]
    per_run = chosen.groupby(["series", "size_bytes", "run_id"], sort=True)[value].median()
    out = {}
    for (series, size), runs in per_run.groupby(level=[0, 1], sort=True):
        out[(str(series), int(size))] = Spread(len(runs), float(runs.min()), float(runs.max()))
    return out


def untouched_sizes(rows: pd.DataFrame, runs: pd.DataFrame) -> set[tuple[str, int]]:
    """(series, size) of faulted series whose rows of that size all completed before their
    run's first fault was applied, by at least a stamp's resolution (rows without a timestamp
    count as touched: unknown)."""
    if "fault_applied_at" not in runs.columns or "timestamp" not in rows.columns:
        return set()
    applied = dict(zip(runs["run_id"].astype(str), runs["fault_applied_at"], strict=True))
    frame = rows[["series", "size_bytes", "run_id", "timestamp"]].copy()
    frame["applied"] = pd.to_numeric(frame["run_id"].astype(str).map(applied), errors="coerce")
    before = frame["timestamp"].notna() & frame["applied"].notna()
    frame["before"] = before & (frame["timestamp"] + STAMP_RESOLUTION_S <= frame["applied"])
    done = frame.groupby(["series", "size_bytes"], sort=False)["before"].all()
    return {(str(s), int(z)) for (s, z), all_before in done.items() if all_before}


def overhead_range(mine: Spread | None, ref: Spread | None) -> tuple[float, float] | None:
    """The overhead (%) the two ranges allow, lowest to highest; None when a side has fewer
    than two runs (its spread is unknown)."""
    if mine is None or ref is None or min(mine.runs, ref.runs) < MIN_RUNS or ref.low <= 0:
        return None
    return (mine.low / ref.high - 1.0) * 100.0, (mine.high / ref.low - 1.0) * 100.0


def verdict(span: tuple[float, float] | None, untouched: bool) -> str:
    """Whether a difference is overhead (`OVERHEAD`) or not, and why not."""
    if untouched:
        return BEFORE_FAULT
    if span is None:
        return UNKNOWN
    low, high = span
    return OVERHEAD if low > 0 or high < 0 else WITHIN
