"""The geni-lib found on PyPI, made to run this profile on Python 3 (used by profile.py only
when `import geni.portal` fails; CloudLab's portal never needs it).

geni-lib 0.9.9.4 (the newest on PyPI) installs on Python 3, and `geni.rspec` works there, but
`geni/portal.py` still has four Python 2 `print` statements, so `import geni.portal` is a
SyntaxError, and `Request.writeXML` writes bytes to `sys.stdout`. CloudLab's portal runs profiles with its own, Python 3 geni-lib. To test the profile
with the real library anyway, `load_portal` reads the installed `geni/portal.py`, turns those
`print x` statements into `print(x)` in memory, and registers the result as `geni.portal`;
`main` lets `sys.stdout` take those bytes; nothing else is changed, and nothing is copied
into this repository. When `import geni.portal`
works as it is, it is used as it is.

Also a runner: python cloudlab/geni_compat.py cloudlab/profile.py [--nodeCount N ...]
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import runpy
import sys
import types
from typing import Any, TextIO

PY2_PRINT = re.compile(r"^(\s*)print (.+)$", re.MULTILINE)


def load_portal() -> types.ModuleType:
    """`geni.portal`, imported as it is, or with its Python 2 prints made calls."""
    try:
        return importlib.import_module("geni.portal")
    except SyntaxError:
        pass
    import geni

    spec = importlib.util.find_spec("geni.portal")
    assert spec is not None and spec.origin is not None
    with open(spec.origin, encoding="utf-8") as handle:
        source = PY2_PRINT.sub(r"\1print(\2)", handle.read())
    module = types.ModuleType("geni.portal")
    module.__file__ = spec.origin
    module.__package__ = "geni"
    sys.modules["geni.portal"] = module
    exec(compile(source, spec.origin, "exec"), module.__dict__)
    geni.portal = module  # type: ignore[attr-defined]
    return module


class BytesTolerantStdout:
    """sys.stdout that also takes bytes (UTF-8), as Python 2's did."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str | bytes) -> int:
        if isinstance(text, bytes):
            text = text.decode("utf-8")
        return self._stream.write(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def main() -> None:
    """Run the profile given as the first argument, the rest being its parameters."""
    profile = sys.argv[1]
    sys.argv = sys.argv[1:]
    load_portal()
    sys.stdout = BytesTolerantStdout(sys.stdout)  # type: ignore[assignment]
    runpy.run_path(profile, run_name="__main__")


if __name__ == "__main__":
    main()
