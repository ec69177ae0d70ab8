"""R-2CCL's semantics as r2bench holds them (r2bench/config/r2ccl.py), read off its source."""

from __future__ import annotations

import pytest

from r2bench.config.r2ccl import (
    backup_nic,
    failover_timeout,
    is_r2cc_variable,
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
