"""The columns of an nccl-tests result table: the layout a column-name line declares or a
row's shape implies, and the tokens a row is made of (counts, names, numbers, `-S` stamps).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from r2bench.parse.numbers import INT64_MAX, BadNumber, bounded_int

_DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_TIME_RE = re.compile(r"^\d{2}:\d{2}:\d{2}$")
INT_RE = re.compile(r"^[-+]?\d+$")
NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_ITER_COLUMNS = ("iter_min_us", "iter_max_us", "iter_p99_us", "iter_cv_pct")
# Column names of every nccl-tests / rccl-tests generation -> one name each.
_COLUMN_NAMES = {
    "size": "size", "bytes": "size", "count": "count", "n": "count", "type": "type",
    "redop": "redop", "op": "redop", "root": "root", "time": "time", "algbw": "algbw",
    "busbw": "busbw", "#wrong": "wrong", "wrong": "wrong", "error": "error", "res": "error",
    "i_min": "iter_min_us", "i_max": "iter_max_us", "i_p99": "iter_p99_us",
    "i_cv%": "iter_cv_pct", "i_cv": "iter_cv_pct",
}  # fmt: skip
_HEAD_COLUMNS = ("size", "count", "type", "redop", "root")
SIZE_ONLY = ("size",)
"""The head of a table an author cut to `size time algbw busbw #wrong`: no count, no type."""


def to_int(tok: str) -> int | None:
    """int of a token; floats like `0e+00` or `4.1943e+06` (#wrong printed with %g) are
    accepted when integral. None when it is not a whole number within int64."""
    try:
        return bounded_int(tok, "token", low=-INT64_MAX)
    except BadNumber:
        return None


def to_float(tok: str) -> float | None:
    """float of a token, None when it is not a number."""
    try:
        return float(tok)
    except ValueError:
        return None


def is_number(tok: str) -> bool:
    """Whether a token is a number, or `N/A` printed where one stands."""
    return tok == "N/A" or to_float(tok) is not None


@dataclass(frozen=True)
class Layout:
    """The columns of a result row: the row's own (size, count, type, [redop], [root]) and, once
    per placement (out-of-place, then in-place), the placement's (time, algbw, busbw, #wrong or
    error, [per-iteration columns]). Learned from the column-name line of the table, or from the
    shape of the first full row when a paste has no such line. A table an author condensed to
    one placement (`size count type redop root time algbw busbw`) has `placements` 1; one cut
    further to `size time algbw busbw #wrong` has the head `SIZE_ONLY`."""

    head: tuple[str, ...] = _HEAD_COLUMNS
    group: tuple[str, ...] = ("time", "algbw", "busbw", "wrong")
    from_header: bool = False
    placements: int = 2

    @property
    def width(self) -> int:
        return len(self.head) + self.placements * len(self.group)


DEFAULT_LAYOUT = Layout()


def layout_from_header(names: list[str]) -> Layout | None:
    """The layout a column-name line declares (`size count type redop root time algbw busbw
    #wrong time ...`); None when the line is not a complete one. A line naming one placement's
    columns only (a condensed table) declares one placement."""
    # `timestamp` (-S), `...` and unknown extras are left out
    canon = [c for c in (_COLUMN_NAMES.get(n.lower()) for n in names) if c is not None]
    if "time" not in canon:
        return None
    first = canon.index("time")
    head = tuple(canon[:first])
    rest = canon[first:]
    second = rest.index("time", 1) if "time" in rest[1:] else len(rest)
    group = tuple(rest[:second])
    if head[:3] != ("size", "count", "type") and head != SIZE_ONLY:
        return None
    if not {"algbw", "busbw"} <= set(group):
        return None
    return Layout(
        head=head, group=group, from_header=True, placements=1 if second == len(rest) else 2
    )


def layout_from_row(tokens: list[str]) -> Layout | None:
    """The layout of a full row when no column-name line was seen: (size, count, type), a
    redop when the next token is a name, a root when the count of the rest says so (also a
    root after a blank redop: `8 2 float -1 ...`)."""
    if len(tokens) < 4 or not (INT_RE.match(tokens[0]) and INT_RE.match(tokens[1])):
        return None
    redop = NAME_RE.match(tokens[3]) is not None and tokens[3] != "N/A"
    rest = len(tokens) - (4 if redop else 3)
    if read_timestamp(tokens[-2:]) is not None:
        rest -= 2
    head: tuple[str, ...]
    if rest in (8, 16):
        head = ("size", "count", "type", "redop") if redop else ("size", "count", "type")
    elif rest - 1 in (8, 16) and INT_RE.match(tokens[4 if redop else 3]):
        head = _HEAD_COLUMNS if redop else ("size", "count", "type", "root")
        rest -= 1
    else:
        return None
    group = ("time", "algbw", "busbw", "wrong") + (_ITER_COLUMNS if rest == 16 else ())
    return Layout(head=head, group=group)


def is_column_line(line: str) -> bool:
    """Whether a `#` line names a table's columns (`#  size  count  type ... busbw ...`)."""
    return (
        ("size" in line or "bytes" in line)
        and ("time" in line or "redop" in line)
        and layout_from_header(line.lstrip("#").split()) is not None
    )


def looks_like_row(tokens: list[str]) -> bool:
    """Whether a line's first tokens start a result row: a size, a count and a type name."""
    return (
        len(tokens) >= 3
        and INT_RE.match(tokens[0]) is not None
        and INT_RE.match(tokens[1]) is not None
        and not is_number(tokens[2])
        and NAME_RE.match(tokens[2]) is not None
    )


def read_timestamp(tokens: list[str]) -> datetime | None:
    """The `-S` stamp (`2024-05-01 12:00:00`) two tokens hold, or None."""
    if len(tokens) >= 2 and _DATE_RE.match(tokens[0]) and _TIME_RE.match(tokens[1]):
        try:
            return datetime.strptime(f"{tokens[0]} {tokens[1]}", "%Y-%m-%d %H:%M:%S")
        except ValueError:
            return None
    return None
