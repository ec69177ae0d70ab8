"""Salvaging broken output: the checks that tell a genuine result row from one that lost or
shifted a column (blank redops, numbers that do not fit each other, a busbw/algbw factor no
other row shares), and the complete results of a `-J` JSON file cut short.

A row these checks refuse is not read, and said (`ParsedNcclTests.warnings`,
`unreadable_rows`); the rest of the run is kept.
"""

from __future__ import annotations

import heapq
import json
from typing import Any

from r2bench.parse.models import ResultRow
from r2bench.parse.nccltests.collective import collective_from_binary, collective_from_file_name
from r2bench.parse.nccltests.columns import DEFAULT_LAYOUT, Layout, to_float
from r2bench.parse.nccltests.state import RunState, unreadable


def short_row(st: RunState) -> None:
    """A row with fewer columns than its table, and the table goes on (another row, the
    footer): nccl-tests prints every row whole, so a column is missing somewhere in it (a
    blank column, a paste that lost one) and which one cannot be told: not read."""
    assert st.pending is not None
    line, tokens = st.pending
    st.pending = None
    width = (st.layout or DEFAULT_LAYOUT).width
    unreadable(st, line, f"{len(tokens)} columns where the header has {width}, and more follow")


def blank_redop(layout: Layout, tokens: list[str]) -> list[str] | None:
    """The row with its blank redop column given back, or None when its redop is not blank:
    releases before 2.13.4 printed nothing under `redop` for the collectives that do not
    reduce, so a number stands where the redop's name should (`0  0  float  1.63 ...`,
    `8  2  float  -1  ...`). Whether the table may have one is settled when the run ends
    (`check_blank_redops`): a row that lost its redop looks the same."""
    if "redop" not in layout.head:
        return None
    i = layout.head.index("redop")
    if len(tokens) > i and to_float(tokens[i]) is not None:
        return [*tokens[:i], "", *tokens[i:]]
    return None


# Collectives that print a redop's name in every release: a blank one is a lost column.
_NAMED_REDOP = frozenset({"all_reduce", "reduce", "reduce_scatter", "sendrecv"})


def check_blank_redops(st: RunState, binary_name: str | None, file_name: str | None) -> None:
    """Rows read with a blank redop stay only where the table may have one: no row of the
    run names a redop, and nothing names a collective that reduces. Otherwise they are rows
    that lost a column (which one cannot be told): not read."""
    if not st.blank_redop_lines:
        return
    named = (
        st.fields.get("collective")
        or st.named.get("command_line")
        or st.named.get("failure_line")
        or collective_from_binary(binary_name)
        or collective_from_file_name(file_name)
    )
    blank = st.blank_redop_lines
    # busbw above algbw is a reduction's (2(n-1)/n); the others move at most what they send
    reduces = any(
        q is not None and q[0] > 1.01
        for r, q in zip(st.rows, st.ratios, strict=True)
        if r.line in blank
    )
    if (
        named not in _NAMED_REDOP
        and not reduces
        and not any(r.redop for r in st.rows if r.line not in blank)
    ):
        return
    why = (
        f"{named} always prints its redop"
        if named in _NAMED_REDOP
        else "busbw above algbw is a reduction's"
        if reduces
        else "the table's other rows name a redop"
    )
    kept = [(r, q) for r, q in zip(st.rows, st.ratios, strict=True) if r.line not in blank]
    for line in sorted({r.line for r in st.rows if r.line in blank}):
        unreadable(st, line or 0, f"its redop column is blank and {why}: a column is missing")
    st.rows = [r for r, _ in kept]
    st.ratios = [q for _, q in kept]


