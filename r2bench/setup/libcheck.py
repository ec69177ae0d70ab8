"""Which NCCL a benchmark is built against (pure): the version of an `nccl.h`.

nccl-tests prints `nccl-headers=N nccl-library=M` in its header; a run that loaded another NCCL
than it was built against is `wrong_library` (`parse.library.other_library_loaded`).
"""

from __future__ import annotations

import re

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
