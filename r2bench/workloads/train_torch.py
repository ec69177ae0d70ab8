"""The PyTorch training workload: nanoGPT's GPT-2 trained data-parallel (DDP) over the NCCL under
test, one process per GPU, launched by mpirun (docs/training.md).

    mpirun -np 2 python -m r2bench.workloads.train_torch --model gpt2-6l --updates 60 \\
        --batch 8 --seq-len 1024 --seed 42 --lr 6e-4 --dtype bf16 --digest-every 10

Rank 0 prints the `#train-start`, `#train` and `#train-end` lines of
`r2bench.workloads.train_format` on stdout. Exit codes follow the emulated workload
(`ring_allreduce`) and nccl-tests: 0 done, 3 a collective failed (the library reported an error),
6 a usage error (a flag, a launch without rank variables, a data file, or the served library not
the one `R2B_EXPECT_NCCL` names).

This module is the entry; the pure parts (flags, ranks, schedule, the end line) are in
`r2bench.workloads.train_options`, everything that needs torch in
`r2bench.workloads.train_torch_job`, imported only once the flags are read, after
`CUBLAS_WORKSPACE_CONFIG` is set (cuBLAS reads it at CUDA init).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from r2bench.workloads.train_options import (
    CUBLAS_WORKSPACE,
    EXIT_USAGE,
    PROGRAM,
    UsageError,
    parse_options,
    ranks_from_env,
    rendezvous_from_env,
)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: ``python -m r2bench.workloads.train_torch [flags]``."""
    try:
        opts = parse_options(sys.argv[1:] if argv is None else argv)
        ranks = ranks_from_env(os.environ)
        rendezvous = rendezvous_from_env(os.environ)
    except UsageError as exc:
        print(f"{PROGRAM}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    # Before torch initialises CUDA: cuBLAS reads it then, and deterministic algorithms need it.
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", CUBLAS_WORKSPACE)
    from r2bench.workloads import train_torch_job

    return train_torch_job.run(opts, ranks, rendezvous)


if __name__ == "__main__":
    sys.exit(main())
