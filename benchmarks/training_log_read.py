"""Benchmark: reading a 100,000-update training log into the tables.

A training run's stdout holds one `#train` line per optimizer update (`workloads.train_format`);
a long job logs 100,000 of them. Two run folders of that length are written (not timed): a
baseline and a run of another library, identical but for one loss bit, each a copy of a real
run folder of results/examples (tests/support/training_runs.py) under mpirun's `[1,0]<stdout>:`
prefix. Then, each timed in this process:

- the log alone: `parse.training.parse_training` of one stdout;
- the read into tables: one run folder parsed and its rows made (`tables.rows.folder_rows`:
  the parse, the outcome, the update windows, the `training` rows);
- the tables of both runs (`tables.build.build_tables`: both read, the frames, and the checks
  comparing the two logs bit for bit).

It prints each wall time and the peak of memory allocated during the log's read (tracemalloc,
a separate pass: tracing slows the read) and the process's peak RSS. Target: the read into
tables well under 2 s (<= 1.5 s). Exit code 0 when it is met, 1 otherwise.

    python benchmarks/training_log_read.py [--updates 100000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from r2bench.parse.training import parse_training
from r2bench.tables.build import build_tables
from r2bench.tables.rows import folder_rows
from tests.support.training_runs import TrainingText, training_folder

READ_TARGET_S = 1.5


def write_sweep(root: Path, updates: int) -> tuple[Path, Path]:
    """A sweep folder with the baseline and the other run; returns it and the other run."""
    sweep = root / "train-bench"
    sweep.mkdir(parents=True)
    options = {"model": "tiny", "updates": updates, "seed": 42, "baseline": "nccl"}
    training_folder(sweep, "a-nccl", TrainingText(updates=updates), library="nccl", options=options)
    text = TrainingText(updates=updates, loss_bits={updates - 5: 1})
    return sweep, training_folder(sweep, "b-r2ccl", text, options=options)


def timed(label: str, fn):  # type: ignore[no-untyped-def]
    """Run `fn` once, print and return (its result, seconds)."""
    start = time.perf_counter()
    result = fn()
    seconds = time.perf_counter() - start
    print(f"{label:<44} {seconds:7.3f} s")
    return result, seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--updates", type=int, default=100_000)
    parser.add_argument("--keep", type=Path, help="write the sweep here (default: a temp dir)")
    args = parser.parse_args(argv)
    root = args.keep or Path(tempfile.mkdtemp(prefix="r2b-train-bench-"))
    start = time.perf_counter()
    sweep, run_dir = write_sweep(root, args.updates)
    stdout = (run_dir / "stdout.txt").read_bytes()
    print(
        f"wrote 2 runs of {args.updates:,} updates ({len(stdout) / 1e6:.1f} MB of stdout each) "
        f"in {time.perf_counter() - start:.1f} s (not timed)"
    )
    log, _ = timed("the log alone (parse_training)", lambda: parse_training(stdout))
    assert log is not None and len(log.updates) == args.updates
    rows, read_s = timed(
        "one run read into tables (folder_rows)", lambda: folder_rows(sweep, run_dir, None, False)
    )
    assert len(rows.training.data["update"]) == args.updates
    tables, _ = timed("tables of both runs, checked (build_tables)", lambda: build_tables(sweep))
    checks = tables.training_checks.set_index("run_id")
    print(f"check: {checks.loc['b-r2ccl', 'sentence']}")
    tracemalloc.start()
    parse_training(stdout)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(
        f"peak allocated while reading the log: {peak / 1e6:.1f} MB; process peak RSS {rss / 1e6:.0f} MB"
    )
    met = read_s <= READ_TARGET_S
    print(
        f"read into tables {read_s:.3f} s: target <= {READ_TARGET_S:g} s {'met' if met else 'MISSED'}"
    )
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
