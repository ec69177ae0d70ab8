"""Outputs and runs: where one text output holds several runs that no header separates
(`split_by_ratio`), and one run read from both its text and its `-J` JSON (`combine`).
"""

from __future__ import annotations

import itertools
from typing import Any

from r2bench.parse.models import ParsedNcclTests
from r2bench.parse.nccltests.salvage import consensus
from r2bench.parse.nccltests.state import RunState


def split_by_ratio(st: RunState) -> list[RunState]:
    """An extract of several runs with no header between them (`grep -h` of the rows of a
    1-, 2-, 4- and 8-node run): where the sizes start over and the rows after agree on
    another busbw/algbw factor than those before (another rank count), another run begins.
    Each part says it is one of an extract; one run (-N cycles, any factor) stays whole."""
    if not st.restarts or len(st.rows) < 4:
        return [st]
    bounds = sorted({0, *st.restarts, len(st.rows)})
    parts: list[tuple[int, int]] = []
    start = 0
    agreed: tuple[float, float] | None = None  # the factor the current run's sweeps share
    for a, b in itertools.pairwise(bounds):
        if b <= a:
            continue
        rng = consensus(st.ratios[a:b])
        if rng is None or rng[2] < 2:
            continue  # a sweep whose rows do not agree among themselves tells nothing
        if agreed is not None and (rng[1] < agreed[0] or rng[0] > agreed[1]):
            parts.append((start, a))
            start, agreed = a, (rng[0], rng[1])
        elif agreed is None:
            agreed = (rng[0], rng[1])
        else:
            agreed = (max(agreed[0], rng[0]), min(agreed[1], rng[1]))
    parts.append((start, len(st.rows)))
    if len(parts) == 1:
        return [st]
    return _cut(st, parts)


def _cut(st: RunState, parts: list[tuple[int, int]]) -> list[RunState]:
    """The runs of `st` made of its rows cut at `parts` (row index ranges): the first keeps
    the header facts, the last the footer's, each its own cycles, line range and warning."""
    out: list[RunState] = []
    footer_keys = ("oob_values", "oob_failed", "avg_busbw_gbps", "footer", "concluded")
    for n, (a, b) in enumerate(parts):
        rows = st.rows[a:b]
        first_cycle = min(r.cycle for r in rows)
        if first_cycle:
            rows = [r.model_copy(update={"cycle": r.cycle - first_cycle}) for r in rows]
        part = RunState(layout=st.layout, in_table=st.in_table, named=dict(st.named))
        part.blank_redop_lines = st.blank_redop_lines
        part.rows, part.ratios = rows, st.ratios[a:b]
        part.first_line = st.first_line if n == 0 else rows[0].line
        part.last_line = st.last_line if n == len(parts) - 1 else (st.rows[b].line or 1) - 1
        if n == 0:
            part.fields = {k: v for k, v in st.fields.items() if k not in footer_keys}
            part.devices, part.library, part.n_ranks = st.devices, st.library, st.n_ranks
            part.warnings = list(st.warnings)
        elif n == len(parts) - 1:
            part.fields = {k: v for k, v in st.fields.items() if k in footer_keys}
        factor = consensus(part.ratios)
        how = f"; busbw/algbw {factor[0]:.4f}..{factor[1]:.4f}" if factor else ""
        part.warn(
            f"run {n + 1} of {len(parts)} in an extract with no header between its runs: the "
            f"sizes start over with another busbw/algbw factor (another rank count){how}"
        )
        out.append(part)
    return out


def combine(text: ParsedNcclTests, json_result: ParsedNcclTests) -> ParsedNcclTests:
    """The text result, with per-iteration times and any header field it lacks from the JSON.

    Rows come from the text (they carry line numbers and timestamps) unless it has none.
    """
    update: dict[str, Any] = {
        name: getattr(json_result, name)
        for name in ParsedNcclTests.model_fields
        if getattr(text, name) in (None, []) and getattr(json_result, name) not in (None, [])
    }
    update["warnings"] = text.warnings + json_result.warnings
    return text.model_copy(update=update)


TWIN_TIME_SLACK = 0.01
"""How far a text row's time may lie from its -J twin's (relative) and still be one
measurement: the text prints 2 decimals, the JSON the full number."""


def twins_differ(text: ParsedNcclTests, json_result: ParsedNcclTests) -> str | None:
    """Why a text output and a -J file of the same stem are not one run (a different
    collective, library, hosts, or times measured), or None when nothing says so."""
    for name, what in (("collective", "collective"), ("nccl_library", "NCCL library")):
        mine, theirs = getattr(text, name), getattr(json_result, name)
        if mine is not None and theirs is not None and mine != theirs:
            return f"its {what} is {theirs}, the text's {mine}"
    hosts = {d.host for d in text.devices if d.host}
    json_hosts = {d.host for d in json_result.devices if d.host}
    if hosts and json_hosts and not hosts & json_hosts:
        return f"it ran on {', '.join(sorted(json_hosts))}, the text on {', '.join(sorted(hosts))}"
    if not text.rows or not json_result.rows:
        return None
    times = {(r.size_bytes, r.placement, r.cycle): r.time_us for r in text.rows}
    shared = 0
    for row in json_result.rows:
        key = (row.size_bytes, row.placement, row.cycle)
        if key not in times:
            continue
        shared += 1
        mine, theirs = times[key], row.time_us
        if (
            mine is not None
            and theirs is not None
            and abs(mine - theirs) > max(0.0051, TWIN_TIME_SLACK * abs(mine))
        ):
            return (
                f"its {row.size_bytes} B {row.placement} time is {theirs:g} us, the text's {mine:g}"
            )
    if not shared:
        return "no size of its results is one of the text's"
    return None
