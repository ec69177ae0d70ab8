"""Harness overhead of `r2bench sweep` on the virtual testbed (root; Linux).

    python benchmarks/bench_sweep.py [--testbed TESTBED.yaml] [--runs 20]

Runs a sweep of `--runs` short runs of the emulated all_reduce (half of them with a link
fault on node1's nic1) through `sweep_command`, exactly as the CLI does, into a temporary
results folder. Overhead = the sweep's wall time / the sum of the jobs' own run times (launch to
exit, from each run's outcome.json); the controller's CPU time is that of this process (the
sweep runs in it). Without --testbed it brings up (and takes down) its own virtual testbed,
outside the timed part. The last lines are

    sweep overhead=<ratio> controller_cpu_s_per_run=<s>
    target overhead <= 1.10: met|NOT met

Exit code: 0 when the target is met, 1 when it is not or the sweep failed.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console

from r2bench.commands.sweep import sweep_command
from r2bench.sweep.orchestrate import SweepOptions
from r2bench.testbeds.virtual.lifecycle import throwaway_testbed

OVERHEAD_TARGET = 1.10
"""At most this sweep wall time over the sum of the jobs' own run times (docs/sweep.md)."""
EXPERIMENT = """name: bench-sweep
libraries: {{emulated: {{recipe: emulated-lib}}}}
benchmark: {{recipe: emulated}}
sizes: {{begin: 1M, end: 16M, factor: 2}}
options: {{iterations: 10, warmup: 1, timeout_s: 30}}
env: {{NCCL_R2CC_FAILOVER_TIMEOUT_MS: 300, R2CC_MODE: 1}}
scenarios:
  - name: nic1-blip
    faults: [{{kind: link_down, node: node1, nic: nic1, trigger: {{after_s: 0.2, since: first_result}}, duration_s: 0.5}}]
repeats: {repeats}
deadline_s: 60
"""


def job_seconds(sweep_dir: Path) -> list[float]:
    """Launch-to-exit seconds of every run of a sweep folder."""
    seconds = []
    for outcome in sweep_dir.glob("*/outcome.json"):
        data = json.loads(outcome.read_text())
        seconds.append(data["ended_at"] - data["started_at"])
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--testbed", type=Path)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    with (
        throwaway_testbed(args.testbed, "bs") as testbed_file,
        tempfile.TemporaryDirectory() as tmp,
    ):
        experiment = Path(tmp) / "bench-sweep.yaml"
        experiment.write_text(EXPERIMENT.format(repeats=max(1, args.runs // 2)))
        options = SweepOptions(experiment, testbed_file, Path(tmp) / "results", quiet=True)
        console = Console(stderr=True, quiet=True)
        cpu0, wall0 = time.process_time(), time.perf_counter()
        code = sweep_command(options, console)
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        jobs = job_seconds(Path(tmp) / "results" / "bench-sweep")
    if code != 0 or not jobs:
        print(f"sweep failed (exit {code})", file=sys.stderr)
        return 1
    per_run = (wall - sum(jobs)) / len(jobs)
    print(f"runs={len(jobs)} wall_s={wall:.1f} jobs_s={sum(jobs):.1f} cpu_s={cpu:.2f}")
    print(f"harness time per run (doctor, setup, report included): {per_run:.3f} s")
    overhead = wall / sum(jobs)
    print(f"sweep overhead={overhead:.3f} controller_cpu_s_per_run={cpu / len(jobs):.3f}")
    met = overhead <= OVERHEAD_TARGET
    print(f"target overhead <= {OVERHEAD_TARGET:.2f}: {'met' if met else 'NOT met'}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
