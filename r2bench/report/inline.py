"""Prose for the page: text that names code in backticks, written as HTML.

Captions and notes are written once for every reader of the tables (a terminal, markdown, the
page); in the page a pair of backticks becomes `<code>`, never a literal backtick. Everything
else is escaped first, so a backtick in data stays harmless.
"""

from __future__ import annotations

import html
import re

_CODE = re.compile(r"`([^`\n]+)`")


def prose_html(text: str) -> str:
    """`text` escaped for HTML, each `name` in backticks shown as code."""
    escaped = html.escape(text, quote=True)
    return _CODE.sub(r"<code>\1</code>", escaped)


def plain(text: str) -> str:
    """`text` with the backticks around code names dropped (for plotly labels and titles,
    which have no code style)."""
    return _CODE.sub(r"\1", text)
