"""Text from run records, made safe for the markup r2bench writes: markdown and XML.

Anything that reaches a pull-request comment or a JUnit file may come from a results folder
someone else wrote (an xfail reason, an env value, a run id): it must stay text. Markdown gets
`markdown_text` (no raw HTML, no emphasis, links, table breaks or mentions); XML gets `xml_text`
(no character XML 1.0 cannot hold) and ElementTree's own escaping of `<`, `&` and quotes.
"""

from __future__ import annotations

import re

# Characters XML 1.0 cannot hold at all, even as references (control characters, surrogates,
# U+FFFE/U+FFFF): https://www.w3.org/TR/xml/#charsets
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
# C0/C1 controls and DEL: invisible in a comment, and some move the cursor in a terminal.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
_MD_SPECIAL = re.compile(r"([\\`*_\[\]{}()#+\-.!|~@$])")
_HTML = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}


def _visible(char: str) -> str:
    """A character that may not appear, written so a reader still sees what was there."""
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def xml_text(value: object) -> str:
    """`value` as text an XML 1.0 document can hold: every character XML forbids (control
    characters, lone surrogates, U+FFFE/U+FFFF) is written out as `\\xNN`; ElementTree
    escapes the rest (`<`, `&`, `>`, quotes), so `]]>` or `</testsuite>` stay text."""
    return _NOT_XML.sub(lambda m: _visible(m.group()), str(value))


def markdown_text(value: object) -> str:
    """`value` as one line of inline markdown text that renders as itself, inside a table
    cell too: HTML characters become entities (no raw HTML), markdown punctuation is
    backslash-escaped (no emphasis, links, code, table breaks or @-mentions), line breaks
    become spaces and other control characters `\\xNN`."""
    text = str(value).replace("\r\n", " ").replace("\n", " ").replace("\r", " ")
    text = _CONTROL.sub(lambda m: _visible(m.group()), text)
    text = _MD_SPECIAL.sub(r"\\\1", text)
    return "".join(_HTML.get(c, c) for c in text)
