"""The training workloads' line format (r2bench.workloads.train_format): written and read back."""

from __future__ import annotations

import pytest

from r2bench.workloads.train_format import TrainEnd, TrainStart, UpdateLine, read_line

LINE = UpdateLine(3, 1.5, 2.25, 0.75, 4.123456789012345, 1e4, 0.5, 400, "ab", True)


def test_lines_read_back_exactly() -> None:
    assert read_line(LINE.text()) == LINE  # floats round-trip: runs compare bit for bit
    start = TrainStart("w", "tiny", 10, 3, 42, 5, 4, 8, 40, "lib", stubbed="ncclCommShrink")
    assert read_line(start.text()) == start
    assert read_line("[1,0]<stdout>:" + LINE.text()) is None  # prefixes: the reader's business
    end = TrainEnd(5, float("nan"), 3.0)
    assert read_line(end.text()) == TrainEnd(5, None, 3.0)  # JSON has no NaN: null


@pytest.mark.parametrize(
    "body",
    [
        '{"update": 1e400}',
        '{"update": true, "start": 1, "end": 2, "step_s": 1, "loss": 1, "tokens_per_s": 1,'
        ' "grad_norm": 1, "allreduce_bytes": 1}',
        '{"update": 1, "start": 1, "end": 2, "step_s": 1, "loss": 1' + "0" * 400 + ","
        ' "tokens_per_s": 1, "grad_norm": 1, "allreduce_bytes": 1}',
        '{"update": 1, "start": "x", "end": 2, "step_s": 1, "loss": 1, "tokens_per_s": 1,'
        ' "grad_norm": 1, "allreduce_bytes": 1}',
        '{"update": 1}',  # a required key missing
        "[1, 2]",
        '{"update": 1, "start": 1, "end": 2, ',  # cut short
        "[" * 100_000,
    ],
)
def test_damaged_or_hostile_lines_are_none(body: str) -> None:
    assert read_line(f"#train {body}") is None


def test_recovery_records_read_back() -> None:
    from r2bench.workloads.train_format import (
        TrainAbort,
        TrainCheckpoint,
        TrainResume,
        TrainShrink,
    )

    records = [
        TrainCheckpoint(10, 1.5, 0.25, "/w/ckpt-10.npz"),
        TrainResume(10, 9.0, attempt=2, path="/w/ckpt-10.npz"),
        TrainAbort(13, 4.0, 5.0, "collective stalled"),
        TrainShrink(13, 4.5, "1,3", 2, detect_s=0.4),
    ]
    assert [read_line(r.text()) for r in records] == records
    assert read_line('#train-shrink {"update": 1, "at": 1, "dropped": [1], "ranks": 2}') is None
