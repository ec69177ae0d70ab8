"""`stubs.json`: what a built stub library stands in for, written beside it (standard library only).

`python -m r2bench.setup.stubbuild --out DIR` writes it; the PyTorch training workload reads it
from the folder of each library named in `LD_PRELOAD` to say, in its `#train-start` line, which
NCCL functions were stubbed. It lives with the workloads, which may not import `setup`. The nodes' Python may have nothing beyond the standard
library, so neither side needs more.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from r2bench.safeio import atomic_write

STUBS_RECORD_NAME = "stubs.json"


@dataclass(frozen=True)
class StubsRecord:
    """The stub library of one consumer on one provider."""

    functions: tuple[str, ...]
    """The NCCL functions stubbed (empty: the provider has all the consumer needs)."""
    consumer: str
    """The file whose undefined symbols were read (e.g. .../torch/lib/libtorch_cuda.so)."""
    provider: str
    """The library under test whose defined symbols were read."""
    library: str
    """The stub library built (compiled even with no functions, so a preload always finds it)."""

    def write(self, folder: Path) -> Path:
        """Write `stubs.json` into `folder`; returns its path."""
        path = folder / STUBS_RECORD_NAME
        doc = {**asdict(self), "functions": list(self.functions)}
        atomic_write(path, json.dumps(doc, indent=2) + "\n")
        return path


def read_record(folder: Path) -> StubsRecord | None:
    """The record in `folder`, or None when there is none or it is not one (a stub library
    without its record says nothing about what it stubs)."""
    try:
        doc = json.loads((folder / STUBS_RECORD_NAME).read_text())
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(doc, dict):
        return None
    functions = doc.get("functions")
    texts = [doc.get(key) for key in ("consumer", "provider", "library")]
    if not isinstance(functions, list) or not all(isinstance(f, str) for f in functions):
        return None
    if not all(isinstance(text, str) for text in texts):
        return None
    consumer, provider, library = (str(text) for text in texts)
    return StubsRecord(tuple(functions), consumer, provider, library)
