"""Which NCCL a benchmark was built against and which one it loaded (pure).

nccl-tests prints `nccl-headers=N nccl-library=M` in its header. If LD_LIBRARY_PATH does not put
the component's library first, a stock libnccl is silently loaded: setup records the version of
the library it built against (read from its `nccl.h`), and `check_nccl_library` turns a mismatch
into an error.
"""

from __future__ import annotations

import re

from r2bench.parse.models import ParsedNcclTests

_DEFINE = re.compile(r"^\s*#\s*define\s+NCCL_(MAJOR|MINOR|PATCH|VERSION_CODE)\s+(\d+)", re.M)


def version_code(major: int, minor: int, patch: int) -> int:
    """NCCL_VERSION_CODE for a version (the formula changed at 2.9)."""
    if (major, minor) <= (2, 8):
        return major * 1000 + minor * 100 + patch
    return major * 10000 + minor * 100 + patch


def header_version(text: str) -> int | None:
    """NCCL_VERSION_CODE of an `nccl.h` (None when the text is not an NCCL header)."""
    defines = {name: int(value) for name, value in _DEFINE.findall(text)}
    if "VERSION_CODE" in defines:
        return defines["VERSION_CODE"]
    if {"MAJOR", "MINOR", "PATCH"} <= defines.keys():
        return version_code(defines["MAJOR"], defines["MINOR"], defines["PATCH"])
    return None


def version_text(code: int) -> str:
    """22304 -> '2.23.4' (codes since 2.9; older ones -> 'code N')."""
    if code < 20900:
        return f"code {code}"
    return f"{code // 10000}.{code // 100 % 100}.{code % 100}"


def check_nccl_library(parsed: ParsedNcclTests, expected: int | None) -> str | None:
    """An error message when the run loaded another NCCL than `expected`, else None.

    Nothing to compare (no expectation recorded, or an output without the version header, such
    as a run that died at start) returns None: other checks report those runs.
    """
    loaded = parsed.nccl_library
    if expected is None or loaded is None or loaded == expected:
        return None
    return (
        f"nccl-tests loaded NCCL {version_text(loaded)} (nccl-library={loaded}) but the build "
        f"expects {version_text(expected)} ({expected}): LD_LIBRARY_PATH does not put the "
        "component's lib_dir first, so the results are not from the library under test"
    )
