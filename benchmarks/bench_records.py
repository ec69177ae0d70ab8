"""Benchmark: parse + tables + report of a 1,000-run sweep with 30 sizes per run.

The sweep is built from the captured nccl-tests outputs in tests/data/nccl-tests (the sample
sweep of `tests/sample_sweep.py`: stock NCCL and three R2CC_MODEs x {none, nic_down} x 125
repeats, -I 1 per-iteration times, -S 1 timestamps, faults and R2CC events). Building it is not
timed. The timed part runs in a fresh process: rebuild the tables (parse every run folder once,
write Parquet + CSV) and write the HTML report. It prints wall time, peak memory (ru_maxrss)
and the targets: <= 10 s and <= 1 GB on 2 cores.

    python benchmarks/bench_records.py [--runs 1000] [--keep DIR] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from r2bench.records.tables import rebuild
from r2bench.report.html import build_report

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from sample_sweep import SampleConfig, write_sample_sweep

CAPTURED = Path(__file__).resolve().parent.parent / "tests" / "data" / "nccl-tests"
TARGET_S = 10.0
TARGET_BYTES = 1 << 30
_WHO = (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
MODES: tuple[str | None, ...] = (None, "0", "1", "2")
SCENARIOS = ("none", "nic_down")


def build(results: Path, runs: int) -> Path:
    """Write the sweep (skipped when it is already there)."""
    repeats = max(1, runs // (len(MODES) * len(SCENARIOS)))
    cfg = SampleConfig(modes=MODES, scenarios=SCENARIOS, repeats=repeats, sweep="bench")
    start = time.perf_counter()
    store = write_sample_sweep(results, CAPTURED, cfg)
    print(
        f"built {sum(1 for _ in store.complete_runs())} run folders in "
        f"{time.perf_counter() - start:.1f} s (not timed)"
    )
    return store.sweep_dir


def measure(sweep_dir: Path, profile: bool) -> int:
    """The timed part: tables + report; prints the figures and returns 0 if targets are met."""
    profiler = cProfile.Profile() if profile else None
    start = time.perf_counter()
    if profiler:
        profiler.enable()
    tables = rebuild(sweep_dir)
    t_tables = time.perf_counter() - start
    build_report(sweep_dir, tables, sweep_dir / "report.html")
    wall = time.perf_counter() - start
    if profiler:
        profiler.disable()
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)
    # the main process plus the largest parsing worker (ru_maxrss is in KiB on Linux)
    peak = sum(resource.getrusage(who).ru_maxrss for who in _WHO) * 1024
    size = (sweep_dir / "report.html").stat().st_size
    print(
        f"runs {len(tables.runs)}, result rows {len(tables.results)}, "
        f"iterations {len(tables.iterations)}, events {len(tables.events)}"
    )
    print(f"parse + tables: {t_tables:.2f} s; + report: {wall:.2f} s (report {size / 1e6:.1f} MB)")
    print(f"peak memory (main + largest worker): {peak / 2**20:.0f} MiB")
    ok = wall <= TARGET_S and peak <= TARGET_BYTES
    print(
        f"targets: <= {TARGET_S:.0f} s, <= 1 GB on 2 cores (this machine: {os.cpu_count()} "
        f"cores): {'met' if ok else 'NOT met'}"
    )
    return 0 if ok else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--keep", type=Path, help="build the sweep here and keep it")
    parser.add_argument("--profile", action="store_true", help="cProfile the timed part")
    parser.add_argument("--measure", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        return measure(args.measure, args.profile)
    with tempfile.TemporaryDirectory(prefix="r2b-bench-") as tmp:
        sweep_dir = build(args.keep or Path(tmp), args.runs)
        cmd = [sys.executable, __file__, "--measure", str(sweep_dir)]
        return subprocess.call(cmd + (["--profile"] if args.profile else []))


if __name__ == "__main__":
    sys.exit(main())
