"""R-2CCL's performance model (analysis/r2cc_model.py) against upstream's README and its 07 log,
and its report section and figure on the imported reference logs.

This module holds its pure tests; the same subject's other tests:
tests/integration/test_r2cc_model.py (those with real processes).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from r2bench.analysis import r2cc_model as m
from r2bench.parse.r2ccl_artifact import read_artifact
from tests.support import paths
from tests.support.r2cc_model import imported_tables

LOGS = paths.DATA / "r7525" / "logs"
K_SWEEP = "07.nccl_tests_r2cc_allreduce_k_sweep.log"
# Upstream's 07 table: K -> (model, vs. model oop %, ip %), and Balance.
UPSTREAM_07 = {
    1: (1.6000, -0.08, -0.06),
    2: (1.4500, +0.57, +0.17),
    4: (1.3750, +0.06, +0.13),
    8: (1.3375, +0.26, +0.09),
    16: (1.3187, +0.74, +0.63),
}


@pytest.fixture(scope="module")
def k_sweep(tmp_path_factory: pytest.TempPathFactory):
    from r2bench.report.model import model_frame

    folder = tmp_path_factory.mktemp("logs")
    (folder / K_SWEEP).write_bytes((LOGS / K_SWEEP).read_bytes())
    return model_frame(imported_tables(folder, tmp_path_factory.mktemp("results")))


def test_the_readme_numbers() -> None:
    assert m.balance_ratio(1 / 3) == pytest.approx(1.5)
    assert m.allreduce_ratio(6, 1 / 3, 4) == pytest.approx(1.375)
    assert m.allreduce_ratio(6, 1 / 3, None) == pytest.approx(1.30)  # the paper's, K -> inf
    for k, (model, _, _) in UPSTREAM_07.items():
        assert round(m.allreduce_ratio(6, 1 / 3, k), 4) == pytest.approx(model, abs=1e-4)


@pytest.mark.parametrize(("n", "x", "k"), [(6, 1 / 3, 4), (8, 0.25, 2), (16, 0.5, 16), (4, 0.1, 1)])
def test_the_formula_is_the_readmes_derivation(n: int, x: float, k: int) -> None:
    """T = T_1 + T_3 with Y = X and the partial AllReduce hidden, stage 2 one chunk longer."""
    d, b = 1.0, 1.0
    t_nf = 2 * (n - 1) / n * d / b
    t_1 = 2 * (n - 1) / n * (1 - x) * d / ((1 - x) * b)
    t_3 = (1 + 1 / k) * x * d / ((1 - x) * b)
    assert m.allreduce_ratio(n, x, k) == pytest.approx((t_1 + t_3) / t_nf)


def test_predict_by_mode_and_size() -> None:
    assert m.predict("0", 6, 1 / 3).ratio == 1.0
    assert m.predict("2", 6, 1 / 3).schedule == "R2CC-Balance"
    ar = m.predict("3", 6, 1 / 3, None, 4 << 30)
    assert ar is not None and ar.k == m.DEFAULT_K and ar.ratio == pytest.approx(1.375)
    small = m.predict("3", 6, 1 / 3, 8, 8 << 20)  # below R2CC_AR_MIN_BYTES: Balance
    assert (
        small is not None and small.schedule == "R2CC-Balance" and small.ratio == pytest.approx(1.5)
    )
    assert "R2CC_AR_MIN_BYTES" in small.note
    assert m.predict("1", 6, 1 / 3) is None


def test_x_and_k_from_the_settings() -> None:
    env = {"NCCL_IB_HCA": "mlx5_0,mlx5_2,mlx5_3", "R2CC_FAILED_HCA": "mlx5_2"}
    assert m.failed_share(env) == pytest.approx(1 / 3)
    assert m.failed_share({**env, "R2CC_FAILED_NIC_COUNT": "2"}) == pytest.approx(2 / 3)
    assert m.failed_share({"R2CC_FAILED_HCA": "mlx5_2"}) is None  # NICs in use not stated
    assert m.failed_share({**env, "NCCL_IB_HCA": "^mlx5_1"}) is None  # only those not used
    assert m.failed_share({**env, "NCCL_IB_HCA": "=mlx5_0:1,mlx5_2:1"}) == pytest.approx(0.5)
    assert m.failed_share({**env, "R2CC_FAILED_HCA": "mlx5_0,mlx5_2,mlx5_3"}) is None
    assert m.stage2_chunks({"R2CC_AR_STAGE2_CHUNKS": "8"}) == 8
    assert m.stage2_chunks({}) is None


@pytest.mark.parametrize(
    ("n", "x", "k"), [(1, 0.3, 4), (6, 1.0, 4), (6, -0.1, 4), (6, 0.3, 0), (6, 0.3, 17)]
)
def test_out_of_range_inputs_are_refused(n: int, x: float, k: int) -> None:
    with pytest.raises(ValueError):
        m.allreduce_ratio(n, x, k)


def test_flag_above_five_percent() -> None:
    assert not m.flagged(1.375 * 1.049, 1.375)
    assert m.flagged(1.375 * 1.051, 1.375) and m.flagged(1.375 * 0.94, 1.375)


@pytest.mark.parametrize(
    ("name", "ratio", "degraded_ms"),
    [
        ("01.hot_repair_to_balance.log", 1.49, 3043.0),
        ("02.hot_repair_to_r2cc_allreduce.log", 1.38, 2801.0),
    ],
)
def test_hot_repair_steady_state_as_upstream_reads_it(
    name: str, ratio: float, degraded_ms: float
) -> None:
    [run] = read_artifact(LOGS / name).hot_repair_runs
    assert run.cut_during is not None
    got = m.hot_repair_ratio(run.times_ms, run.cut_during)
    assert got is not None and got.degraded_ms == degraded_ms
    assert got.healthy_iterations == (2,) and got.degraded_iterations == (5, 6, 7, 8, 9, 10)
    assert round(got.ratio, 2) == ratio


def test_every_k_of_07_within_074_percent_as_upstream_says(k_sweep) -> None:
    ar = k_sweep[k_sweep["schedule"] == "R2CC-AllReduce"]
    assert sorted(ar["k"].astype(int)) == [1, 2, 4, 8, 16]
    for row in ar.itertuples(index=False):
        model, oop, ip = UPSTREAM_07[int(row.k)]
        assert (row.n, row.x, row.size_bytes) == (6, pytest.approx(1 / 3), 4 << 30)
        assert row.predicted == pytest.approx(model, abs=1e-4)
        assert round(row.deviation_out_of_place * 100, 2) == oop
        assert round(row.deviation_in_place * 100, 2) == ip
    worst = ar[["deviation_out_of_place", "deviation_in_place"]].abs().max().max()
    assert round(worst * 100, 2) == 0.74
    assert not k_sweep["flagged"].any()
    [balance] = k_sweep[k_sweep["schedule"] == "R2CC-Balance"].itertuples(index=False)
    assert balance.predicted == pytest.approx(1.5)
    assert round(balance.deviation_out_of_place * 100, 2) == -0.10  # upstream: -0.11 / -0.08


def test_a_failure_declared_in_the_settings_alone_is_modelled(tmp_path: Path) -> None:
    """A failure declared in the environment (R2CC_FAILED_HCA), as experiments/r7525 and the
    imported logs carry it: every run of scenario `none`, the failure series those of modes 2
    and 3; a scenario named for the failure reads the same."""
    from dataclasses import replace

    from r2bench.report.model import model_frame

    folder = tmp_path / "logs"
    folder.mkdir()
    (folder / K_SWEEP).write_bytes((LOGS / K_SWEEP).read_bytes())
    tables = imported_tables(folder, tmp_path / "results")
    assert set(tables.runs["scenario"]) == {"none"}
    failed = tables.runs["R2CC_MODE"].isin(["2", "3"])
    named = tables.runs.assign(scenario=tables.runs["scenario"].where(~failed, "mlx5_2-failed"))
    numbers = ["schedule", "k", "measured_out_of_place", "measured_in_place", "predicted"]
    assert model_frame(replace(tables, runs=named))[numbers].equals(model_frame(tables)[numbers])
    undeclared = tables.runs
    frame = model_frame(replace(tables, runs=undeclared))
    assert sorted(frame["schedule"]) == ["R2CC-AllReduce"] * 5 + ["R2CC-Balance"]
    k16 = frame[frame["k"] == 16]
    assert round(float(k16["deviation_out_of_place"].iloc[0]) * 100, 2) == 0.74
    no_hca = undeclared.drop(columns=["NCCL_IB_HCA"])
    assert model_frame(replace(tables, runs=no_hca)).empty  # no failure anywhere: nothing


def test_a_series_more_than_5_percent_off_is_flagged(tmp_path: Path) -> None:
    from r2bench.figures.registry import draw_model
    from r2bench.report.model import model_frame

    folder = tmp_path / "logs"
    folder.mkdir()
    text = (LOGS / K_SWEEP).read_text()
    slow = "  4294967296    1073741824     float     sum      -1  2958525    1.45    2.42"
    assert text.count(slow) == 1  # K = 2, made 10 % slower out-of-place
    text = text.replace(slow, slow.replace("2958525    1.45    2.42", "3254378    1.32    2.20"))
    (folder / K_SWEEP).write_text(text)
    tables = imported_tables(folder, tmp_path / "results")
    frame = model_frame(tables)
    [k2] = frame[frame["k"] == 2].itertuples(index=False)
    assert k2.flagged and k2.deviation_out_of_place > 0.05
    assert not frame[frame["k"] != 2]["flagged"].any()
    assert draw_model(tables).claim.verdict == "does not hold"
