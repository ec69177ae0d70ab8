"""R-2CCL's semantics as r2bench holds them (r2bench/config/r2ccl.py), read off its source."""

from __future__ import annotations

import pytest

from r2bench.config.r2ccl import (
    F45CBCB,
    MAIN,
    NEWEST,
    PINNED_COMMIT,
    backup_nic,
    failover_timeout,
    failover_timeout_at,
    is_r2cc_variable,
    revision_for,
    simulated_failed_nics,
    simulated_migrated_nics,
)


@pytest.mark.parametrize(
    ("env", "ms", "source"),
    [
        ({}, 32_000, "derived"),  # 2^0 x 4 x (7+1) s at the defaults (20, 7)
        ({"NCCL_IB_TIMEOUT": "22"}, 128_000, "derived"),
        ({"NCCL_IB_TIMEOUT": "14"}, 32_000, "derived"),  # the factor never goes below 1
        ({"NCCL_IB_RETRY_CNT": "3"}, 16_000, "derived"),
        ({"NCCL_R2CC_FAILOVER_TIMEOUT_MS": "2000"}, 2_000, "set"),
        # The bare name is not read: NCCL_PARAM adds the NCCL_ prefix.
        ({"R2CC_FAILOVER_TIMEOUT_MS": "2000"}, 32_000, "derived"),
        ({"NCCL_R2CC_FAILOVER_TIMEOUT_MS": "-1"}, 32_000, "derived"),
    ],
)
def test_failover_timeout_as_the_library_computes_it(
    env: dict[str, str], ms: float, source: str
) -> None:
    timeout = failover_timeout(env)
    assert (timeout.ms, timeout.source) == (ms, source)


def test_backup_connections_pair_the_nics() -> None:
    assert [backup_nic(n, 4) for n in range(4)] == [1, 0, 3, 2]
    assert [backup_nic(n, 3) for n in range(3)] == [1, 0, 2]  # the odd last NIC backs itself up
    assert backup_nic(0, 1) == 0


def test_modes_simulate_a_failure_that_did_not_happen() -> None:
    assert simulated_migrated_nics(1, 4) == {0} and simulated_migrated_nics(0, 4) == set()
    assert simulated_failed_nics(2, 4) == {3} and simulated_failed_nics(3, 4) == {3}
    assert simulated_failed_nics(3, 4, two_failures=True) == {2, 3}
    assert simulated_failed_nics(0, 4) == set() and simulated_failed_nics(1, 4) == set()
    assert simulated_failed_nics(2, 1) == set()  # one NIC left: nothing to mask


def test_which_variables_are_r2ccls_own() -> None:
    assert is_r2cc_variable("R2CC_MODE") and is_r2cc_variable("NCCL_R2CC_FAILOVER_TIMEOUT_MS")
    assert is_r2cc_variable("FAILURE2_SAME_SERVER")
    assert not is_r2cc_variable("NCCL_IB_TIMEOUT") and not is_r2cc_variable("NCCL_DEBUG")


@pytest.mark.parametrize("ib_timeout", ["5000", "31", "64", "-3", "99999999999"])
def test_an_ib_timeout_out_of_range_never_overflows(ib_timeout: str) -> None:
    """NCCL_IB_TIMEOUT=5000 once overflowed 2^(x-20) and killed `import` (exit 70): the IB
    local ACK timeout is a 5-bit field, so the exponent is bounded by 31."""
    timeout = failover_timeout({"NCCL_IB_TIMEOUT": ib_timeout})
    assert timeout.source == "derived"
    assert 32_000 <= timeout.ms <= 2.0 ** (31 - 20) * 32_000


def test_a_ref_selects_its_revision_and_an_unknown_one_the_newest() -> None:
    assert revision_for(None).revision is F45CBCB and revision_for("f45cbcb").note is None
    assert revision_for(PINNED_COMMIT).revision is F45CBCB
    assert revision_for("main").revision is MAIN and revision_for("43c3ea42").revision is MAIN
    unknown = revision_for("0123456789abcdef")
    assert (
        unknown.revision is NEWEST is MAIN and unknown.note and "0123456789abcdef" in unknown.note
    )
    assert revision_for("f45").revision is not F45CBCB  # too short to be a commit prefix


def test_each_revision_keeps_its_own_variables_and_timeout() -> None:
    assert not F45CBCB.reads("R2CC_FAILED_HCA") and MAIN.reads("R2CC_FAILED_HCA")
    assert F45CBCB.reads("FAILURE2_SAME_SERVER") and not MAIN.reads("FAILURE2_SAME_SERVER")
    assert MAIN.variables["R2CC_AR_STAGE2_CHUNKS"].default == "4"
    assert (F45CBCB.failover_timeout({}).ms, F45CBCB.failover_timeout({}).source) == (
        32_000,
        "derived",
    )
    assert (MAIN.failover_timeout({}).ms, MAIN.failover_timeout({}).source) == (5000, "default")
    assert MAIN.failover_timeout({"NCCL_R2CC_FAILOVER_TIMEOUT_MS": "0"}).source == "off"
    assert MAIN.failover_timeout({"NCCL_IB_TIMEOUT": "5000"}).ms == 5000
    assert 3 in F45CBCB.wrong_data_modes and not MAIN.wrong_data_modes
    assert MAIN.ar_min_bytes == 16 << 20
    assert failover_timeout_at({}, "main").ms == 5000
    assert failover_timeout_at({}, None).ms == 32_000
