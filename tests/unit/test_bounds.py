"""The lines a degraded run is held against (analysis/bounds.py) and the predicted detection
time under both IB models (analysis/detection.py), on the artifact's and the study's numbers."""

from __future__ import annotations

import pytest

from r2bench.analysis import bounds, detection


def test_r7525_bound_balance_and_model() -> None:
    """3 servers x 2 ranks, one of 3 NICs lost: floor 1.125, Balance 1.5, R2CC-AllReduce
    1.375 at K = 4; the measured Balance 1.498 is 75 % efficient against the bound."""
    lines = bounds.degraded_lines(3, 6, 1 / 3, mode="2", measured=1.498)
    assert lines.bound == pytest.approx(1.125)
    assert lines.balance == pytest.approx(1.5)
    assert lines.model is not None and lines.model.ratio == pytest.approx(1.5)
    assert lines.efficiency == pytest.approx(1.125 / 1.498)
    allreduce = bounds.degraded_lines(3, 6, 1 / 3, mode="3", k=4, size_bytes=4 << 30)
    assert allreduce.model is not None and allreduce.model.ratio == pytest.approx(1.375)
    assert allreduce.bound < allreduce.model.ratio < allreduce.balance


def test_after_a_real_repair_mode_0_is_modelled_as_it_goes_on() -> None:
    assert bounds.degraded_lines(3, 6, 1 / 3, mode="0").model.schedule == "R2CC-Balance"  # type: ignore[union-attr]
    after = bounds.degraded_lines(3, 6, 1 / 3, mode="0", after_repair="3", size_bytes=1 << 30)
    assert after.model is not None and after.model.schedule == "R2CC-AllReduce"


@pytest.mark.parametrize(("p", "beta", "want"), [(3, 2 / 3, 1.125), (2, 0.5, 2.0), (8, 0.9, 1.0)])
def test_lower_bound(p: int, beta: float, want: float) -> None:
    assert bounds.lower_bound_ratio(p, beta) == pytest.approx(want)


def test_lower_bound_is_the_straggler_argument() -> None:
    """T >= D/(beta B) over T_nf = 2 (p-1) D / (p B), never below 1."""
    for p in range(2, 10):
        for beta in (0.25, 0.5, 2 / 3, 0.9, 1.0):
            t_nf = 2 * (p - 1) / p
            assert bounds.lower_bound_ratio(p, beta) == pytest.approx(max(1.0, (1 / beta) / t_nf))


def test_bad_inputs_are_refused() -> None:
    with pytest.raises(ValueError, match="at least 2"):
        bounds.lower_bound_ratio(1, 0.5)
    with pytest.raises(ValueError, match="beta"):
        bounds.lower_bound_ratio(3, 0.0)
    assert bounds.one_nic_share(3) == pytest.approx(1 / 3)
    assert bounds.one_nic_share(1) is None


def test_detection_textbook_and_connectx_floor() -> None:
    """The study's ConnectX-6 numbers: T=20 R=7 about 59 s (textbook 34.4 s); T<=16 R=7 about
    3.7 s; the floor model is the textbook one at R=1 and T>=16."""
    assert detection.textbook_s(20, 7) == pytest.approx(34.36, abs=0.01)
    assert detection.connectx_floor_s(20, 7) == pytest.approx(60.1, abs=0.1)
    for t in (10, 12, 14, 16):
        assert detection.connectx_floor_s(t, 7) == pytest.approx(3.76, abs=0.01)
    assert detection.connectx_floor_s(18, 1) == pytest.approx(detection.textbook_s(18, 1))
    assert detection.connectx_floor_s(16, 0) == pytest.approx(detection.nominal_timeout_s(16))


def test_detection_bound_by_timer_or_retries() -> None:
    stock = detection.predict({"NCCL_IB_TIMEOUT": "14", "NCCL_IB_RETRY_CNT": "3"})
    assert stock.textbook_s == pytest.approx(0.268, abs=0.001)
    assert stock.textbook_bound is detection.Bound.RETRY and stock.timer_s is None
    # The artifact's cuts: T=16 R=1 (0.54 s either way) under a 5 s failover timer.
    artifact = detection.predict({"NCCL_IB_TIMEOUT": "16", "NCCL_IB_RETRY_CNT": "1"}, 5.0)
    assert artifact.floor_s == pytest.approx(0.537, abs=0.001)
    assert artifact.floor_bound is detection.Bound.RETRY
    # Defaults under the 5 s timer: the timer fires first in both models.
    defaults = detection.predict({}, 5.0)
    assert defaults.textbook_s == defaults.floor_s == 5.0
    assert defaults.textbook_bound is defaults.floor_bound is detection.Bound.TIMER
    # The quickstart's emulated R-2CCL: 0.5 s timer against textbook 20 s x 8.
    emulated = detection.predict({}, 0.5)
    assert emulated.textbook_bound is detection.Bound.TIMER
    assert "NCCL_IB_TIMEOUT=20" in emulated.basis


def test_detection_settings_held_to_their_fields() -> None:
    wild = detection.predict({"NCCL_IB_TIMEOUT": "5000", "NCCL_IB_RETRY_CNT": "x"})
    assert wild.t == 31 and wild.retries == 7
    assert detection.predict({}, float("inf")).timer_s is None
