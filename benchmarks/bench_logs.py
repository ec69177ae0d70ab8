"""Benchmark: parse an R-2CCL-style NCCL_DEBUG=INFO log of 100 MB and of 1 GB.

R-2CCL at INFO writes tens of MB a second, so logs of gigabytes are normal: `r2bench parse`
must stream them. The log is generated (not timed): the nccl-tests header, then blocks of
NCCL/R2CC INFO lines and `NET/Socket : unable to allocate requests` WARN lines (millions of
them at 1 GB) with a result row every block, then the footer. Each size is parsed in a fresh
process (`parse_file`, as `r2bench parse` does); the benchmark prints wall time and peak RSS
and checks the targets: at most 60 s and 500 MB for 1 GB on 2 cores, and time linear in size
(1 GB within 12x the time of 100 MB).

    python benchmarks/bench_logs.py [--sizes 100,1000] [--keep DIR] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from r2bench.commands.records import parse_file

MB = 1_000_000
TARGET_S_PER_GB = 60.0
TARGET_RSS = 500 * 2**20
LINEAR_SLACK = 1.2  # 10x the bytes may take at most 12x the time

HEADER = """\
# nccl-tests version 2.19.6 nccl-headers=22803 nccl-library=22803
# Collective test starting: all_reduce_perf
# nThread 1 nGpus 1 minBytes 1048576 maxBytes 67108864 step: 8(factor) warmup iters: 1 iters: 20 agg iters: 1 validation: 1 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid   2234 on         vm device  0 [0000:00:06] NVIDIA H200
#  Rank  1 Group  0 Pid   2235 on         vm device  1 [0000:00:07] NVIDIA H200
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)
"""
FOOTER = """\
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 2.63936
#
# Collective test concluded: all_reduce_perf
#
"""
_INFO = (
    "[2026-11-25 13:{m:02d}:{s:02d}.{f:06d}] vm:2234:2260 [0] NCCL INFO Channel 0{c}/0 : "
    "0[0] -> 1[1] [send] via NET/Socket/0\n"
    "[2026-11-25 13:{m:02d}:{s:02d}.{f:06d}] vm:2235:2261 [1] NCCL INFO R2CC: Sent STEP_SYNC "
    "channel={c} step={f} to rank 0\n"
)
_WARN = (
    "[2026-11-25 13:{m:02d}:{s:02d}.{f:06d}] vm:2234:2262 [0] misc/socket.cc:46 NCCL WARN "
    "NET/Socket : unable to allocate requests\n"
)
_ROW = (
    "     8388608       2097152     float     sum      -1   2962.8    2.83    2.83       0"
    "   2909.4    2.88    2.88       0\n"
)


def _block(n: int) -> str:
    """About 64 KB of log: INFO and WARN lines, one result row."""
    m, s = n // 60 % 60, n % 60
    lines = [_INFO.format(m=m, s=s, f=i, c=i % 4) + _WARN.format(m=m, s=s, f=i) for i in range(150)]
    return "".join(lines) + _ROW


def generate(path: Path, size: int) -> int:
    """Write a log of about `size` bytes; returns the number of result rows in it."""
    rows = 0
    with path.open("w") as out:
        out.write(HEADER)
        written = len(HEADER)
        while written < size:
            block = _block(rows)
            out.write(block)
            written += len(block)
            rows += 1
        out.write(FOOTER)
    return rows


def measure(path: Path, profile: bool) -> None:
    """The timed part (run in a fresh process): parse the log as `r2bench parse` does."""
    profiler = cProfile.Profile() if profile else None
    start = time.perf_counter()
    if profiler:
        profiler.enable()
    runs = parse_file(path)
    wall = time.perf_counter() - start
    if profiler:
        profiler.disable()
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(20)
    parsed, events, _ = runs[0]
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(
        f"RESULT {wall:.3f} {peak} rows={len({r.line for r in parsed.rows})} events={len(events)}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000", help="log sizes in MB, comma separated")
    parser.add_argument("--keep", type=Path, help="write the logs here and keep them")
    parser.add_argument("--profile", action="store_true", help="cProfile the parse")
    parser.add_argument("--measure", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        measure(args.measure, args.profile)
        return 0
    sizes = [int(x) for x in args.sizes.split(",")]
    with tempfile.TemporaryDirectory(prefix="r2b-logs-") as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        times: dict[int, float] = {}
        ok = True
        for mb in sizes:
            path = folder / f"r2ccl-info-{mb}MB.log"
            start = time.perf_counter()
            rows = generate(path, mb * MB)
            built = time.perf_counter() - start
            cmd = [sys.executable, __file__, "--measure", str(path)]
            out = subprocess.run(
                cmd + (["--profile"] if args.profile else []),
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            result = next(ln for ln in out.splitlines() if ln.startswith("RESULT"))
            _, wall_s, peak_s, *facts = result.split()
            wall, peak = float(wall_s), int(peak_s)
            times[mb] = wall
            size = path.stat().st_size
            target_s = TARGET_S_PER_GB * size / 1e9
            met = wall <= max(target_s, 1.0) and peak <= TARGET_RSS
            ok = ok and met
            print(
                f"{size / MB:7.0f} MB ({rows} result rows; generated in {built:.1f} s, not "
                f"timed): parsed in {wall:.1f} s ({size / MB / wall:.0f} MB/s), peak RSS "
                f"{peak / 2**20:.0f} MiB; {' '.join(facts)}; target <= {target_s:.0f} s and "
                f"<= {TARGET_RSS / 2**20:.0f} MiB: {'met' if met else 'NOT met'}"
            )
            if args.profile:
                print(out)
            if not args.keep:
                path.unlink()
        if len(times) >= 2:
            small, large = min(times), max(times)
            ratio = times[large] / times[small]
            linear = ratio <= LINEAR_SLACK * large / small
            ok = ok and linear
            print(
                f"time x{ratio:.1f} for {large / small:.0f}x the bytes: "
                f"{'linear' if linear else 'NOT linear'}"
            )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
