"""Which NCCL library served a PyTorch job, from the process's own memory map.

`torch.cuda.nccl.version()` is the version PyTorch was compiled against, not the library that
runs (it says 2.28.9 while R-2CCL serves), and `LD_LIBRARY_PATH` loses to libtorch_cuda's RPATH,
so the only honest witness is `/proc/self/maps` after the first collective: every mapped
`libnccl*.so*` file. With R-2CCL preloaded the wheel's libnccl is mapped too, but the preloaded
one resolves the symbols: the served library is the first mapped one in `LD_PRELOAD` order, else
the only one mapped.

The choice, the map parsing and the version decoding are pure (tested without torch); `detect`
reads the map, the environment and the library's own `ncclGetVersion` (ctypes).
"""

from __future__ import annotations

import ctypes
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from r2bench.workloads.stubsrecord import read_record

EXPECT_VAR = "R2B_EXPECT_NCCL"
"""A path: the library the run must be served by (the plan sets it with the preload)."""
_NCCL_FILE = re.compile(r"libnccl[^/]*\.so(\.[0-9.]*)?$")
_PRELOAD_SPLIT = re.compile(r"[\s:]+")


@dataclass(frozen=True)
class ServedLibrary:
    """The NCCL library a job ran on."""

    path: str
    """The served file as mapped (a real path); empty when none was mapped."""
    mapped: tuple[str, ...]
    """Every libnccl file mapped, in map order."""
    version: str = ""
    """`2.23.4` from the file's own ncclGetVersion; empty when it could not be asked."""
    stubbed: tuple[str, ...] = ()
    """The functions the preloaded stub library stands in for (its stubs.json)."""

    @property
    def name(self) -> str:
        """A readable name: `NCCL 2.23.4 (/path/libnccl.so.2)`."""
        if not self.path:
            return "no libnccl mapped"
        return f"NCCL {self.version} ({self.path})" if self.version else f"NCCL ({self.path})"


def mapped_nccl_files(maps_text: str) -> tuple[str, ...]:
    """The libnccl*.so* files in a /proc/PID/maps text, each once, in order of first mapping."""
    seen: dict[str, None] = {}
    for line in maps_text.splitlines():
        parts = line.split(maxsplit=5)
        if len(parts) < 6:
            continue  # an anonymous mapping
        path = parts[5].removesuffix(" (deleted)")
        if path.startswith("/") and _NCCL_FILE.search(path):
            seen.setdefault(path, None)
    return tuple(seen)


def preload_entries(value: str) -> list[str]:
    """LD_PRELOAD's entries (the loader splits on spaces and colons)."""
    return [entry for entry in _PRELOAD_SPLIT.split(value) if entry]


def choose_served(mapped: tuple[str, ...], preload_real: list[str]) -> str:
    """The served file: the first preloaded one that is mapped, else the only one mapped, else
    the first mapped (an ambiguity a reader sees in `mapped`); empty when none is mapped.

    `preload_real` holds LD_PRELOAD's entries resolved to real paths, as the map names them.
    """
    for entry in preload_real:
        if entry in mapped:
            return entry
    return mapped[0] if mapped else ""


def version_text(code: int) -> str:
    """ncclGetVersion's integer as text: 22304 -> 2.23.4, 2708 -> 2.7.8 (NCCL < 2.9)."""
    if code >= 10000:
        return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"
    return f"{code // 1000}.{code % 1000 // 100}.{code % 100}"


def stubbed_functions(preload: list[str]) -> tuple[str, ...]:
    """The functions the stub libraries among LD_PRELOAD's entries stand in for: an entry is
    one when a stubs.json beside it names it as its library."""
    found: tuple[str, ...] = ()
    for entry in preload:
        record = read_record(Path(entry).parent)
        if record is not None and Path(record.library).name == Path(entry).name:
            found += record.functions
    return found


def expectation_error(served: str, expected: str, expected_real: str) -> str | None:
    """The message when the served file is not the expected one (both compared as real paths),
    or None."""
    if served and served == expected_real:
        return None
    return (
        f"the NCCL that served this job is {served or 'none (no libnccl mapped)'}, not "
        f"{EXPECT_VAR}={expected} ({expected_real}): the run would measure another library; "
        "check LD_PRELOAD and that the library was built on this node"
    )


def nccl_version(path: str) -> str:
    """The version the library at `path` reports through ncclGetVersion, or '' if it cannot."""
    try:
        library = ctypes.CDLL(path)
        code = ctypes.c_int(0)
        if library.ncclGetVersion(ctypes.byref(code)) != 0:
            return ""
    except (OSError, AttributeError):
        return ""
    return version_text(code.value)


def detect(env: Mapping[str, str], maps_path: Path = Path("/proc/self/maps")) -> ServedLibrary:
    """The served library of this process (call it after the first collective)."""
    mapped = mapped_nccl_files(maps_path.read_text())
    preload = preload_entries(env.get("LD_PRELOAD", ""))
    served = choose_served(mapped, [os.path.realpath(entry) for entry in preload])
    version = nccl_version(served) if served else ""
    stubbed = stubbed_functions(preload)
    return ServedLibrary(path=served, mapped=mapped, version=version, stubbed=stubbed)


def check_expected(served: ServedLibrary, env: Mapping[str, str]) -> str | None:
    """The message when `R2B_EXPECT_NCCL` is set and did not serve, or None."""
    expected = env.get(EXPECT_VAR, "")
    if not expected:
        return None
    return expectation_error(served.path, expected, os.path.realpath(expected))
