"""Benchmark: `r2bench testbed from-slurm` at the node list's cap (100,000 hosts), and loading
the file it writes again, against a 10 s target each.

Each is timed in a fresh process running the `r2bench` command as a user runs it (`testbed
from-slurm -o FILE` in a fake allocation of `gpu[1-N]` with 8 GPUs a node; `plan` of a one-node
experiment on that file, which reads and validates all of it). Printed: the wall time and the
CPU time (user + system, which other load on a shared machine barely changes) at N = 100,000,
and the same at a quarter of it: linear work makes the ratio of the CPU times about 4 (the
duplicate check that was quadratic made it about 9; a full-size from-slurm took 84 s). Exits 1
when a CPU time at full size misses the target.

    python benchmarks/bench_slurm_testbed.py [--hosts 100000]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

TARGET_S = 10.0
ROOT = Path(__file__).resolve().parents[1]
ENTRY_POINT = "from r2bench.cli import main; main()"
EXPERIMENT = """\
name: one-node
libraries: {stock: {recipe: nccl}}
collectives: [all_reduce]
sizes: [1M]
nodes: 1
"""


@dataclass(frozen=True)
class Timing:
    """One command's wall and CPU time."""

    wall_s: float
    cpu_s: float


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_timed(args: list[str], env: dict[str, str], expect_ok: bool = True) -> Timing:
    """`r2bench ARGS` in a fresh process; its wall and CPU time."""
    cpu_before, started = _children_cpu_s(), time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", ENTRY_POINT, *args], env=env, capture_output=True, text=True
    )
    wall = time.perf_counter() - started
    if expect_ok and done.returncode != 0:
        raise SystemExit(f"r2bench {' '.join(args)} failed: {done.stderr[-2000:]}")
    return Timing(wall, _children_cpu_s() - cpu_before)


def measure(hosts: int, folder: Path) -> tuple[Timing, Timing]:
    """(from-slurm, load again) for an allocation of `hosts` hosts."""
    testbed, experiment = folder / f"slurm-{hosts}.yaml", folder / "exp.yaml"
    experiment.write_text(EXPERIMENT)
    env = dict(
        os.environ,
        PYTHONPATH=str(ROOT),
        SLURM_JOB_NODELIST=f"gpu[1-{hosts}]",
        SLURM_JOB_ID="4242",
        SLURM_GPUS_ON_NODE="8",
    )
    written = run_timed(["testbed", "from-slurm", "-o", str(testbed)], env)
    loaded = run_timed(["plan", str(experiment), "-t", str(testbed)], env)
    return written, loaded


def main() -> int:
    """Time both sizes, print the figures against the target; 1 when one misses it."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=100_000)
    hosts = parser.parse_args().hosts
    with tempfile.TemporaryDirectory() as tmp:
        quarter = measure(hosts // 4, Path(tmp))
        full = measure(hosts, Path(tmp))
    missed = False
    for label, small, large in (
        ("testbed from-slurm", quarter[0], full[0]),
        ("load it again (plan)", quarter[1], full[1]),
    ):
        ratio = large.cpu_s / small.cpu_s if small.cpu_s else float("nan")
        verdict = "ok" if large.cpu_s <= TARGET_S else "MISSED"
        missed |= large.cpu_s > TARGET_S
        print(
            f"{label:22} {hosts} hosts: cpu {large.cpu_s:6.2f} s (wall {large.wall_s:6.2f} s), "
            f"target {TARGET_S:g} s: {verdict}; {hosts // 4} hosts: cpu {small.cpu_s:5.2f} s, "
            f"x{ratio:.1f} for 4x the hosts (linear: about 4)"
        )
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
