"""The extrapolation to a user's scale (`analysis.extrapolate`): each strategy's formula by
its number, every input shown in its text."""

from __future__ import annotations

import pytest

from r2bench.analysis.extrapolate import (
    PAPER_RESTART_S,
    MeasuredTimes,
    ScaleInputs,
    extrapolate,
    failures_per_day,
)

SCALE = ScaleInputs(
    ranks=100, nics=50, nic_failure_rate_per_h=0.001, checkpoint_interval=200,
    checkpoint_load_s=30.0, gpus_per_node=8, rejoin_h=2.0,
)  # fmt: skip
FAILURES = 0.001 * 50 * 24


def test_failures_a_day() -> None:
    assert failures_per_day(SCALE) == pytest.approx(FAILURES)


def test_restart_pays_detection_restart_load_and_half_an_interval() -> None:
    row = extrapolate(MeasuredTimes("restart", 10.0, 20.0, 0.5), SCALE)
    per = 100 * (10.0 + PAPER_RESTART_S + 30.0 + 100 * 0.5)
    assert row.per_failure_gpu_s == pytest.approx(per)
    assert row.gpu_hours_per_day == pytest.approx(per * FAILURES / 3600)
    assert "4080" in row.formula and "200 / 2" in row.formula


def test_in_library_pays_only_the_stall() -> None:
    row = extrapolate(MeasuredTimes("in_library", 0.7, 1.6, 0.1), SCALE)
    assert row.per_failure_gpu_s == pytest.approx(100 * 1.5)


def test_shrink_pays_detection_one_update_and_the_idle_node() -> None:
    row = extrapolate(MeasuredTimes("shrink", 3.0, 3.1, 0.1), SCALE)
    assert row.per_failure_gpu_s == pytest.approx(100 * 3.1 + 8 * 2.0 * 3600)


def test_what_cannot_be_extrapolated_says_why() -> None:
    assert extrapolate(MeasuredTimes("none", None, None, 0.1), SCALE).gpu_hours_per_day is None
    row = extrapolate(MeasuredTimes("restart", None, None, 0.1), SCALE)
    assert row.gpu_hours_per_day is None and "no detection" in row.formula
