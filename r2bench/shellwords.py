"""What r2bench writes into a shell script or command line (pure).

Free text (a library ref, a file name, an env value, a path) is written either as one quoted
word (:func:`quote`) or inside a comment (:func:`comment`): never raw. A quoted word may hold any
character, a newline included, and stays one word; a comment is kept to one line with every
control character escaped, so nothing after it can start a command. Durations go through
:func:`seconds`, which never writes a value that `timeout` or `sleep` would read as zero.
"""

from __future__ import annotations

import math
import shlex

from r2bench.textsafe import printable


def quote(text: object) -> str:
    """`text` as one shell word, whatever it holds."""
    return shlex.quote(str(text))


def comment(text: object) -> str:
    """`text` made safe inside a `#` comment line: one line, control characters escaped."""
    return printable(text)


def seconds(value: float) -> str:
    """A duration as a plain decimal of at most 3 decimals for `timeout`, `sleep` and the
    injectors: rounded up to the next millisecond (a positive duration never becomes `0.000`,
    which `timeout` reads as "no limit"), never `1e-05`, `inf` or `nan`."""
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"a duration must be a finite, non-negative number of seconds: {value}")
    millis = max(math.ceil(round(value * 1000, 6)), 1)
    whole, part = divmod(millis, 1000)
    return f"{whole}.{part:03d}".rstrip("0").rstrip(".")
