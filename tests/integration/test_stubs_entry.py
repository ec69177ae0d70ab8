"""The node-side stub build entry (`python -m r2bench.setup.stubbuild`, a training recipe's build
step) with two small shared libraries made here: it writes the stub library, always, and its
stubs.json; `--consumer-torch` finds torch/lib/libtorch_cuda.so without importing torch.

The library-level tests are in tests/integration/test_stubs_build.py; the record's pure tests in
tests/unit/test_train_torch.py.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from r2bench.setup.stubbuild import read_symbols
from r2bench.setup.stubs import STUB_LIBRARY_NAME
from tests.support import paths

pytestmark = pytest.mark.skipif(
    shutil.which("cc") is None or shutil.which("nm") is None,
    reason="needs cc and nm (apt-get install build-essential binutils)",
)

PROVIDER_C = "int ncclAllReduce(void) { return 0; }\nint ncclGetVersion(int *v) { return 0; }\n"
CONSUMER_C = """
int ncclAllReduce(void);
int ncclCommShrink(void);
int ncclCommWindowRegister(void);
int a(void) { return ncclAllReduce() + ncclCommShrink() + ncclCommWindowRegister(); }
"""


def _cc(out: Path, source: str) -> Path:
    src = out.with_suffix(".c")
    src.write_text(source)
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(out), str(src)], check=True)
    return out


def _entry(*args: str, pythonpath: str = "") -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in (pythonpath, str(paths.REPO)) if p),
    }
    argv = [sys.executable, "-m", "r2bench.setup.stubbuild", *args]
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120, check=False)


def test_the_entry_writes_the_stubs_and_their_record(tmp_path: Path) -> None:
    provider = _cc(tmp_path / "libnccl.so.2", PROVIDER_C)
    consumer = _cc(tmp_path / "libconsumer.so", CONSUMER_C)
    out = tmp_path / "stubs"
    done = _entry("--consumer", str(consumer), "--provider", str(provider), "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert "ncclCommShrink, ncclCommWindowRegister" in done.stdout
    record = json.loads((out / "stubs.json").read_text())
    assert record == {
        "functions": ["ncclCommShrink", "ncclCommWindowRegister"],
        "consumer": str(consumer),
        "provider": str(provider),
        "library": str(out / STUB_LIBRARY_NAME),
    }
    assert "T ncclCommShrink" in read_symbols(out / STUB_LIBRARY_NAME, defined=True)


def test_consumer_torch_reads_libtorch_cuda_without_importing_torch(tmp_path: Path) -> None:
    provider = _cc(
        tmp_path / "libnccl.so.2", PROVIDER_C + "int ncclCommShrink(void) { return 0; }\n"
    )
    # A torch package whose import fails: the entry must find its library without importing it.
    package = tmp_path / "site" / "torch"
    (package / "lib").mkdir(parents=True)
    (package / "__init__.py").write_text("raise ImportError('undefined symbol: ncclCommShrink')\n")
    consumer = _cc(package / "lib" / "libtorch_cuda.so", CONSUMER_C)
    out = tmp_path / "stubs"
    done = _entry(
        "--consumer-torch", "--provider", str(provider), "--out", str(out),
        pythonpath=str(tmp_path / "site"),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    record = json.loads((out / "stubs.json").read_text())
    assert record["consumer"] == str(consumer)
    assert record["functions"] == ["ncclCommWindowRegister"]


def test_nothing_missing_still_writes_an_empty_library_to_preload(tmp_path: Path) -> None:
    provider = _cc(tmp_path / "libnccl.so.2", PROVIDER_C)
    consumer = _cc(
        tmp_path / "libuser.so",
        "int ncclAllReduce(void);\nint f(void) { return ncclAllReduce(); }\n",
    )
    out = tmp_path / "stubs"
    done = _entry("--consumer", str(consumer), "--provider", str(provider), "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert "none (an empty library)" in done.stdout
    assert json.loads((out / "stubs.json").read_text())["functions"] == []
    assert (out / STUB_LIBRARY_NAME).is_file()
    # It loads (as LD_PRELOAD would) and defines no NCCL function.
    loaded = subprocess.run(
        [sys.executable, "-c", f"import ctypes; ctypes.CDLL({str(out / STUB_LIBRARY_NAME)!r})"],
        check=False,
    )
    assert loaded.returncode == 0
    assert "nccl" not in read_symbols(out / STUB_LIBRARY_NAME, defined=True)


def test_a_missing_provider_or_torch_is_one_line_and_exit_2(tmp_path: Path) -> None:
    consumer = _cc(tmp_path / "libc.so", CONSUMER_C)
    done = _entry(
        "--consumer",
        str(consumer),
        "--provider",
        str(tmp_path / "gone.so"),
        "--out",
        str(tmp_path / "o"),
    )
    assert done.returncode == 2
    assert done.stderr.startswith("stubbuild: ") and "gone.so: no such file" in done.stderr
    done = subprocess.run(
        [sys.executable, "-S", "-m", "r2bench.setup.stubbuild", "--consumer-torch",
         "--provider", str(consumer), "--out", str(tmp_path / "o")],
        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(paths.REPO)},
        timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2 and "no torch package found" in done.stderr
