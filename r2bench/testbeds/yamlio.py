"""Writing testbed files: YAML with a comment header, replaced atomically."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from r2bench.config.testbed import Testbed
from r2bench.virtual.describe import to_yaml


def testbed_text(testbed: Testbed, header: str = "") -> str:
    """The YAML text of `testbed` (defaults left out) after `header` (comment lines)."""
    return header + to_yaml(testbed)


def write_text_atomic(path: Path, text: str) -> None:
    """Write `text` to `path` through a temporary file in the same folder and a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_testbed(testbed: Testbed, out: Path | None, header: str = "") -> None:
    """Write the testbed to `out`, or to stdout when `out` is None."""
    text = testbed_text(testbed, header)
    if out is None:
        sys.stdout.write(text)
    else:
        write_text_atomic(out, text)
