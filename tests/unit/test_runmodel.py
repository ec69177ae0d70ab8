"""A run folder's side files are never read whole past their cap: refused fast, and named."""

from __future__ import annotations

import time
import tracemalloc
from pathlib import Path

import pytest

from r2bench.runfolder import runformat, runmodel
from r2bench.runfolder import store as st
from tests.support.sweeps import copy_sweep

# ---- run-folder side files are never read whole past their cap -------------------------------


def _sparse(path: Path, size: int) -> None:
    """A file of `size` zero bytes that takes no disk (and no time) to make."""
    with path.open("wb") as handle:
        handle.truncate(size)


@pytest.mark.parametrize("name", [runformat.FAULTS, runformat.EVENTS])
@pytest.mark.parametrize("content", ["zeros", "lines"])
def test_a_1gib_jsonl_side_file_is_refused_fast_and_named(
    small_sweep: Path, tmp_path: Path, name: str, content: str
) -> None:
    sweep = copy_sweep(small_sweep, tmp_path / "s")
    run = next(iter(st.RunStore.at(sweep).run_dirs()))
    if content == "zeros":
        _sparse(run / name, 1 << 30)
    else:  # valid-looking lines past the cap (a real file written by a runaway loop)
        fault = runmodel.FaultEvent(action="inject", fault=0, kind="nic_down", node="n0")
        line = (fault.model_dump_json() if name == runformat.FAULTS else "{}").encode() + b"\n"
        with (run / name).open("wb") as handle:
            handle.write(line * ((runmodel.JSONL_LIMIT // len(line)) + 10))
    tracemalloc.start()
    start = time.monotonic()
    try:
        record = runmodel.load_run(run)
        events = record.events()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert time.monotonic() - start < 2
    assert peak < 100 * 1024 * 1024
    assert events == [] and any(name in p and "larger than" in p for p in record.problems)
