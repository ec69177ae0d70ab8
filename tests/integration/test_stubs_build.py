"""The NCCL stub library built from real symbol tables: two small shared libraries made with cc,
the stubs built from `nm -D` of each, then loaded: the consumer loads only with the stubs, a called
stub returns ncclInvalidUsage and says so once on stderr.

This module holds those with real processes; the same subject's other tests:
tests/unit/test_stubs.py (its pure tests).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from r2bench.errors import InputError
from r2bench.setup.stubbuild import StubBuildError, build_stubs, read_symbols
from r2bench.setup.stubs import STUB_LIBRARY_NAME, STUB_MARK, called_stubs

pytestmark = pytest.mark.skipif(
    shutil.which("cc") is None or shutil.which("nm") is None,
    reason="needs cc and nm (apt-get install build-essential binutils)",
)

# A libnccl-like provider: two functions, versioned as NCCL's own version script does.
PROVIDER_C = """
int ncclAllReduce(void) { return 0; }
int ncclCommInitRank(void) { return 0; }
int providerInternal(void) { return 7; }
"""
PROVIDER_MAP = "NCCL_2 { global: nccl*; local: *; };\n"

# A PyTorch-like consumer: calls one function the provider has and two it lacks, and libc.
CONSUMER_C = """
#include <string.h>
int ncclAllReduce(void);
int ncclCommShrink(void);
int ncclAlltoAll(void);
int consumer_allreduce(void) { return ncclAllReduce(); }
int consumer_shrink(void) { return ncclCommShrink(); }
int consumer_alltoall(void) { return ncclAlltoAll(); }
int consumer_len(const char *s) { return (int)strlen(s); }
"""

# Loads provider and stubs globally (as LD_PRELOAD would), then the consumer, and calls it.
LOADER = """
import ctypes, sys
provider, stubs, consumer = sys.argv[1:4]
ctypes.CDLL(provider, mode=ctypes.RTLD_GLOBAL)
if stubs != "-":
    ctypes.CDLL(stubs, mode=ctypes.RTLD_GLOBAL)
lib = ctypes.CDLL(consumer)
print(lib.consumer_allreduce(), lib.consumer_shrink(), lib.consumer_shrink(), lib.consumer_alltoall())
"""


def _cc(out: Path, source: str, *flags: str) -> Path:
    src = out.with_suffix(".c")
    src.write_text(source)
    subprocess.run(["cc", "-shared", "-fPIC", *flags, "-o", str(out), str(src)], check=True)
    return out


@pytest.fixture
def libraries(tmp_path: Path) -> tuple[Path, Path]:
    """(consumer, provider); the provider's folder has spaces, quotes and a %s, as paths may."""
    provider_dir = tmp_path / 'nccl "2.23.4" %s'
    provider_dir.mkdir()
    version_map = provider_dir / "nccl.map"
    version_map.write_text(PROVIDER_MAP)
    provider = _cc(provider_dir / "libnccl.so.2", PROVIDER_C, f"-Wl,--version-script={version_map}")
    consumer = _cc(tmp_path / "libconsumer.so", CONSUMER_C)
    return consumer, provider


def _load(provider: Path, stubs: Path | None, consumer: Path) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-c", LOADER, str(provider), str(stubs or "-"), str(consumer)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)


def test_the_provider_symbols_really_are_versioned(libraries: tuple[Path, Path]) -> None:
    _, provider = libraries
    assert "ncclAllReduce@@NCCL_2" in read_symbols(provider, defined=True)


def test_stubs_are_built_for_exactly_what_the_provider_lacks(
    libraries: tuple[Path, Path], tmp_path: Path
) -> None:
    consumer, provider = libraries
    built = build_stubs(consumer, provider, tmp_path / "stubs")
    assert built.library.names == ("ncclAlltoAll", "ncclCommShrink")
    assert built.path == tmp_path / "stubs" / STUB_LIBRARY_NAME
    assert built.source_path.read_text() == built.library.source
    assert "T ncclCommShrink" in read_symbols(built.path, defined=True)


def test_the_consumer_loads_only_with_the_stubs(
    libraries: tuple[Path, Path], tmp_path: Path
) -> None:
    consumer, provider = libraries
    without = _load(provider, None, consumer)
    assert without.returncode != 0
    assert (
        "undefined symbol: ncclCommShrink" in without.stderr
        or "undefined symbol: ncclAlltoAll" in without.stderr
    )

    built = build_stubs(consumer, provider, tmp_path / "stubs")
    loaded = _load(provider, built.path, consumer)
    assert loaded.returncode == 0, loaded.stderr
    # The provider's function answers; each stub returns ncclInvalidUsage (5).
    assert loaded.stdout.split() == ["0", "5", "5", "5"]
    # Each called stub says so once (ncclCommShrink was called twice), naming the provider.
    marked = [line for line in loaded.stderr.splitlines() if line.startswith(STUB_MARK)]
    assert marked == [
        f"{STUB_MARK} ncclCommShrink called: the NCCL under test ({provider}) lacks it",
        f"{STUB_MARK} ncclAlltoAll called: the NCCL under test ({provider}) lacks it",
    ]
    assert called_stubs(loaded.stderr) == ["ncclCommShrink", "ncclAlltoAll"]


def test_nothing_is_compiled_when_nothing_is_missing(tmp_path: Path) -> None:
    provider = _cc(tmp_path / "libnccl.so.2", PROVIDER_C)
    consumer = _cc(
        tmp_path / "libuser.so",
        "int ncclAllReduce(void);\nint f(void) { return ncclAllReduce(); }\n",
    )
    built = build_stubs(consumer, provider, tmp_path / "stubs")
    assert built.library.names == ()
    assert built.path is None
    assert not (tmp_path / "stubs" / STUB_LIBRARY_NAME).exists()
    assert built.source_path.is_file()


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"libgone\.so: no such file"):
        read_symbols(tmp_path / "libgone.so", defined=False)


def test_a_file_that_is_not_a_library_is_named(tmp_path: Path) -> None:
    text = tmp_path / "notes.txt"
    text.write_text("not ELF\n")
    with pytest.raises(
        StubBuildError, match=r"notes.txt: nm -D --defined-only failed .*shared library"
    ):
        read_symbols(text, defined=True)


def test_missing_tools_name_their_package(
    libraries: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    consumer, provider = libraries
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(StubBuildError, match=r"nm not found on PATH.*install binutils"):
        build_stubs(consumer, provider, tmp_path / "stubs")
    # nm found, cc not: a folder on PATH with nm alone.
    only_nm = tmp_path / "only-nm"
    only_nm.mkdir()
    nm = shutil.which("nm", path="/usr/bin:/bin:/usr/local/bin")
    assert nm is not None
    (only_nm / "nm").symlink_to(nm)
    monkeypatch.setenv("PATH", str(only_nm))
    with pytest.raises(
        StubBuildError, match=r"cc not found on PATH.*libr2bench-nccl-stubs.c.*build-essential"
    ):
        build_stubs(consumer, provider, tmp_path / "stubs")
