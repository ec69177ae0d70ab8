"""Build the NCCL stub library on this machine: read two symbol tables, compile the stubs (effects).

`r2bench.setup.stubs` decides what to stub and renders the C source; this module runs `nm -D` on
the consumer (`--undefined-only`) and the provider (`--defined-only`), writes the source and
compiles it with `cc -shared -fPIC` into a given folder. Errors name the file and the fix (nm
comes with binutils, cc with build-essential).

Node-side entry (a training recipe's build step, plugin/train-torch.yaml)::

    python -m r2bench.setup.stubbuild --consumer-torch --provider LIBNCCL --out DIR

reads the consumer's symbols (`--consumer FILE`, or with `--consumer-torch` the
`lib/libtorch_cuda.so` of the `torch` package this Python finds, located without importing it:
`import torch` is what fails when the library under test lacks symbols), writes DIR/
libr2bench-nccl-stubs.so (compiled even with no function to stub, so that a run's LD_PRELOAD
always names a file) and DIR/stubs.json (`r2bench.workloads.stubsrecord`). Exit 0, or 2 with one
line naming the file and the fix.
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from r2bench.errors import EnvironmentFailure, ExitCode, InputError, R2benchError
from r2bench.safeio import atomic_write
from r2bench.setup.stubs import STUB_LIBRARY_NAME, STUB_SOURCE_NAME, StubLibrary, stub_library
from r2bench.workloads.stubsrecord import StubsRecord

NM_TIMEOUT_S = 60
CC_TIMEOUT_S = 120


class StubBuildError(EnvironmentFailure):
    """A symbol table could not be read or the stub library did not compile."""


@dataclass(frozen=True)
class BuiltStubs:
    """The stub library built for one consumer on one provider."""

    library: StubLibrary
    source_path: Path
    """The C source written (kept beside the library, as the record of what was stubbed)."""
    path: Path | None
    """The compiled library to preload after the provider; None when nothing is missing."""


def build_stubs(consumer: Path, provider: Path, out_dir: Path) -> BuiltStubs:
    """Read both symbol tables, write the stub source into `out_dir` and compile it there.

    When the provider defines every NCCL function the consumer needs, the source (with an empty
    list) is still written, nothing is compiled and `path` is None.
    """
    library = stub_library(
        consumer=str(consumer),
        consumer_nm=read_symbols(consumer, defined=False),
        provider=str(provider),
        provider_nm=read_symbols(provider, defined=True),
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    source_path = out_dir / STUB_SOURCE_NAME
    atomic_write(source_path, library.source, durable=False)
    path = compile_stubs(source_path, out_dir / STUB_LIBRARY_NAME) if library.names else None
    return BuiltStubs(library=library, source_path=source_path, path=path)


def read_symbols(path: Path, *, defined: bool) -> str:
    """`nm -D` output of `path`: its defined dynamic symbols, or its undefined ones."""
    if not path.is_file():
        raise InputError(f"{path}: no such file: give the shared library whose symbols to read")
    nm = _tool("nm", "binutils", f"read the symbol table of {path}")
    which = "--defined-only" if defined else "--undefined-only"
    result = _run([nm, "-D", which, str(path)], NM_TIMEOUT_S, f"nm -D {which} {path}")
    if result.returncode != 0:
        raise StubBuildError(
            f"{path}: nm -D {which} failed ({result.stderr.strip()}): is it a shared library "
            "(an ELF .so with a dynamic symbol table)?"
        )
    return result.stdout


def compile_stubs(source: Path, target: Path) -> Path:
    """Compile the stub source into the shared library `target` with `cc -shared -fPIC`."""
    cc = _tool("cc", "build-essential", f"compile {source}")
    result = _run(
        [cc, "-shared", "-fPIC", "-o", str(target), str(source)], CC_TIMEOUT_S, f"cc {source}"
    )
    if result.returncode != 0:
        raise StubBuildError(
            f"{source}: cc -shared -fPIC failed: {result.stderr.strip()} (a C compiler that builds "
            "shared libraries is needed: install build-essential)"
        )
    return target


def _tool(name: str, package: str, purpose: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise StubBuildError(f"{name} not found on PATH, needed to {purpose}: install {package}")
    return found


def _run(argv: list[str], timeout: int, what: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as exc:
        raise StubBuildError(f"{what} did not finish in {timeout} s") from exc


def torch_consumer() -> Path:
    """`lib/libtorch_cuda.so` of the `torch` package this Python would import (not imported)."""
    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        raise InputError(
            f"{sys.executable}: no torch package found: run this with the Python that has "
            "PyTorch (the testbed's paths.python), or give --consumer FILE"
        )
    library = Path(spec.origin).parent / "lib" / "libtorch_cuda.so"
    if not library.is_file():
        raise InputError(
            f"{library}: no such file: this PyTorch has no CUDA library (a CPU-only build?); "
            "install a CUDA build or give --consumer FILE"
        )
    return library


def build_for_job(consumer: Path, provider: Path, out_dir: Path) -> StubsRecord:
    """Build the stubs into `out_dir`, always as a library (empty when nothing is missing), and
    write its `stubs.json`."""
    built = build_stubs(consumer, provider, out_dir)
    library = built.path or compile_stubs(built.source_path, out_dir / STUB_LIBRARY_NAME)
    record = StubsRecord(built.library.names, str(consumer), str(provider), str(library))
    record.write(out_dir)
    return record


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m r2bench.setup.stubbuild`: build the stub library a job preloads."""
    parser = argparse.ArgumentParser(
        prog="python -m r2bench.setup.stubbuild",
        description="Build the NCCL stub library for a consumer on the library under test.",
    )
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--consumer", type=Path, help="the shared library whose needs to read")
    which.add_argument(
        "--consumer-torch", action="store_true", help="this Python's torch/lib/libtorch_cuda.so"
    )
    parser.add_argument("--provider", type=Path, required=True, help="the libnccl.so.2 under test")
    parser.add_argument("--out", type=Path, required=True, help="folder for the library")
    args = parser.parse_args(argv)
    try:
        consumer = torch_consumer() if args.consumer_torch else args.consumer
        record = build_for_job(consumer, args.provider, args.out.absolute())
    except R2benchError as exc:
        print(f"stubbuild: {exc}", file=sys.stderr)
        return int(ExitCode.USAGE)
    except OSError as exc:  # the folder cannot be written
        print(f"stubbuild: {exc.filename or args.out}: {exc.strerror}", file=sys.stderr)
        return int(ExitCode.USAGE)
    stubbed = ", ".join(record.functions) if record.functions else "none (an empty library)"
    print(f"stubbuild: {record.library}: {record.provider} lacks for {record.consumer}: {stubbed}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
