"""Benchmark: `r2bench compare A A` on the 1,000-run sweep of `bench_records` (the CI gate on a
big sweep), against its target on 2 cores: <= 5 s and <= 500 MB peak memory.

The sweep (stock NCCL and three R2CC_MODEs x {none, nic_down} x 125 repeats, 30 sizes, 20
timed iterations a row: 1.18 million iterations) is built as `bench_records` builds it, or
taken from `--sweep` (e.g. `bench_records.py --keep DIR` left it in DIR/bench), and its
tables are written once, not timed, as the sweep's own report does. Then:

- the command, as the `r2bench` console script runs it, in a fresh process: wall time, CPU
  time (what a busy machine changes least) and peak memory (ru_maxrss), the figure against
  the target;
- the same sweep's tables read back alone in a fresh process, the reference measured in the
  same run: the command's time as a multiple of it says what compare adds to reading;
- where the time and memory go, stage by stage, in one more process (imports, each side's
  tables, each side's cells, the verdicts, the printing).

With `--against DIR`, a second sweep of the same shape (seed 2: other noise, so every cell
is bootstrapped) is compared too, for information (no target).

    python benchmarks/bench_compare.py [--sweep DIR] [--runs 1000] [--against]

Exit code: 0 when the target is met, 1 otherwise.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TARGET_S = 5.0
TARGET_BYTES = 500 * 10**6
ROOT = Path(__file__).resolve().parents[1]
ENTRY = 'import sys; sys.argv[0] = "r2bench"; from r2bench.entry import main; main()'
READ_TABLES = (
    "import sys; from pathlib import Path; from r2bench.tables.build import build_tables; "
    "t = build_tables(Path(sys.argv[1])); t.iterations"
)


def _rss_mb() -> float:
    """This process's resident memory now, MB."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def stages(baseline: Path, candidate: Path) -> None:
    """Where the time and memory of one compare go (run in its own process)."""
    mark = time.perf_counter()

    def step(label: str) -> None:
        nonlocal mark
        now = time.perf_counter()
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e6
        print(f"  {label:28} {now - mark:6.2f} s   rss {_rss_mb():5.0f} MB  peak {peak:5.0f} MB")
        mark = time.perf_counter()

    from rich.console import Console

    from r2bench.compare.policy import load_policy
    from r2bench.compare.samples import cells, load_sweep, series_columns
    from r2bench.compare.terminal import print_details, print_verdict
    from r2bench.compare.verdict import compare_sweeps

    step("imports")
    base = load_sweep(baseline)
    step("baseline tables")
    cand = load_sweep(candidate)
    step("candidate tables")
    names = series_columns(base.tables, cand.tables)
    cells(base.tables, names)
    step("baseline cells (alone)")
    result = compare_sweeps(base, cand, load_policy(None))
    step("compare_sweeps (both)")
    with open(os.devnull, "w") as sink:
        out = Console(file=sink, width=100)
        print_verdict(result, out)
        print_details(result, out)
    step("printing")


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _timed(code: str, args: list[str]) -> tuple[float, float, float, int]:
    """Wall seconds, CPU seconds, peak bytes (ru_maxrss of the child) and exit code of
    `python -c code`."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="100")
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    cpu = _children_cpu_s()
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", code, *args], cwd=ROOT, env=env, capture_output=True, text=True
    )
    wall, cpu = time.perf_counter() - start, _children_cpu_s() - cpu
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    if peak <= before:
        print("  (peak memory of this child not above an earlier one: shown as the earlier's)")
    return wall, cpu, peak * 1024, proc.returncode


def _sweep(root: Path, runs: int, seed: int, name: str) -> Path:
    from benchmarks.bench_records import CAPTURED, MODES, SCENARIOS
    from tests.support.sample_sweep import SampleConfig, write_sample_sweep

    if (root / name / "COMPLETE").exists() or any((root / name).glob("*/COMPLETE")):
        return root / name
    repeats = max(1, runs // (len(MODES) * len(SCENARIOS)))
    cfg = SampleConfig(modes=MODES, scenarios=SCENARIOS, repeats=repeats, sweep=name, seed=seed)
    return write_sample_sweep(root, CAPTURED, cfg).sweep_dir


def _write_tables(sweep: Path) -> None:
    from r2bench.tables.build import rebuild

    start = time.perf_counter()
    rebuild(sweep)
    print(f"tables of {sweep} written in {time.perf_counter() - start:.1f} s (not timed)")


def run(baseline: Path, candidate: Path, label: str, checked: bool) -> int:
    """The command and the reference, each in a fresh process; the stages in a third."""
    read_s, read_cpu, read_peak, _ = _timed(READ_TABLES, [str(candidate)])
    wall, cpu, peak, code = _timed(ENTRY, ["compare", str(baseline), str(candidate)])
    ok = wall <= TARGET_S and peak <= TARGET_BYTES
    target = f"target <= {TARGET_S:.0f} s and <= {TARGET_BYTES / 1e6:.0f} MB"
    print(
        f"{label}: {wall:.2f} s (cpu {cpu:.2f} s), peak {peak / 1e6:.0f} MB (exit {code}); "
        f"reading the tables alone (reference, same run): {read_s:.2f} s (cpu {read_cpu:.2f} s), "
        f"{read_peak / 1e6:.0f} MB: compare is {wall / read_s:.1f}x the read; "
        + (f"{target}: {'met' if ok else 'NOT met'}" if checked else "no target")
    )
    stage = f"import sys; sys.path.insert(0, {str(ROOT)!r}); from benchmarks.bench_compare import stages; "
    subprocess.run(
        [sys.executable, "-c", stage + "stages(*map(__import__('pathlib').Path, sys.argv[1:]))",
         str(baseline), str(candidate)],
        cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), check=False,
    )  # fmt: skip
    return 0 if ok or not checked else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweep", type=Path, help="a 1,000-run sweep (bench_records --keep)")
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--against", action="store_true", help="also compare A B (no target)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="r2b-compare-") as tmp:
        sweep = args.sweep or _sweep(Path(tmp), args.runs, 1, "bench")
        _write_tables(sweep)
        print(f"load average: {os.getloadavg()[0]:.2f} ({os.cpu_count()} cores)")
        status = run(sweep, sweep, "compare A A", checked=True)
        if args.against:
            other = _sweep(Path(tmp) if not args.sweep else sweep.parent, args.runs, 2, "bench-b")
            _write_tables(other)
            run(sweep, other, "compare A B", checked=False)
        return status


if __name__ == "__main__":
    sys.exit(main())
