"""What the page inlines: prose that names code in backticks, as HTML, and figure specs as JSON.

Captions and notes are written once for every reader of the tables (a terminal, markdown, the
page); in the page a pair of backticks becomes `<code>`, never a literal backtick. Everything
else is escaped first, so a backtick in data stays harmless.
"""

from __future__ import annotations

import html
import re
from typing import Any

_CODE = re.compile(r"`([^`\n]+)`")


def prose_html(text: str) -> str:
    """`text` escaped for HTML, each `name` in backticks shown as code."""
    escaped = html.escape(text, quote=True)
    return _CODE.sub(r"<code>\1</code>", escaped)


def plain(text: str) -> str:
    """`text` with the backticks around code names dropped (for plotly labels and titles,
    which have no code style)."""
    return _CODE.sub(r"\1", text)


def figure_json(spec: dict[str, Any]) -> str:
    """A figure spec as JSON safe inside <script> (plotly's encoder escapes <, > and /).
    Always the standard library's encoder: plotly picks orjson where it is installed, which
    writes non-ASCII unescaped, so the same report would differ from machine to machine."""
    from plotly.io.json import to_json_plotly  # the report extra, loaded with the page

    text: str = to_json_plotly(spec, engine="json")  # plotly is untyped
    return text
