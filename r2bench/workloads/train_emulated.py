"""Emulated training job: a small numpy language model trained data-parallel over the emulated
library, so a training job runs under real link faults on the GPU-less virtual testbed.

This is an EMULATOR of a PyTorch DDP job on R-2CCL or NCCL, not PyTorch and not NCCL. Every
rank computes the loss and gradient of its own batch (:mod:`r2bench.workloads.tinylm`); the
gradient, one flat float32 vector (one bucket by default, as DDP with `bucket_cap_mb` above the
model's size), is summed by the emulated library's ring AllReduce over the nodes' data NICs
(:mod:`r2bench.workloads.transport`, the same library emulation as
:mod:`r2bench.workloads.ring_allreduce`: stock NCCL aborts on a dead link, R-2CCL hot-repairs it)
and averaged; Adam updates the parameters. mpi4py carries only the control plane: the step
times, losses and digests rank 0 prints (the `#train` lines of
:mod:`r2bench.workloads.train_format`).

Run: ``mpirun -np 4 python -m r2bench.workloads.train_emulated --model tiny --updates 100``

Flags (the training workloads' common ones): ``--model tiny|small``, ``--updates``, ``--batch``
(sequences per rank), ``--seq-len`` (tokens predicted per sequence), ``--seed``, ``--lr``,
``--dtype float32`` (the only one here), ``--digest-every N``, ``--bucket-mb`` (gradient
AllReduce in buckets of this size, in order), ``--data FILE`` (uint16 tokens). Emulator flags:
``--timeout-s`` (per collective, as nccl-tests' ``-T``), ``--nic-addrs``, ``--no-log`` (no
per-update lines or digests: the logging's cost is measured against it), and ``--corrupt
UPDATE[:RANK]`` (or ``R2B_TRAIN_CORRUPT``: the checks' self-test adds 0.001 to one gradient
element on RANK, default the last, before update UPDATE's AllReduce).

Environment as :mod:`r2bench.workloads.ring_allreduce` (``R2B_NIC_MAP``, ``R2B_EMULATED_LIBRARY``,
``R2CC_MODE``, ``NCCL_R2CC_FAILOVER_TIMEOUT_MS``...). Exit codes: 0 done, 3 network failure, 4
timeout, 6 invalid usage.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from r2bench.workloads import tinylm
from r2bench.workloads.ring_allreduce import (
    EXIT_NET,
    EXIT_TIMEOUT,
    EXIT_USAGE,
    Library,
    RingAllreduce,
    UsageError,
    abort_job,
    local_nics,
    resolve_library,
    transport_config,
)
from r2bench.workloads.train_format import TrainEnd, TrainStart, UpdateLine
from r2bench.workloads.transport import (
    CollectiveTimeout,
    FreezeHook,
    NetworkFailure,
    R2ccLog,
    RingTransport,
)

PROGRAM = "train_emulated"
CORRUPT_VAR = "R2B_TRAIN_CORRUPT"
CORRUPT_DELTA = np.float32(1e-3)
FINAL_LOSS_UPDATES = 10  # the final loss: the mean over the last updates, as the artifact's


@dataclass(frozen=True)
class TrainArgs:
    """The parsed command line."""

    model: str
    updates: int
    batch: int
    seq_len: int
    seed: int
    lr: float
    digest_every: int
    bucket_mb: int | None
    data: Path | None
    timeout_s: int
    nic_addrs: str | None
    no_log: bool
    corrupt: str | None

    @property
    def preset(self) -> tinylm.Preset:
        """The model's sizes."""
        return tinylm.PRESETS[self.model]

    @property
    def positions(self) -> int:
        """Tokens predicted per rank per update."""
        return self.batch * self.seq_len


def build_parser() -> argparse.ArgumentParser:
    """The training workloads' flags, plus the emulator's own."""
    p = argparse.ArgumentParser(prog=PROGRAM, description=(__doc__ or "").splitlines()[0])
    add = p.add_argument
    add("--model", default="tiny", choices=sorted(tinylm.PRESETS))
    add("--updates", type=int, default=100)
    add("--batch", type=int, default=8)
    add("--seq-len", type=int, default=64)
    add("--seed", type=int, default=42)
    add("--lr", type=float, default=3e-3)
    add("--dtype", default="float32")
    add("--digest-every", type=int, default=10)
    add("--bucket-mb", type=int, default=None)
    add("--data", type=Path, default=None)
    add("--timeout-s", type=int, default=0)
    add("--nic-addrs", default=None)
    add("--no-log", action="store_true")
    add("--corrupt", default=None, help="self-test: corrupt UPDATE[:RANK]'s gradient")
    return p


