"""Harness overhead of `r2bench sweep` on the virtual testbed (root; Linux).

    python benchmarks/bench_sweep.py [--testbed TESTBED.yaml] [--runs 20]

Runs a sweep of `--runs` short runs of the emulated all_reduce (half of them with a link
fault on node1's nic1) through `sweep_command`, exactly as the CLI does, into a temporary
results folder. Overhead = the sweep's wall time / the sum of the jobs' own run times (launch to
exit, from each run's outcome.json); the controller's CPU time is that of this process (the
sweep runs in it). Without --testbed it brings up (and takes down) its own virtual testbed,
outside the timed part. It prints where each run's controller time goes (the median time of
each stage of `RunExecutor.execute`, and between runs), then

    sweep overhead=<ratio> controller_cpu_s_per_run=<s>
    target overhead <= 1.05: met|NOT met

Exit code: 0 when the target is met, 1 when it is not or the sweep failed.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

from rich.console import Console

from r2bench.commands.sweep import sweep_command
from r2bench.sweep.orchestrate import SweepOptions
from r2bench.sweep.run import RunExecutor, Stage
from r2bench.testbeds.virtual.lifecycle import throwaway_testbed

OVERHEAD_TARGET = 1.05
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


def job_seconds(sweep_dir: Path) -> dict[str, float]:
    """Launch-to-exit seconds of every run of a sweep folder, by run folder name."""
    seconds = {}
    for outcome in sweep_dir.glob("*/outcome.json"):
        data = json.loads(outcome.read_text())
        seconds[outcome.parent.name] = data["ended_at"] - data["started_at"]
    return seconds


class StageClock:
    """When each run entered each stage (`RunExecutor._enter`), when `RunExecutor.start`
    began and returned (the foreground: the next run starts then) and when its collect and
    record were done (`_finish`, in the background), to print where a run's controller time
    goes; measurement only, the sweep runs unchanged."""

    def __init__(self) -> None:
        self.marks: list[tuple[str, str, float]] = []  # (run id, stage or start/returned/done, t)
        self.lock = threading.Lock()

    def _mark(self, run_id: str, name: str) -> None:
        with self.lock:
            self.marks.append((run_id, name, time.perf_counter()))

    @contextmanager
    def watching(self) -> Iterator[None]:
        """Record while the sweep runs."""
        enter, start, finish = RunExecutor._enter, RunExecutor.start, RunExecutor._finish

        def timed_enter(executor: RunExecutor, run_id: str, stage: Stage) -> None:
            self._mark(run_id, stage.value)
            enter(executor, run_id, stage)

        def timed_start(executor: RunExecutor, run: Any) -> Any:
            self._mark(run.spec.run_id, "start")
            try:
                return start(executor, run)
            finally:
                self._mark(run.spec.run_id, "returned")

        def timed_finish(executor: RunExecutor, ended: Any) -> Any:
            try:
                return finish(executor, ended)
            finally:
                self._mark(ended.run.spec.run_id, "done")

        with (
            mock.patch.object(RunExecutor, "_enter", timed_enter),
            mock.patch.object(RunExecutor, "start", timed_start),
            mock.patch.object(RunExecutor, "_finish", timed_finish),
        ):
            yield

    def report(self, jobs: dict[str, float], began: float, ended: float) -> None:
        """Median seconds per stage over the runs; what each run's foreground (preflight to
        teardown) spends besides its job; its collect and record, which overlap the next
        run's start; the gap between runs; what the sweep spends outside the runs."""
        by_run: dict[str, dict[str, float]] = defaultdict(dict)
        for run, name, t in self.marks:
            by_run[run][name] = t
        order = [s.value for s in Stage] + ["done"]
        spans: dict[str, list[float]] = defaultdict(list)
        for marks in by_run.values():
            spans["start -> preflight"].append(marks[Stage.PREFLIGHT.value] - marks["start"])
            timed = [name for name in order if name in marks]
            for name, after in itertools.pairwise(timed):
                end = marks["returned"] if name == Stage.TEARDOWN.value else marks[after]
                spans[name].append(end - marks[name])
        runs = sorted(by_run.values(), key=lambda m: m["start"])
        for earlier, later in itertools.pairwise(runs):
            spans["between runs (the sweep loop)"].append(later["start"] - earlier["returned"])
        print("where a run's time goes (median s over runs; faults+wait hold the job;")
        print("collect and record run in the background, beside the next run's job):")
        for name, values in spans.items():
            print(f"  {name:32} {statistics.median(values):7.3f} s  (sum {sum(values):6.2f} s)")
        foreground = sum(m["returned"] - m["start"] for m in runs)
        inside = foreground - sum(jobs.values())
        per_run = inside / max(1, len(runs))
        mean_job = sum(jobs.values()) / max(1, len(jobs))
        print(
            f"  foreground minus the job, per run: {per_run:.3f} s ({per_run / mean_job:.1%} of "
            f"a {mean_job:.2f} s job: the ratio a sweep of many such runs tends to, the fixed "
            f"costs below spread thin, is {(mean_job + per_run) / mean_job:.3f})"
        )
        tail = runs[-1]["done"] - runs[-1]["returned"] if runs else 0.0
        before = runs[0]["start"] - began if runs else 0.0
        after = ended - runs[-1]["returned"] if runs else 0.0
        print(
            f"  outside the runs: {ended - began - foreground:.2f} s; before the first "
            f"(connections, agents, doctor, setup) {before:.2f} s, after the last (its record, "
            f"the final heal, tables, report) {after:.2f} s (the last record: {tail:.3f} s)"
        )


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
        clock = StageClock()
        cpu0, wall0 = time.process_time(), time.perf_counter()
        with clock.watching():
            code = sweep_command(options, console)
        wall1 = time.perf_counter()
        wall, cpu = wall1 - wall0, time.process_time() - cpu0
        by_run = job_seconds(Path(tmp) / "results" / "bench-sweep")
        jobs = list(by_run.values())
    if code != 0 or not jobs:
        print(f"sweep failed (exit {code})", file=sys.stderr)
        return 1
    clock.report(by_run, wall0, wall1)
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
