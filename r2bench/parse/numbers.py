"""One bounded reader for the numbers of every file r2bench parses.

A log or `-J` file is someone else's text: a count may read `1e400`, `Infinity` or 10^23. Python
takes each of them (an unbounded int, an infinite float), and they fail much later, in a table
of int64 columns, as a bug. Every number a reader keeps passes through here first: finite and
within its field's range, else :class:`BadNumber` says which field and why, and the reader
refuses that row or field (located) and reads on.
"""

from __future__ import annotations

import math
import re

INT64_MAX = 2**63 - 1
"""The largest whole number a table column holds."""
ID_MAX = 2**32 - 1
"""The largest pid, thread id or rank a log line may name (Linux pids stay far below)."""
MEASURE_MAX = 1e18
"""The largest time (us) or bandwidth (GB/s) kept: beyond it no measurement is plausible."""
_MAX_CHARS = 64  # a number longer than this is refused before Python converts it
_INT_RE = re.compile(r"^[-+]?\d+$")


class BadNumber(ValueError):
    """A number a reader refuses: not a number, not finite, or outside its field's range."""


def shown(value: object) -> str:
    """`value` as a message quotes it: its repr, cut to 40 characters (a 5,000-digit token)."""
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:37]}..."


def _number(value: object, what: str) -> int | float:
    """`value` as a JSON value or a token holds it: an int, a float or the text of one."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise BadNumber(f"{what} {shown(value)} is not a number")
    if isinstance(value, str):
        text = value.strip()
        if len(text) > _MAX_CHARS:
            raise BadNumber(f"{what} {shown(value)} is out of range (too many digits)")
        if _INT_RE.match(text):
            return int(text)
        try:
            return float(text)
        except ValueError:
            raise BadNumber(f"{what} {shown(value)} is not a number") from None
    return value


def bounded_int(value: object, what: str, *, low: int = 0, high: int = INT64_MAX) -> int:
    """`value` as a whole number from `low` to `high`; an integral float (`4.1943e+06`, as
    nccl-tests prints a large #wrong) counts. BadNumber otherwise, naming `what`."""
    number = _number(value, what)
    if isinstance(number, float):
        if not math.isfinite(number):
            raise BadNumber(f"{what} {shown(value)} is not finite")
        if not number.is_integer():
            raise BadNumber(f"{what} {shown(value)} is not a whole number")
        number = int(number)
    if not low <= number <= high:
        raise BadNumber(f"{what} {shown(value)} is out of range ({low} to {high})")
    return number


def bounded_float(
    value: object, what: str, *, low: float = 0.0, high: float = MEASURE_MAX
) -> float:
    """`value` as a finite number from `low` to `high`; BadNumber otherwise, naming `what`."""
    number = _number(value, what)
    if isinstance(number, int):  # compared whole: float() of a huge int overflows
        if not low <= number <= high:
            raise BadNumber(f"{what} {shown(value)} is out of range ({low:g} to {high:g})")
        return float(number)
    if not math.isfinite(number):
        raise BadNumber(f"{what} {shown(value)} is not finite")
    if not low <= number <= high:
        raise BadNumber(f"{what} {shown(value)} is out of range ({low:g} to {high:g})")
    return number


def id_or_none(value: object, what: str) -> tuple[int | None, str | None]:
    """A pid, thread id or rank: (the number, None), or (None, why) when it is out of range."""
    try:
        return bounded_int(value, what, low=-1, high=ID_MAX), None
    except BadNumber as refused:
        return None, str(refused)
