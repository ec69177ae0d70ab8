"""Property: shifting, dropping or blanking one column of a real table never yields a
plausible-looking wrong row. Whatever r2bench reads from the damaged line is exactly what the
undamaged line says (a placement it cannot vouch for is left out), and the damage is flagged.
Tables of four generations: 2.19 with a root column, early 2.x without one (float `error`
column), old all_gather without a redop column, and wide GB200 rows whose times print without
decimals (an integral time could pass for a #wrong count)."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from r2bench.parse.models import ResultRow
from r2bench.parse.nccltests.text import parse_text
from tests.support import paths

DATA = paths.DATA
TABLES = [
    (DATA / "nccl-tests" / "all_reduce_perf.socket.c1.txt").read_text(),
    (DATA / "public" / "nccl-tests-78.txt").read_text(),
    (DATA / "public" / "rccl-930.txt").read_text(),
    (DATA / "public" / "coreweave-nccl-tests-43.txt").read_text(),
    (DATA / "public" / "nccl-ebpf-socket.txt").read_text(),
]
_TOKEN_RE = re.compile(r"\S+")
_PREFIX_RE = re.compile(r"^\[\d+,\d+\]<stdout>:")


def _row_lines(text: str) -> list[int]:
    """0-based indexes of the result rows the undamaged table yields."""
    rows = parse_text(text).rows
    return sorted({(r.line or 0) - 1 for r in rows})


def _damage(line: str, column: int, how: str) -> str:
    """The line with one column shifted (a stray value pushes the rest right), dropped (the
    rest move left) or blanked (spaces where the value was)."""
    prefix = _PREFIX_RE.match(line)
    skip = prefix.end() if prefix else 0  # the launcher's prefix is not a column
    spans = [m.span() for m in _TOKEN_RE.finditer(line, skip)]
    start, end = spans[column % len(spans)]
    if how == "blank":
        return line[:start] + " " * (end - start) + line[end:]
    if how == "drop":
        return line[:start].rstrip() + line[end:]
    return line[:start] + line[start:end] + " " + line[start:]  # shift


def _by_line(rows: list[ResultRow], line: int) -> dict[str, ResultRow]:
    return {r.placement: r for r in rows if r.line == line}


@settings(max_examples=600, deadline=None)
@given(
    table=st.integers(0, len(TABLES) - 1),
    row=st.integers(0, 1000),
    column=st.integers(0, 30),
    how=st.sampled_from(["shift", "drop", "blank"]),
    ends_there=st.booleans(),
)
def test_a_damaged_column_is_flagged_never_misread(
    table: int, row: int, column: int, how: str, ends_there: bool
) -> None:
    text = TABLES[table]
    lines = text.splitlines(keepends=True)
    rows = _row_lines(text)
    index = rows[row % len(rows)]
    damaged_line = _damage(lines[index].rstrip("\n"), column, how) + "\n"
    damaged = [*lines[:index], damaged_line, *([] if ends_there else lines[index + 1 :])]
    before = parse_text("".join(lines[: index + 1] if ends_there else lines))
    after = parse_text("".join(damaged))
    want, got = _by_line(before.rows, index + 1), _by_line(after.rows, index + 1)
    for placement, read in got.items():
        assert read == want[placement], f"misread {damaged_line!r} as {read}"
    if len(got) < len(want):
        assert any(f"line {index + 1}:" in w for w in after.warnings), after.warnings
    # the other lines are read as before
    others = [r for r in after.rows if r.line != index + 1]
    assert [r for r in before.rows if r.line != index + 1] == others or not ends_there
