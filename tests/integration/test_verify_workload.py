"""r2bench's verification workload (r2b_verify, docs/verify.md): its captured GPU outputs read
by the unchanged nccl-tests parsers, the `#iter`/`#verify` reader, the self-test's outcome
(wrong_results naming the iteration), the recipe and the GPU experiment's plan.

This module holds those with real processes; the same subject's other tests:
tests/unit/test_verify_workload.py (its pure tests).
"""

from __future__ import annotations

import subprocess
import sys

from tests.support import paths

ROOT = paths.REPO
DATA = paths.DATA / "verify"


def test_bench_verify_reads_captured_outputs() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_verify.py"),
         str(DATA / "all_reduce.np2.256M.check.stdout.txt"),
         str(DATA / "all_reduce.np2.256M.nocheck.stdout.txt"), "--nccl-tests",
         str(DATA / "nccl-tests-2.19.6.all_reduce_perf.np2.16M-256M.n20.txt")],
        capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    # over NVLink the check takes 11.8 % of an iteration, over its 5 % budget: exit 1
    assert out.returncode == 1, out.stderr
    assert "check / iteration" in out.stdout and "268435456" in out.stdout
    assert "target: the check <= 5% of an iteration: NOT met" in out.stdout
    # r2b_verify's busbw within 3 % of nccl-tests' at 256 MiB on the same GPUs and NCCL
    share = float(out.stdout.split("268435456 B ")[-1].splitlines()[0].split()[-3])
    assert 97.0 <= share <= 103.0, out.stdout
    assert "target: busbw within 3% at every size: met" in out.stdout
