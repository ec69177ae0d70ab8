"""Text from users and from other machines, made safe to show on a terminal (pure).

An env value, a result row, a reference key or a path may hold escape sequences (that clear
the screen, retitle the window, or hide text), carriage returns that overwrite a line, or
bidirectional overrides that reorder it. Everything such text passes through :func:`printable`
before it reaches a terminal, so it is shown as written, escaped, and never acted on.
:func:`markup_safe` also escapes rich's `[...]` markup for text printed with markup on.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from collections.abc import MutableMapping

from rich.markup import escape

from r2bench.errors import EnvironmentFailure

# C0 and C1 controls, DEL, and the Unicode characters that move or reorder text: line and
# paragraph separators, bidirectional marks, embeddings, overrides and isolates.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\x1b": "\\e"}


def _escaped(match: re.Match[str]) -> str:
    char = match.group()
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def printable(text: object) -> str:
    """`text` as one line of plain characters: every control or reordering character is shown
    as an escape (`\\n`, `\\e`, `\\x07`, `\\u202e`). Backslashes are kept as they are."""
    return _UNSAFE.sub(_escaped, str(text))


def markup_safe(text: object) -> str:
    """:func:`printable`, with rich markup (`[bold]`, `[/x]`) escaped too: for text that is
    printed by a rich console with markup on."""
    return escape(printable(text))


def _terminal_size(value: str) -> bool:
    """A COLUMNS or LINES value rich can use: 1 to 99999 in ASCII digits (`²` passes
    isdigit() and fails int(); 5,001 digits fail int() too)."""
    text = value.strip()
    return text.isascii() and text.isdigit() and len(text) <= 5 and int(text) > 0


class OutputClosed(EnvironmentFailure, OSError):
    """Standard output is closed: whatever a command prints would be lost."""


def prepare_streams(environ: MutableMapping[str, str]) -> None:
    """Make the process's terminal safe to print to, whatever it was started with: a COLUMNS
    or LINES that is not a positive number is dropped (rich would print zero columns, i.e.
    nothing), characters the locale cannot encode are written as escapes (`LANG=C`,
    `PYTHONIOENCODING=ascii`), and a closed standard output raises OutputClosed rather than
    letting the command succeed having shown nothing."""
    for name in ("COLUMNS", "LINES"):
        value = environ.get(name)
        if value is not None and not _terminal_size(value):
            del environ[name]
    try:
        if sys.stdout is None:
            raise OSError("no stdout")
        os.fstat(sys.stdout.fileno())
    except (OSError, ValueError) as exc:
        raise OutputClosed(
            "standard output is closed: nothing could be shown (redirect it to a file or"
            " /dev/null instead)"
        ) from exc
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            with contextlib.suppress(OSError, ValueError):
                reconfigure(errors="backslashreplace")
