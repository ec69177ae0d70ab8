"""Bandwidths computed from a result's time and size, which carry the precision.

nccl-tests prints algbw and busbw with 2 decimals: at 0.04-0.10 GB/s that is a 10-25 % step.
The time column keeps 4 to 6 significant digits, so the bandwidths are worked out again from it,
as nccl-tests works them out (`src/*.cu`, `*GetBw`): algbw = size / time (the printed size is
the bytes the collective moves per rank's buffer, so this holds for every test), and busbw =
algbw x the collective's bus factor at n ranks:

| collective | bus factor |
|---|---|
| all_reduce | 2(n-1)/n |
| all_gather, reduce_scatter, alltoall | (n-1)/n |
| broadcast, reduce, sendrecv | 1 |

Which of the two carries more precision depends on the row: a time printed as `8786.03` us
gives algbw to 1 part in 10^6, far finer than `0.12`; a 17.56 us time of a 119.42 GB/s row
gives it to 3 parts in 10^4 (0.03 GB/s), coarser than the 2 decimals. So each row takes the
computed values where their error (half the time's last printed digit, relative) is smaller
than the printed values' (0.005 GB/s), else keeps the printed ones. A row without a time
keeps its printed values; where the collective or the rank count is not known, busbw stays
as printed.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal

from r2bench.parse.models import ParsedNcclTests, ResultRow

PRINTED_HALF_STEP_GBPS = 0.005
"""Error of a bandwidth nccl-tests printed with 2 decimals."""

_FACTORS: dict[str, Callable[[int], float]] = {
    "all_reduce": lambda n: 2.0 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "alltoall": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
    "sendrecv": lambda n: 1.0,
}


def bus_factor_of(collective: str | None, ranks: int | None) -> float | None:
    """busbw/algbw of a collective at `ranks` ranks (nccl-tests' formula); None when either is
    not known, or the collective is not one of the table's."""
    factor = _FACTORS.get(collective or "")
    if factor is None or ranks is None or ranks < 1:
        return None
    return factor(ranks)


def algbw_gbps(size_bytes: int, time_us: float | None) -> float | None:
    """size / time in GB/s (10^9 B/s); None without a positive time."""
    if time_us is None or not time_us > 0:
        return None
    return size_bytes / time_us / 1e3


def time_half_step(time_us: float) -> float:
    """Half the last printed digit of a time read from text (`8786.03` -> 0.005, `359918`
    -> 0.5): its error. A trailing zero the float lost (`22.80` read as 22.8) only makes the
    bound coarser."""
    exponent = Decimal(repr(time_us)).normalize().as_tuple().exponent
    digits = -exponent if isinstance(exponent, int) and exponent < 0 else 0
    return 0.5 * 10.0**-digits


def precise_row(row: ResultRow, factor: float | None) -> ResultRow:
    """The row with algbw and busbw computed from its time and size (busbw only with a bus
    factor), where that is more precise than what was printed (module docstring)."""
    algbw = algbw_gbps(row.size_bytes, row.time_us)
    if algbw is None or row.time_us is None:
        return row
    relative = time_half_step(row.time_us) / row.time_us
    largest = algbw * max(factor or 1.0, 1.0)
    if row.algbw_gbps is not None and largest * relative >= PRINTED_HALF_STEP_GBPS:
        return row  # the printed 2 decimals are finer than the time's digits
    busbw = algbw * factor if factor is not None else row.busbw_gbps
    return row.model_copy(update={"algbw_gbps": algbw, "busbw_gbps": busbw})


def precise_results(
    parsed: ParsedNcclTests, collective: str | None, ranks: int | None
) -> ParsedNcclTests:
    """The results with every row's bandwidths computed from its time and size where that is
    more precise (`precise_row`), the bus factor that of `collective` at `ranks`."""
    if not parsed.rows:
        return parsed
    factor = bus_factor_of(collective, ranks)
    rows = [precise_row(r, factor) for r in parsed.rows]
    return parsed.model_copy(update={"rows": rows})
