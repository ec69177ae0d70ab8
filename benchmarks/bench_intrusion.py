"""Measurement intrusion: busbw of the same nccl-tests job run through r2bench vs by hand.

r2bench renders the job's launch line (plan -> launcher) and runs it through its node layer,
which stamps every output line as it arrives and streams it to disk: the code path a sweep uses.
"By hand" runs the very same line with bash, output to a file. The two alternate (A B A B ...)
so drift hits both alike; per size, the median busbw of each side and their ratio are printed.
r2bench should stay within 1% at every size >= 1 MiB.

    python3 benchmarks/bench_intrusion.py EXPERIMENT.yaml -t TESTBED.yaml [--repeats 3]
        [--run 0] [--out DIR] [--recipes DIR]

Runs on the launch node itself (local node layer); needs the builds made by `r2bench setup`.
Exit code: 0 when every size >= 1 MiB is within the tolerance, 1 otherwise, 2 when a job failed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from r2bench.nodes.base import StreamLine
from r2bench.nodes.local import LocalNode
from r2bench.parse.nccltests.text import parse_text
from r2bench.plan.build import load_inputs, make_plan
from r2bench.plan.model import PlannedRun

MIB = 1 << 20
# The target: through r2bench, busbw within 1 % of the same line run by hand at every size from
# 1 MiB (smaller sizes are printed, not judged).
TOLERANCE = 0.01
JUDGED_FROM_BYTES = MIB


def through_r2bench(run: PlannedRun, output: Path, timeout: float) -> int | None:
    """The launch line through the node layer, every line stamped and written as it arrives."""
    node = LocalNode(run.launch.node, sudo=False)
    with output.open("w", encoding="utf-8") as sink:

        def on_line(line: StreamLine) -> None:
            sink.write(line.text + "\n")

        result = node.stream(run.launch.command, on_line, timeout=timeout, check=False)
    return result.exit_code


def by_hand(run: PlannedRun, output: Path, timeout: float) -> int | None:
    """The same line in a plain shell, output straight to a file."""
    with output.open("w", encoding="utf-8") as sink:
        try:
            proc = subprocess.run(
                ["bash", "-c", run.launch.command],
                stdout=sink,
                stderr=subprocess.STDOUT,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return None
    return proc.returncode


def busbw(path: Path) -> dict[int, float]:
    """Out-of-place busbw (GB/s) per size of one output."""
    parsed = parse_text(path.read_text(encoding="utf-8", errors="replace"))
    return {
        row.size_bytes: row.busbw_gbps
        for row in parsed.rows
        if row.placement == "out_of_place" and row.busbw_gbps is not None
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("experiment", type=Path)
    parser.add_argument("-t", "--testbed", type=Path, required=True)
    parser.add_argument("--recipes", type=Path, default=None)
    parser.add_argument("--run", type=int, default=0, help="which run of the plan (default 0)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tolerance", type=float, default=TOLERANCE)
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--out", type=Path, default=Path("results") / "intrusion")
    args = parser.parse_args()

    inputs = load_inputs(args.experiment, args.testbed, [args.recipes] if args.recipes else None)
    run = make_plan(inputs).runs[args.run]
    os.makedirs(run.run_dir, exist_ok=True)
    args.out.mkdir(parents=True, exist_ok=True)
    print(f"# job: {run.launch.command}", flush=True)
    sides = {"r2bench": through_r2bench, "hand": by_hand}
    samples: dict[str, dict[int, list[float]]] = {name: {} for name in sides}
    for repeat in range(args.repeats):
        for name, launch in sides.items():
            output = args.out / f"{name}-{repeat}.txt"
            started = time.monotonic()
            code = launch(run, output, args.timeout)
            print(
                f"# {name} #{repeat}: exit {code} in {time.monotonic() - started:.1f} s", flush=True
            )
            if code != 0:
                print(f"# {name} failed; see {output}", file=sys.stderr)
                return 2
            for size, value in busbw(output).items():
                samples[name].setdefault(size, []).append(value)

    worst_ok = True
    print(
        f"{'size':>12} {'r2bench GB/s':>13} {'hand GB/s':>10} {'ratio':>7}  (median of {args.repeats})"
    )
    for size in sorted(samples["hand"]):
        ours = statistics.median(samples["r2bench"].get(size, [float("nan")]))
        theirs = statistics.median(samples["hand"][size])
        ratio = ours / theirs if theirs else float("nan")
        judged = size >= JUDGED_FROM_BYTES
        ok = not judged or abs(ratio - 1) <= args.tolerance
        worst_ok &= ok
        mark = "" if not judged else ("  ok" if ok else f"  OUTSIDE {args.tolerance:.0%}")
        print(f"{size:>12} {ours:>13.2f} {theirs:>10.2f} {ratio:>7.4f}{mark}")
    print(
        f"target: within {args.tolerance:.0%} at every size >= {JUDGED_FROM_BYTES // MIB} MiB: "
        f"{'met' if worst_ok else 'NOT met'}"
    )
    return 0 if worst_ok else 1


if __name__ == "__main__":
    sys.exit(main())
