"""Benchmark: parse NCCL_DEBUG=INFO logs and hostile inputs of several shapes, as
`r2bench parse` does.

R-2CCL at INFO writes tens of MB a second, so logs of gigabytes are normal: `r2bench parse`
must stream them, at a cost that does not depend on the mix of their lines, and other people's
files may hold anything. The logs are generated (not timed) in these shapes:

- sparse: the nccl-tests header, then 150 NCCL/R2CC INFO lines and 150 `NET/Socket : unable
  to allocate requests` WARN lines per result row (about 64 KB a row; millions of WARN events
  at 1 GB), then the footer;
- dense: 50 library lines per row (about 4.6 KB a row), as R-2CCL writes between rows of a
  socket run: proxy progress lines, R2CC lines (STEP_SYNC, backup connects, the mode's own
  INFO lines) and now and then an R2CC WARN from its `r2cc/` sources;
- connect: 50 of NCCL's connection lines per result row (`NCCL INFO Channel 03/0 : 1[1] ->
  0[0] [send] via NET/Socket/1`): repeated lines are counted, never kept one object each;
- runs: whole runs one after another (a `cat` of many outputs): 1,000 and 6,000 runs (1.3
  and 7.8 MB);
- line and zeros, given on standard input (`r2bench parse -`): one line as long as the log
  between the header and the rows (cut at the reader's line limit; the rows after it are
  read), and nothing but NUL bytes.

Each log is parsed in a fresh process by `r2bench parse` (`parse_command`: one streaming pass
for results and events, then the table of every result row and the facts, written to a file, as
a user waits for them); the benchmark prints wall time, CPU time and peak RSS per size, and whether time grows linearly
and memory stays flat with size. Targets on 2 cores: sparse 1 GB in 60 s; dense and connect
200 MB in 20 s; all at most 500 MiB; 6,000 runs in 8 s; line and zeros 2 GB each within
300 MiB (60 s a GB); 10x the bytes in at most 12x the time, and at most 1.5x the peak memory
or at most 2 KiB more per result row the larger log holds (the rows `parse` returns are all
that may grow: a dense 1 GB log holds 215,000 of them).

    python benchmarks/bench_logs.py [--shapes sparse,dense,connect,runs,line,zeros]
                                    [--sizes 200,1000] [--keep DIR] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path

from r2bench.commands.parse import parse_command

MB = 1_000_000
TARGET_RSS = 500 * 2**20
STDIN_RSS = 300 * 2**20
TARGETS = {
    "sparse": (60.0, TARGET_RSS),
    "dense": (100.0, TARGET_RSS),
    "connect": (100.0, TARGET_RSS),
    "runs": (1000.0, TARGET_RSS),
    "line": (60.0, STDIN_RSS),
    "zeros": (60.0, STDIN_RSS),
}
"""(seconds per GB, peak RSS) on 2 cores: the sparse shape 1 GB in 60 s; the dense and the
connection-line ones 200 MB in 20 s; 6,000 runs (7.8 MB) in 8 s and linear; one 2 GB line
and 2 GB of zeros on stdin in 300 MiB (and 60 s a GB)."""
DEFAULT_SIZES = {
    "sparse": "100,1000",
    "dense": "200,1000",
    "connect": "200,1000",
    "runs": "1.3,7.8",
    "line": "200,2000",
    "zeros": "200,2000",
}
LINEAR_SLACK = 1.2  # 10x the bytes may take at most 12x the time
FLAT_SLACK = 1.5  # 5x or 10x the bytes may take at most 1.5x the peak memory...
ROW_BYTES = 2048  # ...or no more than the result rows it returns (two placements, ~1.6 KB)
RUN_BYTES = 16384  # ...or, for the runs shape, the runs it returns (rows, devices, outcome)

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


# The dense shape: R-2CCL at NCCL_DEBUG=INFO between two result rows of a socket run, as its
# real logs have it (tests/data/r2ccl/runs/r2ccl-m0-socket-all_reduce.txt): proxy progress
# lines, R2CC lines (STEP_SYNC, backup connects, the mode's own INFO) and now and then an R2CC
# WARN from r2cc/ sources; 50 library lines per result row, no time stamps (NCCL's default).
_DENSE = (
    "vm:13228:13247 [1] NCCL INFO RECV: Testing request 0x7fc5300{r:05x} for channel={c}, step={s}",
    "vm:13228:13247 [1] NCCL INFO RECV: Test result done=0 for request 0x7fc5300{r:05x}, "
    "channel={c}, step={s}",
    "vm:13227:13246 [0] NCCL INFO SEND: Calling isend for channel={c}, buffSlot={b}, useBackup=0",
    "vm:13227:13246 [0] NCCL INFO SEND: isend allocated request 0x7fc5300{r:05x} for channel={c}, "
    "buffSlot={b}",
    "vm:13228:13247 [1] NCCL INFO [TIMESTAMP] Channel {c} Step {s} COMPLETE: time=334.98{r:05d}",
    "vm:13228:13247 [1] NCCL INFO [TIMESTAMP] Channel {c} Request [2/2] DONE: time=334.98{r:05d}",
    "vm:13227:13227 [0] NCCL INFO finishPlan[1]: selected channel={c}, minId=0, nHeads=2",
    "vm:13228:13239 [1] NCCL INFO R2CC_MODE=1 (RECV-CONNECT): Channel {c} will use backup for "
    "device 0",
    "vm:13227:13246 [0] NCCL INFO R2CC: Sent STEP_SYNC channel={c} step={s} to rank 1",
    "vm:13228:13247 [1] NCCL INFO R2CC: Received STEP_SYNC channel={c} step={s} from 192.0.2.2:42558",
)
_DENSE_WARN = (
    "vm:13227:13246 [0] r2cc/oob/oob_udp.cc:211 NCCL WARN R2CC: OOB recv timed out for channel "
    "{c} step {s}, retrying"
)
DENSE_INFO_LINES = 50


def _dense_block(n: int) -> str:
    """50 R-2CCL INFO lines (one an r2cc/ WARN every tenth block), then one result row."""
    lines = []
    for i in range(DENSE_INFO_LINES):
        fmt = _DENSE_WARN if i == 0 and n % 10 == 0 else _DENSE[(i * 7 + n) % len(_DENSE)]
        lines.append(fmt.format(r=(n * 64 + i) % 0xFFFFF, c=i % 4, s=n % 1000, b=i % 8))
    return "\n".join(lines) + "\n" + _ROW


def _block(n: int) -> str:
    """About 64 KB of log: INFO and WARN lines, one result row."""
    m, s = n // 60 % 60, n % 60
    lines = [_INFO.format(m=m, s=s, f=i, c=i % 4) + _WARN.format(m=m, s=s, f=i) for i in range(150)]
    return "".join(lines) + _ROW


# The connection shape: NCCL's connection lines, 50 per result row (a 2-million-line log at
# 200 MB), as NCCL_DEBUG=INFO prints them when each size sets up channels again.
_CONNECT = (
    "vm:{p}:{t} [{r}] NCCL INFO Channel {c:02d}/0 : {r}[{r}] -> {o}[{o}] [{d}] via NET/Socket/{r}"
)


def _connect_block(n: int) -> str:
    """50 NCCL connection lines, then one result row."""
    lines = []
    for i in range(DENSE_INFO_LINES):
        rank = i % 2
        lines.append(
            _CONNECT.format(
                p=2234 + rank,
                t=2260 + n % 7,
                r=rank,
                o=1 - rank,
                c=i % 32,
                d="send" if i % 4 < 2 else "receive",
            )
        )
    return "\n".join(lines) + "\n" + _ROW


def _run_block(n: int) -> str:
    """One whole run (header, three rows, footer): a log of thousands of runs one after
    another (`-N` loops of a script, a `cat` of many outputs)."""
    return HEADER + _ROW * 3 + FOOTER


SHAPES = {
    "sparse": _block,
    "dense": _dense_block,
    "connect": _connect_block,
    "runs": _run_block,
}
STDIN_SHAPES = ("line", "zeros")
"""Shapes given on standard input (`r2bench parse -`): one line as long as the log, between
the header and the rows (the rows after it must still be read), and nothing but NUL bytes."""
_MiB = 1 << 20


def generate(path: Path, size: int, shape: str = "sparse") -> int:
    """Write a log of about `size` bytes of one shape; returns the number of result rows (of
    runs, for the runs shape)."""
    if shape in STDIN_SHAPES:
        return _generate_stream(path, size, shape)
    block_of = SHAPES[shape]
    rows = 0
    with path.open("w") as out:
        if shape != "runs":
            out.write(HEADER)
        written = len(HEADER)
        while written < size:
            block = block_of(rows)
            out.write(block)
            written += len(block)
            rows += 1
        if shape != "runs":
            out.write(FOOTER)
    return rows


def _generate_stream(path: Path, size: int, shape: str) -> int:
    """The line and zeros shapes, written a MiB at a time."""
    fill = b"x" * _MiB if shape == "line" else bytes(_MiB)
    with path.open("wb") as out:
        if shape == "line":
            out.write(HEADER.encode())
        for _ in range(max(1, size // _MiB)):
            out.write(fill)
        if shape == "line":
            out.write(b"\n" + _ROW.encode() * 3 + FOOTER.encode())
    return 3 if shape == "line" else 0


def measure(path: Path, profile: bool, stdin: bool = False) -> None:
    """The timed part (run in a fresh process): `r2bench parse PATH` (with `stdin`, the log
    on standard input: `r2bench parse -`), its table and facts written to a file."""
    profiler = cProfile.Profile() if profile else None
    with tempfile.TemporaryFile("w+", encoding="utf-8") as printed, path.open("rb") as given:
        shown, sys.stdout = sys.stdout, printed
        if stdin:
            sys.stdin = io.TextIOWrapper(given)
        start = time.perf_counter()
        if profiler:
            profiler.enable()
        status = parse_command([Path("-") if stdin else path], as_json=False)
        wall = time.perf_counter() - start
        if profiler:
            profiler.disable()
        sys.stdout = shown
        printed.seek(0)
        rows, runs, events, outcome = _printed_facts(printed)
    if profiler:
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    peak, cpu = usage.ru_maxrss * 1024, usage.ru_utime + usage.ru_stime
    print(
        f"RESULT {wall:.3f} {peak} cpu={cpu:.1f}s exit={status} runs={runs} table_rows={rows} "
        f"events={events} outcome={outcome}"
    )


def _printed_facts(printed: Iterable[str]) -> tuple[int, int, str, str]:
    """(table rows, runs, events, first outcome) from what `r2bench parse` printed."""
    rows, runs, events, outcome = 0, 0, "?", "?"
    for line in printed:
        if line.startswith("│"):
            rows += 1
        elif line.startswith("┏"):
            runs += 1
        elif line.startswith("events: "):
            events = line.split()[1]
        elif line.startswith("outcome: ") and outcome == "?":
            outcome = line.split()[1].rstrip(":")
    return rows, runs, events, outcome


def _run_shape(shape: str, sizes: list[float], folder: Path, keep: bool, profile: bool) -> bool:
    """Generate and parse each size of one shape; print the figures; whether targets are met."""
    target_per_gb, target_rss = TARGETS[shape]
    times: dict[float, float] = {}
    peaks: dict[float, int] = {}
    kept: dict[float, int] = {}
    cpus: dict[float, float] = {}
    ok = True
    for mb in sizes:
        path = folder / f"r2ccl-info-{shape}-{mb}MB.log"
        start = time.perf_counter()
        rows = generate(path, int(mb * MB), shape)
        built = time.perf_counter() - start
        cmd = [sys.executable, __file__, "--measure", str(path)]
        cmd += ["--stdin"] if shape in STDIN_SHAPES else []
        out = subprocess.run(
            cmd + (["--profile"] if profile else []), capture_output=True, text=True, check=True
        ).stdout
        result = next(ln for ln in out.splitlines() if ln.startswith("RESULT"))
        _, wall_s, peak_s, *facts = result.split()
        wall, peak = float(wall_s), int(peak_s)
        times[mb], peaks[mb], kept[mb] = wall, peak, rows
        cpus[mb] = float(next(f for f in facts if f.startswith("cpu="))[4:-1])
        size = path.stat().st_size
        target_s = target_per_gb * size / 1e9
        met = wall <= max(target_s, 1.0) and peak <= target_rss
        ok = ok and met
        print(
            f"{shape:6} {size / MB:6.1f} MB ({rows} {'runs' if shape == 'runs' else 'result rows'};"
            f" generated in {built:.1f} s, not "
            f"timed): parsed in {wall:.1f} s ({size / MB / wall:.0f} MB/s), peak RSS "
            f"{peak / 2**20:.0f} MiB; {' '.join(facts)}; target <= {target_s:.0f} s and "
            f"<= {target_rss / 2**20:.0f} MiB: {'met' if met else 'NOT met'}",
            flush=True,
        )
        if profile:
            print(out)
        if not keep:
            path.unlink()
    if len(times) >= 2:
        small, large = min(times), max(times)
        ratio = times[large] / times[small]
        cpu_ratio = cpus[large] / max(cpus[small], 1e-3)
        # on stdin the input is first spooled to disk: past the page cache the wall time is
        # the disk's, so the parser's own cost is judged by its CPU time there
        judged = cpu_ratio if shape in STDIN_SHAPES else ratio
        linear = judged <= LINEAR_SLACK * large / small
        growth = peaks[large] / peaks[small]
        extra_rows = kept[large] - kept[small]
        per_row = (peaks[large] - peaks[small]) / extra_rows if extra_rows > 0 else 0.0
        allowed = RUN_BYTES if shape == "runs" else ROW_BYTES
        flat = growth <= FLAT_SLACK or per_row <= allowed
        ok = ok and linear and flat
        print(
            f"{shape:6} time x{ratio:.1f} (CPU x{cpu_ratio:.1f}"
            f"{', judged' if shape in STDIN_SHAPES else ''}) for {large / small:.0f}x the bytes: "
            f"{'linear' if linear else 'NOT linear'}; peak RSS x{growth:.2f}, "
            f"{per_row:.0f} B per {'run' if shape == 'runs' else 'result row'} kept beyond the"
            f" smaller log's (<= {allowed} B): "
            f"{'flat' if flat else 'NOT flat'} (only the rows it returns grow)",
            flush=True,
        )
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--shapes",
        default="sparse,dense",
        help="log shapes to run: sparse, dense (comma separated)",
    )
    parser.add_argument("--sizes", help="log sizes in MB for every shape (default: per shape)")
    parser.add_argument("--keep", type=Path, help="write the logs here and keep them")
    parser.add_argument("--profile", action="store_true", help="cProfile the parse")
    parser.add_argument("--measure", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--stdin", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        measure(args.measure, args.profile, args.stdin)
        return 0
    ok = True
    with tempfile.TemporaryDirectory(prefix="r2b-logs-") as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        for shape in args.shapes.split(","):
            sizes = [float(x) for x in (args.sizes or DEFAULT_SIZES[shape]).split(",")]
            ok = _run_shape(shape, sizes, folder, bool(args.keep), args.profile) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
