"""How the report writes numbers: one helper per kind, so every table and sentence agrees.

Bandwidths (GB/s) and ratios have 3 significant figures, seconds too (0.468 s, 1.23 s, 12.3 s);
a unit is written once, in a column's header or after the number in a sentence, never both.
Plotly's hover templates take `HOVER_GBPS` (the same 3 significant figures, in d3's format).
"""

from __future__ import annotations

import math
import re
from typing import Any

SIGNIFICANT = 3
HOVER_GBPS = ":.3g"
"""d3 format of a GB/s value in a plotly hover template (`%{y:.3g}`)."""
_GBPS_IN_TEXT = re.compile(r"(?<![\w.])(\d+\.\d+|\d+)(\s*GB/s)")


def _number(value: Any) -> float | None:
    """A finite float, or None for None, NaN, pandas' NA and text that is no number."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def significant(value: Any, digits: int = SIGNIFICANT) -> str:
    """`value` to `digits` significant figures without an exponent where it reads better
    (0.0958 not 9.58e-02, 1230 not 1.23e+03); '' when it is no number."""
    number = _number(value)
    if number is None:
        return ""
    if number == 0:
        return "0"
    magnitude = math.floor(math.log10(abs(number)))
    if -5 <= magnitude < 6:
        decimals = max(digits - 1 - magnitude, 0)
        return f"{round(number, decimals):.{decimals}f}"
    return f"{number:.{digits - 1}e}"


def gbps(value: Any) -> str:
    """A bandwidth in GB/s, without its unit (the column header or sentence says it)."""
    return significant(value)


def ratio(value: Any) -> str:
    """A ratio such as busbw after / before the fault (0.783)."""
    return significant(value)


def seconds(value: Any) -> str:
    """A duration with its unit: `0.468 s`; '' when it is no number."""
    text = significant(value)
    return f"{text} s" if text else ""


def gbps_in_text(text: str) -> str:
    """Record text with every `<number> GB/s` written as `gbps` writes it (a run's reason says
    `avg busbw 0.0958256 GB/s`; the report's columns say 0.0958)."""
    return _GBPS_IN_TEXT.sub(lambda m: f"{gbps(m[1])}{m[2]}", text)
