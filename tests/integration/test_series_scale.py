"""The report's series baselines stay fast over thousands of series (imported logs named
`all_reduce_perf.<job>.txt` give one scenario each) and pick exactly what the rule says."""

from __future__ import annotations

import time

import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from r2bench.config.r2ccl import is_r2cc_variable
from r2bench.report.series import (
    BASELINE_SCENARIO,
    SeriesInfo,
    baselines,
    context_key,
    series_info,
)
from tests.unit.test_report_series import BASE_RUN


def _runs(rows: list[dict[str, object]]) -> pd.DataFrame:
    return pd.DataFrame([{**BASE_RUN, "run_id": f"r{i}", **row} for i, row in enumerate(rows)])


def _rule(info: SeriesInfo) -> dict[str, str]:
    """The baseline rule written plainly, one series against every other (the spec)."""
    ok = info.ok_runs().drop_duplicates("series")
    rows = [row for _, row in ok.iterrows()]
    r2cc = [k for k in info.keys if is_r2cc_variable(k.removeprefix("env:"))]
    out = {}
    for row in rows:
        if row["scenario"] == BASELINE_SCENARIO and row["stock"] and row["mode"] == "":
            continue
        candidates = [
            c
            for c in rows
            if context_key(c, info.keys) == context_key(row, info.keys)
            and c["scenario"] == BASELINE_SCENARIO
            and c["series"] != row["series"]
        ]
        stock = [c for c in candidates if c["stock"] and c["mode"] == ""]
        same = [
            c
            for c in candidates
            if c["library"] == row["library"]
            and c["mode"] == row["mode"]
            and all(c[k] == row[k] for k in r2cc)
        ]
        pick = stock or same
        if pick:
            out[row["series"]] = sorted(str(c["series"]) for c in pick)[0]
    return out


RUN = st.fixed_dictionaries(
    {
        "library": st.sampled_from(["nccl", "r2ccl", "mine"]),
        "library_recipe": st.sampled_from(["nccl", "r2ccl", "emulated-lib"]),
        "R2CC_MODE": st.sampled_from([None, "", "0", "1"]),
        "R2CC_K": st.sampled_from([None, "1", "2"]),
        "scenario": st.sampled_from(["none", "none", "nic_down", "flap"]),
        "transport": st.sampled_from(["NET/IB", "NET/Socket"]),
        "ranks": st.sampled_from([2, 4]),
        "outcome": st.sampled_from(["ok", "ok", "crashed"]),
    }
)


@settings(max_examples=200, deadline=None)
@given(st.lists(RUN, min_size=1, max_size=14))
def test_baselines_follow_the_rule(rows: list[dict[str, object]]) -> None:
    info = series_info(_runs(rows))
    assert baselines(info) == _rule(info)


def _timed(rows: list[dict[str, object]]) -> float:
    start = time.perf_counter()
    baselines(series_info(_runs(rows)))
    return time.perf_counter() - start


def test_4000_scenarios_cost_about_what_one_shared_scenario_does() -> None:
    n = 4000
    each = [{"scenario": f"job{i}", "library": "r2ccl"} for i in range(n)]
    each[0] = {}  # the stock no-fault baseline
    shared = [{"scenario": "job", "library": "r2ccl"} for _ in range(n)]
    shared[0] = {}
    one, many = _timed(shared), _timed(each)
    assert many < 1.5 * one + 0.5, (one, many)


def _report_parts(runs: int, each: bool) -> float:
    """Seconds for the report parts that go over every series (recovery table and figure,
    outcome matrix) on `runs` faulted runs, one scenario each or all sharing one."""
    from r2bench.report.charts import outcome_figure
    from r2bench.report.recovery import recovery_figure, recovery_table, run_metrics
    from r2bench.tables.build import Tables

    rows = [
        {
            **BASE_RUN,
            "run_id": f"r{i}",
            "scenario": f"job{i}" if each else "job",
            "n_faults": 1,
            "library_recipe": "nccl",
            "R2CC_MODE": None,
            **{f"{m}": 0.5 for m in ("detect_s", "stall_s", "recover_s")},
            **{f"{m}": 0.9 for m in ("degraded_ratio", "failback_ratio")},
            **{f"{m}_reason": None for m in ("detect_s", "stall_s", "recover_s")},
            **{f"{m}_reason": None for m in ("degraded_ratio", "failback_ratio", "lossless")},
            "lossless": True,
        }
        for i in range(runs)
    ]
    tables = Tables(results=pd.DataFrame(), runs=pd.DataFrame(rows))
    start = time.perf_counter()
    metrics = run_metrics(tables)
    recovery_table(metrics)
    recovery_figure(metrics)
    outcome_figure(tables)
    return time.perf_counter() - start


def test_the_report_s_per_series_parts_scale_with_series() -> None:
    one, many = _report_parts(2000, each=False), _report_parts(2000, each=True)
    assert many < 1.5 * one + 1.0, (one, many)
