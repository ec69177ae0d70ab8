"""Hostile input, round 4: the cases that sat in readers outside the first fixes (issue 31)."""

from __future__ import annotations

import pytest

from r2bench.testbeds.discover import parse_discovery
from r2bench.testbeds.virtual.layout import PlanError, rate_bits


@pytest.mark.parametrize("digits", ["\u00b2", "\u0663", "\u2081"])  # ², Arabic-Indic 3, ₁
def test_discovery_takes_ascii_numbers_only(digits: str) -> None:
    found = parse_discovery(f"gpu {digits}\nrdma mlx5_0 {digits} InfiniBand ibp24s0\n")
    assert found.gpu_archs == [] and found.rdma == []


@pytest.mark.parametrize("rate", ["10mbit\n", "10mbit\nreboot", "1gbit "])
def test_a_virtual_rate_with_a_trailing_line_is_refused(rate: str) -> None:
    with pytest.raises(PlanError):
        rate_bits(rate)
