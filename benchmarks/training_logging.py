"""Benchmark: what r2bench's per-update logging and digests cost a training update.

The emulated training job (`r2bench.workloads.train_emulated`) runs under the real mpirun on
loopback, 3 ranks, the same seed and updates, alternately with its per-update `#train` lines
and parameter digests (every `--digest-every` updates) and with `--no-log` (neither). Each run
reports its training loop's wall time (`# N updates in S s`); the figure is the median per-update
time of each mode over the repeats, and their ratio. Target: at most 1.01 (1 % of a fault-free
update). Exit code 0 when it is met, 1 otherwise.

    python benchmarks/training_logging.py [--updates 200] [--repeats 5] [--model small]
    python benchmarks/training_logging.py --workload torch --ranks 4 --model gpt2-6l  (GPUs)

The GPU workload (`train_torch`, a GPU a rank, bf16, 4 x 512 tokens a rank) reports its loop the
same way; its figure on a GPU host is in docs/training.md.
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


def loop_seconds(
    updates: int,
    model: str,
    digest_every: int,
    logged: bool,
    workload: str = "emulated",
    ranks: int = 3,
) -> float:
    """One job's training-loop seconds per update."""
    cmd = ["mpirun", "--oversubscribe", "-np", str(ranks)]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    shape = ["--batch", "8", "--seq-len", "64"]
    if workload == "torch":  # a GPU a rank; NVLink multicast stays off on shared hosts
        cmd += ["-x", "NCCL_NVLS_ENABLE=0", "-x", "CUBLAS_WORKSPACE_CONFIG=:4096:8"]
        shape = ["--batch", "4", "--seq-len", "512", "--dtype", "bf16", "--lr", "6e-4"]
    cmd += [sys.executable, "-m", f"r2bench.workloads.train_{workload}", "--model", model]
    cmd += ["--updates", str(updates), *shape]
    cmd += ["--digest-every", str(digest_every), *([] if logged else ["--no-log"])]
    job = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    if job.returncode:
        raise SystemExit(f"{' '.join(cmd)}: exit {job.returncode}\n{job.stderr[-2000:]}")
    out = job.stdout
    found = next(m for m in map(LOOP.match, out.splitlines()) if m)
    return float(found.group(2)) / int(found.group(1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--updates", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--model", default="small")
    parser.add_argument("--digest-every", type=int, default=10)
    parser.add_argument("--workload", choices=["emulated", "torch"], default="emulated")
    parser.add_argument("--ranks", type=int, default=3)
    a = parser.parse_args()
    logged, bare = [], []
    for _ in range(a.repeats):  # alternated, so a slower spell of the host hits both
        for logs, into in ((True, logged), (False, bare)):
            into.append(loop_seconds(a.updates, a.model, a.digest_every, logs, a.workload, a.ranks))
    with_logs, without = statistics.median(logged), statistics.median(bare)
    ratio = with_logs / without
    pairs = sorted(a / b for a, b in zip(logged, bare, strict=True))
    print(
        f"{a.workload} {a.model}, {a.ranks} ranks, {a.updates} updates x {a.repeats} repeats each"
    )
    print(f"per update without lines or digests: {without * 1e3:.3f} ms (median)")
    print(f"per update with lines, digests every {a.digest_every}: {with_logs * 1e3:.3f} ms")
    print(
        f"ratio: {ratio:.4f} (target <= {TARGET}); run-pair ratios {pairs[0]:.3f} to "
        f"{pairs[-1]:.3f}: the host's noise, to read the ratio against"
    )
    return 0 if ratio <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