def parse_args(argv: list[str]) -> TrainArgs:
    """Parse and validate `argv` (without the program name); UsageError names the flag."""
    a = build_parser().parse_args(argv)
    if a.dtype != "float32":
        raise UsageError(f"--dtype {a.dtype}: the emulator trains in float32 only")
    for flag, value in (("--updates", a.updates), ("--batch", a.batch), ("--seq-len", a.seq_len)):
        if value < 1:
            raise UsageError(f"{flag} {value}: must be at least 1")
    if a.digest_every < 0 or (a.bucket_mb is not None and a.bucket_mb < 1) or a.timeout_s < 0:
        raise UsageError("--digest-every, --bucket-mb and --timeout-s must not be negative")
    return TrainArgs(
        a.model, a.updates, a.batch, a.seq_len, a.seed, a.lr, a.digest_every, a.bucket_mb,
        a.data, a.timeout_s, a.nic_addrs, a.no_log, a.corrupt,
    )  # fmt: skip


def parse_corrupt(text: str | None, ranks: int) -> tuple[int, int] | None:
    """`UPDATE[:RANK]` (rank default: the last) -> (update, rank); None without one."""
    if not text:
        return None
    update, _, rank = text.partition(":")
    try:
        which = (int(update), int(rank) if rank else ranks - 1)
    except ValueError:
        raise UsageError(f"--corrupt {text}: expected UPDATE[:RANK], e.g. 12 or 12:0") from None
    if which[0] < 1 or not 0 <= which[1] < ranks:
        raise UsageError(f"--corrupt {text}: update from 1, rank 0 to {ranks - 1}")
    return which


