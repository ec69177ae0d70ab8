"""Per-iteration times from a verifying workload's `#iter` lines, where `-J` holds none.

nccl-tests writes its `-J` results when a size's row is done, so a run that dies mid-size (a
crash at the fault) leaves that size's completed iterations out of `result.json`, and often
every size's: the JSON is written at the end. The verification workload and the emulator
print each timed iteration as it completes (`parse.verify`), so those iterations are known:
their size and cycle from the line, their placement from the run's plan (nccl-tests times
`iters` out-of-place iterations, then `iters` in-place ones, per size and cycle).

`logged_blocks` gives one block per (size, placement, cycle) the `-J` results lack, with the
last iteration's end on the controller clock (rank 0's own wall clock, less the launch node's
offset).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from itertools import groupby

from r2bench.parse.models import PerIteration, Placement
from r2bench.parse.verify import IterationRecord, Verification

PLACEMENTS: tuple[Placement, ...] = ("out_of_place", "in_place")


@dataclass(frozen=True)
class LoggedBlock:
    """One size, placement and cycle's iterations as the workload printed them."""

    times: PerIteration
    end: float
    """When its last iteration ended, on the controller clock."""


def logged_blocks(
    check: Verification | None,
    known: Iterable[tuple[int, str, int]],
    iters_per_placement: int | None,
    launch_offset: float,
) -> list[LoggedBlock]:
    """The blocks of `check`'s `#iter` lines whose (size, placement, cycle) is not in `known`
    (those the `-J` results hold). Without the plan's iteration count the placement of an
    iteration cannot be told: no block."""
    if check is None or not iters_per_placement or iters_per_placement < 1:
        return []
    have = set(known)
    out = []
    ordered = sorted(check.samples, key=lambda s: (s.cycle, s.iter))
    for (size, cycle), group in groupby(ordered, key=lambda s: (s.size, s.cycle)):
        samples = list(group)
        for index, placement in enumerate(PLACEMENTS):
            part = samples[index * iters_per_placement : (index + 1) * iters_per_placement]
            if part and (size, placement, cycle) not in have:
                times = PerIteration(
                    size_bytes=size,
                    placement=placement,
                    times_us=tuple(_time_us(s) for s in part),
                    cycle=cycle,
                )
                out.append(LoggedBlock(times, part[-1].end - launch_offset))
    return out


def _time_us(sample: IterationRecord) -> float:
    """The iteration's time as its row would count it (`seconds`, the mean over ranks), else
    rank 0's start to end."""
    seconds = sample.seconds if sample.seconds is not None else sample.end - sample.start
    return seconds * 1e6
