"""Text from users and from other machines, made safe to show on a terminal (pure).

An env value, a result row, a reference key or a path may hold escape sequences (that clear
the screen, retitle the window, or hide text), carriage returns that overwrite a line, or
bidirectional overrides that reorder it. Everything such text passes through :func:`printable`
before it reaches a terminal, so it is shown as written, escaped, and never acted on.
:func:`markup_safe` also escapes rich's `[...]` markup for text printed with markup on.
"""

from __future__ import annotations

import re

from rich.markup import escape

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