def buckets(count: int, bucket_mb: int | None) -> list[slice]:
    """The gradient's AllReduce buckets, in order (None: one bucket)."""
    if bucket_mb is None:
        return [slice(0, count)]
    per = max(1, (bucket_mb << 20) // 4)
    return [slice(i, min(i + per, count)) for i in range(0, count, per)]


def digest(params: np.ndarray) -> str:
    """SHA-256 of the parameters' bytes."""
    return hashlib.sha256(params.tobytes()).hexdigest()


@dataclass
class Trainer:
    """One rank's training loop."""

    comm: Any
    args: TrainArgs
    library: Library
    algo: RingAllreduce
    model: tinylm.Model
    stream: tinylm.TokenStream
    corrupt: tuple[int, int] | None
    losses: list[float]
    done: int = 0
    """Updates completed."""

    @property
    def rank(self) -> int:
        """This rank."""
        return int(self.comm.rank)

    def step(self, update: int, grad: np.ndarray, opt: tinylm.Adam) -> UpdateLine | None:
        """One update; rank 0 returns its line (None elsewhere, and with --no-log)."""
        start, t0 = time.time(), time.perf_counter()
        loss = tinylm.loss_and_grad(self.model, self.stream.batch(self.args.positions), grad)
        if self.corrupt == (update, self.rank):
            grad[len(grad) // 2] += CORRUPT_DELTA
        for part in buckets(len(grad), self.args.bucket_mb):
            self.algo.run(grad[part], self.args.timeout_s)
        grad /= np.float32(self.comm.size)
        wide = grad.astype(np.float64)
        grad_norm = float(np.sqrt(np.dot(wide, wide)))
        opt.update(self.model.flat, grad)
        seconds = time.perf_counter() - t0
        if self.args.no_log:
            self.losses.append(loss)
            return None
        every = self.args.digest_every
        mine = digest(self.model.flat) if every and update % every == 0 else None
        gathered = self.comm.gather((seconds, loss, mine), root=0)
        if self.rank != 0:
            return None
        step_s = max(g[0] for g in gathered)
        mean_loss = sum(g[1] for g in gathered) / len(gathered)  # rank order: deterministic
        self.losses.append(mean_loss)
        digests = {g[2] for g in gathered}
        tokens = self.args.positions * len(gathered)
        return UpdateLine(
            update, start, start + seconds, step_s, mean_loss, tokens / step_s if step_s else 0.0,
            grad_norm, grad.nbytes, mine, len(digests) == 1 if mine is not None else None,
        )  # fmt: skip

    def train(self) -> None:
        """Every update, rank 0 printing each line as it is done."""
        grad = np.empty_like(self.model.flat)
        opt = tinylm.Adam(self.args.lr)
        started = time.perf_counter()  # reset after update 1, which warms up the ring
        for update in range(1, self.args.updates + 1):
            line = self.step(update, grad, opt)
            self.done = update
            if line is not None:
                print(line.text(), flush=True)
            if update == 1:
                started = time.perf_counter()
        if self.rank == 0:
            self.finish(time.perf_counter() - started)

    def finish(self, seconds: float) -> None:
        """The `#train-end` line: the final loss and a held-out evaluation loss."""
        last = self.losses[-FINAL_LOSS_UPDATES:]
        held_out = tinylm.TokenStream(
            self.args.preset, self.args.seed + 1, self.comm.size, self.comm.size + 1
        )
        eval_loss = tinylm.loss_only(self.model, held_out.batch(self.args.positions))
        lines = "no per-update lines" if self.args.no_log else "per-update lines and digests"
        timed = max(1, self.args.updates - 1)
        print(f"# {timed} updates in {seconds:.6f} s ({lines}, after update 1)", flush=True)
        print(TrainEnd(self.args.updates, sum(last) / len(last), eval_loss).text(), flush=True)


def start_line(args: TrainArgs, library: Library, ranks: int, count: int) -> TrainStart:
    """The `#train-start` line."""
    return TrainStart(
        workload=PROGRAM, model=args.model, parameters=count, ranks=ranks, seed=args.seed,
        updates=args.updates, batch=args.batch, seq_len=args.seq_len, allreduce_bytes=count * 4,
        library=f"{library.name} (emulated)", library_path=str(Path(__file__).parent),
        digest_every=args.digest_every,
    )  # fmt: skip


def setup(comm: Any, args: TrainArgs, env: dict[str, str]) -> Trainer:
    """Resolve the emulated library, connect the ring, initialise model and data."""
    log = R2ccLog.from_env(comm.rank, env)
    library = resolve_library(env, log)
    nics = local_nics(args.nic_addrs, env)
    freeze = FreezeHook.parse(env.get("R2B_TEST_FREEZE"))
    transport = RingTransport(
        transport_config(comm, library, nics, env, log, freeze), comm.allgather
    )
    model = tinylm.Model.init(args.preset, args.seed)
    try:
        stream = tinylm.TokenStream(args.preset, args.seed, comm.rank, comm.size, args.data)
    except (OSError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    corrupt = parse_corrupt(args.corrupt or env.get(CORRUPT_VAR), comm.size)
    algo = RingAllreduce(transport, comm.rank, comm.size, model.flat.size)
    if comm.rank == 0:
        print(
            f"# r2bench emulated training (numpy, not PyTorch, no GPU): {library.name} "
            f"(emulated), {comm.size} ranks, TCP over {len(nics)} NIC(s) per rank",
            flush=True,
        )
        if corrupt:
            print(f"# Self-test: update {corrupt[0]}'s gradient is corrupted on purpose on "
                  f"rank {corrupt[1]}: this run must differ from its baseline there", flush=True)  # fmt: skip
        print(start_line(args, library, comm.size, model.flat.size).text(), flush=True)
    return Trainer(comm, args, library, algo, model, stream, corrupt, [])


def run(comm: Any, args: TrainArgs, env: dict[str, str]) -> int:
    """The job; a network failure or timeout aborts every rank, as NCCL's would."""
    trainer = setup(comm, args, env)
    host = socket.gethostname()
    try:
        trainer.train()
    except CollectiveTimeout:
        where = f"update {trainer.done + 1}"
        abort_job(comm, EXIT_TIMEOUT, f"{host}: Test timeout ({args.timeout_s}s) {where}", where)
    except NetworkFailure as exc:
        where = f"update {trainer.done + 1}"
        reason = f"remote process exited or there was a network error / {exc}"
        abort_job(comm, EXIT_NET, f"{host}: Test NCCL failure {where} '{reason}'", where)
    comm.Barrier()
    trainer.algo.transport.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point: ``python -m r2bench.workloads.train_emulated [flags]``."""
    try:
        args = parse_args(sys.argv[1:] if argv is None else argv)
    except UsageError as exc:
        print(f"{PROGRAM}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        from mpi4py import MPI
    except ImportError:
        print(f"{PROGRAM}: mpi4py is required (pip install 'r2bench[workload]')", file=sys.stderr)
        return EXIT_USAGE
    comm = MPI.COMM_WORLD
    try:
        return run(comm, args, dict(os.environ))
    except UsageError as exc:
        print(f"{PROGRAM}: {exc}", file=sys.stderr, flush=True)
        comm.Abort(EXIT_USAGE)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
