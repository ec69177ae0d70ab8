"""Bandwidth of the emulated ring AllReduce on loopback (2 ranks x 2 NICs by default).

Usage: ``python benchmarks/bench_workload.py [ranks] [size]``; prints the result row. The
numbers measure the r2bench emulator over TCP loopback, not NCCL.

Target: none (figures only); the exit code is the job's (mpirun's).
"""

from __future__ import annotations

import os
import subprocess
import sys


def main(argv: list[str]) -> int:
    """Run one 64 MiB (default) sweep point under mpirun and print its rows."""
    ranks = argv[0] if argv else "2"
    size = argv[1] if len(argv) > 1 else "64M"
    cmd = ["mpirun", "--oversubscribe", "-np", ranks]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    cmd += [sys.executable, "-m", "r2bench.workloads.ring_allreduce"]
    cmd += ["-b", size, "-e", size, "-n", "10", "-w", "2"]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=300)
    print("\n".join(ln for ln in proc.stdout.splitlines() if not ln.startswith("#  Rank")))
    print("target: none (figures only)")
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
