"""Benchmark: tables + report of a 1,000-run sweep with 30 sizes per run.

The sweep is built from the captured nccl-tests outputs in tests/data/nccl-tests (the sample
sweep of `tests/support/sample_sweep.py`: stock NCCL and three R2CC_MODEs x {none, nic_down} x 125
repeats, -I 1 per-iteration times, -S 1 timestamps, faults and R2CC events). Building it is not
timed. Each timed part runs in a fresh process and rebuilds the tables (Parquet + CSV) and
writes the HTML report, twice:

- cold: the first build, which parses every run folder (and keeps each run's rows);
- warm: every later build of the same sweep (`report`, `compare`, `figures` after the sweep):
  the tables, current, are read back from their Parquet (tables/tablefiles.py) and left as
  they are; a sweep that changed since reads back the rows of each unchanged run instead of
  parsing it (tables/rowcache.py).

It prints wall time and peak memory (ru_maxrss, main process + largest worker) of each, and
the targets on 2 cores: warm <= 3 s, cold <= 10 s, both <= 1 GiB.

The failure evidence is measured on a second sweep of the same shape whose run folders also
hold each node's NIC counters (a line per NIC every 50 ms, the faulted NIC flat while it is
down, as `injectors/sampler.sh` writes them): every run parsed (not timed), then the evidence
and the per-iteration traffic of every faulted run computed again from its counter lines
(timed), against the target of <= 0.2 s for 1,000 runs.

    python benchmarks/bench_records.py [--runs 1000] [--keep DIR] [--profile]

With `--runs 10000` the targets are warm <= 30 s and 1 GiB. Exit code: 0 when every target is
met, 1 otherwise.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from r2bench.analysis.evidence import fault_evidence, iteration_traffic
from r2bench.analysis.parsedrun import counter_series, iteration_windows, parse_run
from r2bench.report.html import build_report
from r2bench.runfolder.runformat import TABLES_DIR
from r2bench.runfolder.runmodel import load_run
from r2bench.tables.build import rebuild

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.support.sample_sweep import SampleConfig, write_sample_sweep

CAPTURED = Path(__file__).resolve().parent.parent / "tests" / "data" / "nccl-tests"
# The targets on 2 cores for 1,000 runs (the times scale with --runs / 1,000).
WARM_TARGET_S = 3.0
COLD_TARGET_S = 10.0
EVIDENCE_TARGET_S = 0.2
TARGET_BYTES = 1 << 30  # peak memory of each build
_WHO = (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
MODES: tuple[str | None, ...] = (None, "0", "1", "2")
SCENARIOS = ("none", "nic_down")


def build(results: Path, runs: int, counters: bool = False) -> Path:
    """Write the sweep (skipped when it is already there); with NIC counters in every run."""
    repeats = max(1, runs // (len(MODES) * len(SCENARIOS)))
    name = "bench-counters" if counters else "bench"
    cfg = SampleConfig(
        modes=MODES, scenarios=SCENARIOS, repeats=repeats, sweep=name, counters=counters
    )
    start = time.perf_counter()
    store = write_sample_sweep(results, CAPTURED, cfg)
    print(
        f"built {sum(1 for _ in store.complete_runs())} run folders in "
        f"{time.perf_counter() - start:.1f} s (not timed)"
    )
    return store.sweep_dir


def measure(sweep_dir: Path, profile: bool, label: str, target_s: float) -> int:
    """One timed part: tables + report; prints the figures and returns 0 if targets are met."""
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
        f"{label}: runs {len(tables.runs)}, result rows {len(tables.results)}, "
        f"iterations {tables.n_iterations}, events {len(tables.events)}"
    )
    print(
        f"{label}: tables {t_tables:.2f} s; + report: {wall:.2f} s (report {size / 1e6:.1f} MB);"
        f" peak memory {peak / 2**20:.0f} MiB"
    )
    ok = wall <= target_s and peak <= TARGET_BYTES
    print(
        f"{label}: target <= {target_s:.0f} s and <= {TARGET_BYTES / 2**30:.0f} GiB on 2 cores "
        f"(this machine: {os.cpu_count()} cores): {'met' if ok else 'NOT met'}"
    )
    return 0 if ok else 1


def measure_evidence(sweep_dir: Path, target_s: float) -> int:
    """The failure evidence's share of a cold build: every run parsed (not timed), then its
    counters read and its evidence and traffic computed again (timed)."""
    runs = [parse_run(load_run(p.parent)) for p in sorted(sweep_dir.glob("*/COMPLETE"))]
    faulted = [r for r in runs if any(w.nic for w in r.windows)]
    start = time.perf_counter()
    lines = traffic = 0
    for run in faulted:
        series = counter_series(run)  # from the lines the counters table reads too
        iterations = iteration_windows(run) if series else []
        end = run.record.end.ended_at if run.record.end else None
        lines += len(fault_evidence(run.windows, series, iterations, end))
        traffic += len(iteration_traffic(series, iterations, run.windows))
    wall = time.perf_counter() - start
    ok = wall <= target_s
    print(
        f"evidence: {wall:.3f} s for {len(runs)} runs ({len(faulted)} with a NIC fault: "
        f"{lines} evidence lines, {traffic} traffic rows); target <= {target_s:.2f} s: "
        f"{'met' if ok else 'NOT met'}"
    )
    return 0 if ok else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--keep", type=Path, help="build the sweep here and keep it")
    parser.add_argument("--profile", action="store_true", help="cProfile the timed part")
    parser.add_argument("--measure", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--label", default="", help=argparse.SUPPRESS)
    parser.add_argument("--target", type=float, default=0.0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        return measure(args.measure, args.profile, args.label, args.target)
    scale = max(1.0, args.runs / 1000)
    with tempfile.TemporaryDirectory(prefix="r2b-bench-") as tmp:
        sweep_dir = build(args.keep or Path(tmp), args.runs)
        shutil.rmtree(sweep_dir / TABLES_DIR, ignore_errors=True)  # cold: nothing kept
        status = 0
        for label, target in (("cold", COLD_TARGET_S * scale), ("warm", WARM_TARGET_S * scale)):
            cmd = [sys.executable, __file__, "--measure", str(sweep_dir), "--label", label]
            cmd += ["--target", str(target), *(["--profile"] if args.profile else [])]
            status |= subprocess.call(cmd)
        with_counters = build(args.keep or Path(tmp), args.runs, counters=True)
        status |= measure_evidence(with_counters, EVIDENCE_TARGET_S * scale)
        return status


if __name__ == "__main__":
    sys.exit(main())
