"""`compare.samples.cells` on hand-made tables: what a cell's samples are, in which order
(each run's timed iterations in table order, else its result rows; runs in run-id order), and
what is left out (runs that did not finish, values that are not finite and positive)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from r2bench.compare.samples import cells
from r2bench.tables.build import Tables

NAMES = ["collective", "library", "scenario"]


def _tables() -> Tables:
    runs = pd.DataFrame(
        {
            "run_id": ["r-b", "r-a", "r-cut"],
            "collective": "all_reduce",
            "library": "nccl",
            "scenario": "none",
            "complete": [True, True, False],
        }
    )
    results = pd.DataFrame(
        {
            "run_id": ["r-b", "r-b", "r-a", "r-a", "r-a", "r-cut"],
            "size_bytes": [8, 16, 8, 16, 16, 8],
            "type": "float",
            "redop": "sum",
            "placement": "out-of-place",
            "cycle": [0, 0, 0, 0, 1, 0],
            "time_us": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
            "busbw_gbps": [10.0, 20.0, 30.0, np.nan, 50.0, 60.0],
        }
    )
    iterations = pd.DataFrame(
        {
            "run_id": pd.Categorical(["r-a", "r-b", "r-a", "r-b", "r-cut", "r-a"]),
            "size_bytes": [8, 8, 8, 8, 8, 8],
            "placement": pd.Categorical(["out-of-place"] * 6),
            "time_us": [0.3, 0.1, 0.2, -1.0, 9.0, 0.4],
            "busbw_gbps": [3.0, 1.0, 2.0, 4.0, 9.0, np.inf],
        }
    )
    return Tables(results=results, iterations=iterations, runs=runs)


def _cell(size: int) -> tuple[tuple[str, object], ...]:
    fixed = (("collective", "all_reduce"), ("library", "nccl"), ("scenario", "none"))
    cell = (
        ("size_bytes", size),
        ("placement", "out-of-place"),
        ("type", "float"),
        ("redop", "sum"),
    )
    return (*fixed, *cell)


def test_iterations_stand_for_their_result_row_and_runs_come_in_run_id_order() -> None:
    found = cells(_tables(), NAMES)
    small = found[_cell(8)]
    assert small.runs == ["r-a", "r-b"]  # r-cut did not finish
    assert [list(a) for a in small.samples["time_us"]] == [[0.3, 0.2, 0.4], [0.1]]  # -1 dropped
    assert [list(a) for a in small.samples["busbw_gbps"]] == [[3.0, 2.0], [1.0, 4.0]]  # inf too
    assert list(small.pooled_of("time_us")) == [0.3, 0.2, 0.4, 0.1]


def test_result_rows_are_the_samples_where_a_run_has_no_iterations_of_them() -> None:
    big = cells(_tables(), NAMES)[_cell(16)]
    assert big.runs == ["r-a", "r-b"]
    assert [list(a) for a in big.samples["time_us"]] == [[4.0, 5.0], [2.0]]  # both cycles
    assert [list(a) for a in big.samples["busbw_gbps"]] == [[50.0], [20.0]]  # NaN left out
    assert big.count("busbw_gbps") == 2 and big.count("time_us") == 3
