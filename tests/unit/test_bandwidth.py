"""Bandwidths from time and size (parse.bandwidth), held to real nccl-tests outputs captured
on GPUs (tests/data/nccl-tests): they agree with the printed 2 decimals to the precision of
both, and are closer to the -J JSON's unrounded figures than the printed ones."""

from __future__ import annotations

from pathlib import Path

import pytest

from r2bench.commands.parse import parse_file
from r2bench.parse.bandwidth import (
    PRINTED_HALF_STEP_GBPS,
    bus_factor_of,
    precise_results,
    precise_row,
    time_half_step,
)
from r2bench.parse.models import ParsedNcclTests, ResultRow
from r2bench.parse.nccltests.jsonfile import parse_json
from r2bench.parse.nccltests.text import parse_text
from tests.support.captures import DATA

CAPTURES = sorted(p for p in DATA.rglob("*.txt") if p.name != "commands.log")
PAIRS = ("all_reduce_perf.socket.I1", "all_reduce_perf.p2p.c1", "alltoall_perf.socket.c1")


def _runs(path: Path) -> list[ParsedNcclTests]:
    return [parsed for parsed, _, _ in parse_file(path) if parsed.rows]


def _row(time_us: float, algbw: float, busbw: float, size: int = 1 << 20) -> ResultRow:
    return ResultRow(
        size_bytes=size, count=size // 4, type="float", redop="sum", root=-1,
        placement="out_of_place", time_us=time_us, algbw_gbps=algbw, busbw_gbps=busbw,
    )  # fmt: skip


def test_bus_factors_are_those_of_nccl_tests() -> None:
    assert bus_factor_of("all_reduce", 8) == pytest.approx(1.75)
    assert bus_factor_of("all_gather", 4) == pytest.approx(0.75)
    assert bus_factor_of("reduce_scatter", 2) == pytest.approx(0.5)
    assert bus_factor_of("alltoall", 2) == pytest.approx(0.5)
    assert bus_factor_of("broadcast", 16) == bus_factor_of("sendrecv", 2) == 1.0
    assert bus_factor_of("all_reduce", None) is None
    assert bus_factor_of("hypercube", 2) is None


def test_time_half_step_reads_the_printed_digits() -> None:
    assert time_half_step(8786.03) == pytest.approx(0.005)
    assert time_half_step(359918.0) == pytest.approx(0.5)
    assert time_half_step(10251.5) == pytest.approx(0.05)


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: str(p.relative_to(DATA)))
def test_computed_values_agree_with_the_printed_ones(path: Path) -> None:
    checked = 0
    for parsed in _runs(path):
        factor = bus_factor_of(parsed.collective, parsed.ranks)
        for row in parsed.rows:
            if factor is None or not row.time_us or row.busbw_gbps is None:
                continue
            computed = row.size_bytes / row.time_us / 1e3 * factor
            error = computed * time_half_step(row.time_us) / row.time_us
            assert abs(computed - row.busbw_gbps) <= PRINTED_HALF_STEP_GBPS + error + 1e-9, (
                f"{path.name}:{row.line}"
            )
            checked += 1
    if any(p.collective for p in _runs(path)):
        assert checked


def test_a_whole_capture_set_is_checked() -> None:
    checked = sum(len(p.rows) for path in CAPTURES for p in _runs(path) if p.collective)
    assert checked > 600


@pytest.mark.parametrize("stem", PAIRS)
def test_computed_values_are_closer_to_the_unrounded_json(stem: str) -> None:
    """The -J JSON holds the bandwidths unrounded: the values the tables take are nearer them
    than the printed 2 decimals, and never further than their own error bound."""
    text = parse_text((DATA / f"{stem}.txt").read_text())
    unrounded = parse_json((DATA / f"{stem}.json").read_bytes())
    exact = {(r.size_bytes, r.placement): r.busbw_gbps for r in unrounded.rows}
    taken = precise_results(text, text.collective, text.ranks)
    printed_error = taken_error = 0.0
    for printed, row in zip(text.rows, taken.rows, strict=True):
        truth = exact[(row.size_bytes, row.placement)]
        assert truth is not None and row.busbw_gbps is not None and printed.busbw_gbps is not None
        printed_error += abs(printed.busbw_gbps - truth)
        taken_error += abs(row.busbw_gbps - truth)
        assert abs(row.busbw_gbps - truth) <= abs(printed.busbw_gbps - truth) + 1e-3
    assert taken_error < printed_error / 2


def test_a_slow_row_takes_the_time_and_a_fast_short_one_keeps_its_print() -> None:
    slow = precise_row(_row(8786.03, 0.12, 0.12), 1.0)  # emulator: 1 MiB, 2 ranks
    assert slow.busbw_gbps == pytest.approx(1048576 / 8786.03 / 1e3)
    assert slow.busbw_gbps != 0.12
    fast = precise_row(_row(17.56, 119.42, 59.71, size=2097152), 0.5)
    assert (fast.algbw_gbps, fast.busbw_gbps) == (119.42, 59.71)


def test_a_row_without_time_or_factor_keeps_what_it_can() -> None:
    no_time = _row(8786.03, 0.12, 0.12).model_copy(update={"time_us": None})
    assert precise_row(no_time, 1.0) == no_time
    unknown = precise_row(_row(8786.03, 0.12, 0.13), None)
    assert unknown.busbw_gbps == 0.13
    assert unknown.algbw_gbps == pytest.approx(1048576 / 8786.03 / 1e3)
