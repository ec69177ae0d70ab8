"""Benchmark: what r2bench's per-update logging and digests cost a training update.

The emulated training job (`r2bench.workloads.train_emulated`) runs under the real mpirun on
loopback, 3 ranks, the same seed and updates, alternately with its per-update `#train` lines
and parameter digests (every `--digest-every` updates) and with `--no-log` (neither). Each run
reports its training loop's wall time (`# N updates in S s`); the figure is the median per-update
time of each mode over the repeats, and their ratio. Target: at most 1.01 (1 % of a fault-free
update). Exit code 0 when it is met, 1 otherwise.

    python benchmarks/training_logging.py [--updates 200] [--repeats 5] [--model small]

The GPU workload (`train_torch`) takes the same `--no-log`; its figure on a GPU is in
docs/training.md.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys

TARGET = 1.01
LOOP = re.compile(r"^# (\d+) updates in ([0-9.]+) s")


def loop_seconds(updates: int, model: str, digest_every: int, logged: bool) -> float:
    """One job's training-loop seconds per update."""
    cmd = ["mpirun", "--oversubscribe", "-np", "3"]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    cmd += [sys.executable, "-m", "r2bench.workloads.train_emulated", "--model", model]
    cmd += ["--updates", str(updates), "--batch", "8", "--seq-len", "64"]
    cmd += ["--digest-every", str(digest_every), *([] if logged else ["--no-log"])]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=True).stdout
    found = next(m for m in map(LOOP.match, out.splitlines()) if m)
    return float(found.group(2)) / int(found.group(1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--updates", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--model", default="small")
    parser.add_argument("--digest-every", type=int, default=10)
    a = parser.parse_args()
    logged, bare = [], []
    for _ in range(a.repeats):  # alternated, so a slower spell of the host hits both
        logged.append(loop_seconds(a.updates, a.model, a.digest_every, logged=True))
        bare.append(loop_seconds(a.updates, a.model, a.digest_every, logged=False))
    with_logs, without = statistics.median(logged), statistics.median(bare)
    ratio = with_logs / without
    pairs = sorted(a / b for a, b in zip(logged, bare, strict=True))
    print(f"model {a.model}, 3 ranks, {a.updates} updates x {a.repeats} repeats each")
    print(f"per update without lines or digests: {without * 1e3:.3f} ms (median)")
    print(f"per update with lines, digests every {a.digest_every}: {with_logs * 1e3:.3f} ms")
    print(
        f"ratio: {ratio:.4f} (target <= {TARGET}); run-pair ratios {pairs[0]:.3f} to "
        f"{pairs[-1]:.3f}: the host's noise, to read the ratio against"
    )
    return 0 if ratio <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
