"""nccl-tests text/JSON parser, checked against real captures (tests/data/nccl-tests/README.md).

This module holds those with real processes; the same subject's other tests:
tests/unit/test_parse_nccltests.py (its pure tests).
"""

from __future__ import annotations

import time

import pytest

from r2bench.parse.nccltests.text import parse_text
from tests.support.parse_nccltests import read


@pytest.mark.slow
def test_100mb_input_is_linear() -> None:
    info = "vm:2374:2374 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via NET/Socket/0 " + "x" * 30
    block = (info + "\n") * 999 + read("all_reduce_perf.socket.N5.txt").splitlines()[11] + "\n"
    text = block * (100_000_000 // len(block))
    start = time.perf_counter()
    p = parse_text(text)
    elapsed = time.perf_counter() - start
    assert len(text) > 99_000_000
    assert len(p.rows) == 2 * (100_000_000 // len(block))
    assert elapsed < 60, elapsed