def partial_group_differs(layout: Layout, size: int, rest: list[str]) -> str | None:
    """A row cut short ends inside a placement: the part there is must still read as that
    placement's first columns (time, then algbw = size/time). When it does not, a column
    went missing earlier in the row and every value after it sits one place off."""
    width = len(layout.group)
    part = rest[(len(rest) // width) * width :]
    if len(part) < 2 or "root" not in layout.head or layout.group[:2] != ("time", "algbw"):
        return None
    time, algbw = to_float(part[0]), to_float(part[1])
    if time is None or algbw is None or time <= 0:
        return "the columns after the last full placement are not a time and an algbw"
    values = {"time_us": time, "algbw_gbps": algbw}
    why = inconsistent(size, part[0], values, exact=True, ranks=0)
    return f"a column is missing before the cut ({why})" if why else None


def ratio_range(
    group: list[str], names: tuple[str, ...], values: dict[str, Any]
) -> tuple[float, float] | None:
    """busbw / algbw is one factor for a whole run (set by collective and rank count): the
    range the printed digits of one placement allow, or None when they allow too much."""
    alg, bus = values.get("algbw_gbps"), values.get("busbw_gbps")
    if alg is None or bus is None or alg < 0.05:
        return None  # too few digits to tell
    da = _half_ulp(group[names.index("algbw")])
    db = _half_ulp(group[names.index("busbw")])
    return max(bus - db, 0.0) / (alg + da), (bus + db) / (alg - da)


def consensus(
    ranges: list[tuple[float, float] | None],
) -> tuple[float, float, int] | None:
    """(low, high, count): the busbw/algbw range most rows' ranges share (at a tie, the one
    the earliest row is in), or None when no row tells. A sweep over the ranges' ends:
    O(n log n)."""
    told = [rng for rng in ranges if rng is not None]
    if not told:
        return None
    low, high = max(r[0] for r in told), min(r[1] for r in told)
    if low <= high:
        return low, high, len(told)  # they all agree: the common case, O(n)
    points: list[tuple[float, int, int]] = []
    for index, rng in enumerate(ranges):
        if rng is not None:
            points.append((rng[0], 0, index))
            points.append((rng[1], 1, index))
    if not points:
        return None
    points.sort()
    next_end = [0.0] * len(points)  # the value of the first range end at or after each point
    upcoming = points[-1][0]
    for i in range(len(points) - 1, -1, -1):
        if points[i][1]:
            upcoming = points[i][0]
        next_end[i] = upcoming
    inside: set[int] = set()
    earliest: list[int] = []  # heap of the rows inside (lazily pruned)
    best: tuple[int, int, float, float] | None = None  # (count, -earliest row, low, high)
    for i, (value, end, index) in enumerate(points):
        if end:
            inside.discard(index)
            continue
        inside.add(index)
        heapq.heappush(earliest, index)
        while earliest[0] not in inside:
            heapq.heappop(earliest)
        score = (len(inside), -earliest[0])
        if best is None or score > best[:2]:
            best = (*score, value, next_end[i])
    assert best is not None
    return best[2], best[3], best[0]


def keep_consensus(st: RunState) -> None:
    """Drop the placements whose busbw/algbw no majority of the run's rows share: one shifted
    column, or one number edited by hand, is outvoted by the genuine rows around it (it
    never narrows the range the others must fit)."""
    agreed = consensus(st.ratios)
    if agreed is None or agreed[2] == len([r for r in st.ratios if r is not None]):
        return
    low, high, _ = agreed
    kept: list[ResultRow] = []
    kept_ratios: list[tuple[float, float] | None] = []
    lines_before = {r.line for r in st.rows}
    for row, rng in zip(st.rows, st.ratios, strict=True):
        if rng is not None and (rng[1] < low or rng[0] > high):
            st.warn(
                f"line {row.line}: {row.placement} columns do not fit the run's other rows "
                f"(busbw/algbw {rng[0]:.4f}..{rng[1]:.4f} where the others share "
                f"{low:.4f}..{high:.4f}): not read"
            )
            continue
        kept.append(row)
        kept_ratios.append(rng)
    lost = lines_before - {r.line for r in kept}
    if lost:
        st.fields["unreadable_rows"] = st.fields.get("unreadable_rows", 0) + len(lost)
    st.rows, st.ratios = kept, kept_ratios


def _half_ulp(tok: str) -> float:
    """Half the last printed digit of a number (`4366.46` -> 0.005, `10094` -> 0.5)."""
    decimals = len(tok.partition(".")[2]) if "." in tok and "e" not in tok.lower() else 0
    return 0.5 * 10.0**-decimals


def inconsistent(
    size: int, time_tok: str, values: dict[str, Any], *, exact: bool, ranks: int
) -> str | None:
    """Why a placement's numbers cannot be one measurement, or None: nccl-tests prints
    algbw = size / time at most, and busbw = algbw x a factor of 2 at most, and of 1/2 at
    least from 2 ranks on (by collective and rank count). Tables with a root column (every
    release since 2.x added it) print algbw = size / time exactly; older all_gather printed it
    per rank, below. A column shifted into another's place breaks one of these."""
    time, algbw, busbw = values.get("time_us"), values.get("algbw_gbps"), values.get("busbw_gbps")
    if time is None or algbw is None:
        return None
    slack = _half_ulp(time_tok)
    if time == 0 and size > 0:
        return "no time for a non-empty message"
    if time - slack > 0:
        low, high = size / ((time + slack) * 1e3), size / ((time - slack) * 1e3)
        if algbw > high + 0.0051 + 1e-3 * high:
            return f"algbw {algbw:g} is more than size/time ({high:.3g})"
        if exact and algbw < low - 0.0051 - 1e-3 * low:
            return f"algbw {algbw:g} is less than size/time ({low:.3g})"
    if busbw is not None and busbw > 2 * algbw + 0.0151:
        return f"busbw {busbw:g} is more than twice algbw {algbw:g}"
    if busbw is not None and ranks >= 2 and algbw >= 0.05 and busbw < algbw / 2 - 0.0151:
        return f"busbw {busbw:g} is less than half algbw {algbw:g} at {ranks} ranks"
    return None


def salvage_json_results(text: str) -> list[Any]:
    """Decode the complete objects of a truncated `"results":[...]` list."""
    start = text.find('"results"')
    start = text.find("[", start) if start >= 0 else -1
    if start < 0:
        return []
    decoder = json.JSONDecoder()
    out: list[Any] = []
    pos = start + 1
    while True:
        while pos < len(text) and text[pos] in " \t\r\n,":
            pos += 1
        try:
            obj, pos = decoder.raw_decode(text, pos)
        except (ValueError, RecursionError):  # cut short, or nested too deeply to read
            return out
        out.append(obj)
