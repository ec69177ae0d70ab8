"""Writing testbed files: YAML with a comment header, replaced atomically.

Everything r2bench writes into a testbed file goes through here: the settings through the YAML
dumper (which quotes every value as YAML needs), the header through :func:`comment_header`
(which keeps every value on its comment line). A value pasted raw into a comment could end the
line and start a setting (a manifest named `x\nlauncher: {command: sh}`)."""

from __future__ import annotations

import sys
from pathlib import Path

from r2bench.config.testbed import Testbed
from r2bench.safeio import atomic_write
from r2bench.testbeds.virtual.describe import to_yaml
from r2bench.textsafe import printable


def comment_header(template: str, **values: object) -> str:
    """YAML comment lines: each line of `template` after `# `, with `values` filled in. Every
    value is made one line of plain characters first (line breaks of any kind, YAML's `\x85`
    and `\u2028` included, and other controls shown as escapes), so no value can end its
    comment and become a setting."""
    filled = template.format(**{key: printable(value) for key, value in values.items()})
    return "".join(f"# {line}".rstrip() + "\n" for line in filled.split("\n"))


def testbed_text(testbed: Testbed, header: str = "") -> str:
    """The YAML text of `testbed` (defaults left out) after `header` (comment lines)."""
    return header + to_yaml(testbed)


TESTBED_FILE_MODE = 0o600
"""Testbed files are readable by their owner only, as they have always been written."""


def write_text_atomic(path: Path, text: str) -> None:
    """Write `text` to `path` atomically (`safeio.atomic_write`), owner-only."""
    atomic_write(path, text, mode=TESTBED_FILE_MODE)


def write_testbed(testbed: Testbed, out: Path | None, header: str = "") -> None:
    """Write the testbed to `out`, or to stdout when `out` is None."""
    text = testbed_text(testbed, header)
    if out is None:
        sys.stdout.write(text)
    else:
        write_text_atomic(out, text)
