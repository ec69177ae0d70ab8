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

Recovery flags (docs/recovery.md, "Recovery strategies"):

- ``--checkpoint-dir DIR --checkpoint-every K``: rank 0 writes the whole state (parameters,
  Adam, every rank's data-stream position) atomically after every K-th update and prints
  `#train-checkpoint` (:mod:`r2bench.workloads.checkpoint`). At start every rank resumes from
  the newest checkpoint that verifies (rank 0 reads it and broadcasts it over MPI) and rank 0
  prints `#train-resume` with the start's number (`update` 0: a restart before the first
  checkpoint, from scratch); the losses from the next update on are bit-identical to an
  uninterrupted run's. A directory whose checkpoints all fail to verify, or were written by
  another number of ranks, fails the start (exit 6, a stderr line).
- ``--watchdog-s S``: a collective not done after S seconds makes the job give up, as PyTorch's
  NCCL watchdog does: rank 0 prints `#train-abort` and the job exits 4.
- ``--on-failure exit|shrink`` (shrink needs ``--watchdog-s``): on a network failure or a
  watchdog expiry the ranks gather what each saw over MPI's control plane and agree which node's
  ranks failed (:mod:`r2bench.workloads.shrink`); those exit 0 printing nothing, the survivors
  build a new ring among themselves (``comm.Split``, a new transport over the same NICs), the
  new rank 0 prints `#train-shrink` and training redoes the failed update with fewer ranks. A
  shrink that would leave no rank exits 3 with a stderr line. ``R2B_TEST_NODE_PER_RANK=1``
  (tests on one host) makes every rank its own node; ``R2B_TEST_FREEZE`` names a world rank and
  is not applied to a rebuilt ring.

Environment as :mod:`r2bench.workloads.ring_allreduce` (``R2B_NIC_MAP``, ``R2B_EMULATED_LIBRARY``,
``R2CC_MODE``, ``NCCL_R2CC_FAILOVER_TIMEOUT_MS``...). Exit codes: 0 done (also a rank dropped by a
shrink), 3 network failure (or a shrink with no survivor), 4 timeout or watchdog, 6 invalid usage
(or no loadable checkpoint).
"""

from __future__ import annotations

import argparse
import hashlib
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from r2bench.workloads import checkpoint, tinylm
from r2bench.workloads.ring_allreduce import (
    EXIT_NET,
    EXIT_TIMEOUT,
    Library,
    RingAllreduce,
    UsageError,
    abort_job,
    local_nics,
    mpi_main,
    resolve_library,
    transport_config,
)
from r2bench.workloads.shrink import FailureReport, ShrinkPlan, comma_list, plan_shrink
from r2bench.workloads.train_format import (
    TrainAbort,
    TrainCheckpoint,
    TrainEnd,
    TrainResume,
    TrainShrink,
    TrainStart,
    UpdateLine,
)
from r2bench.workloads.train_options import interface_down, recovery_flag_problem
from r2bench.workloads.transport import (
    CollectiveTimeout,
    FreezeHook,
    NetworkFailure,
    R2ccLog,
    RingTransport,
    sleeping_allgather,
)

PROGRAM = "train_emulated"
CORRUPT_VAR = "R2B_TRAIN_CORRUPT"
CORRUPT_DELTA = np.float32(1e-3)
FINAL_LOSS_UPDATES = 10  # the final loss: the mean over the last updates, as the artifact's
NODE_PER_RANK_VAR = "R2B_TEST_NODE_PER_RANK"
ON_FAILURE = ("exit", "shrink")
ABORT_GRACE_S = 10.0  # a rank whose watchdog fired waits this long for rank 0's abort line


class ShrinkImpossible(RuntimeError):
    """The agreed shrink leaves no rank to go on (or no failed node could be named)."""


class Dropped(Exception):
    """This rank's node failed: a shrink dropped it (it exits 0, printing nothing)."""


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
    checkpoint_dir: Path | None = None
    checkpoint_every: int = 0
    watchdog_s: int = 0
    on_failure: str = "exit"

    @property
    def preset(self) -> tinylm.Preset:
        """The model's sizes."""
        return tinylm.PRESETS[self.model]

    @property
    def positions(self) -> int:
        """Tokens predicted per rank per update."""
        return self.batch * self.seq_len

    @property
    def collective_s(self) -> int:
        """A collective's time limit: the watchdog's or ``--timeout-s``, the shorter (0: none)."""
        limits = [t for t in (self.watchdog_s, self.timeout_s) if t > 0]
        return min(limits) if limits else 0


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
    add("--checkpoint-dir", type=Path, default=None)
    add("--checkpoint-every", type=int, default=0)
    add("--watchdog-s", type=int, default=0)
    add("--on-failure", default="exit", choices=ON_FAILURE)
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
    problem = recovery_flag_problem(
        a.checkpoint_dir, a.checkpoint_every, a.watchdog_s, a.on_failure
    )
    if problem:
        raise UsageError(problem)
    return TrainArgs(
        a.model, a.updates, a.batch, a.seq_len, a.seed, a.lr, a.digest_every, a.bucket_mb,
        a.data, a.timeout_s, a.nic_addrs, a.no_log, a.corrupt, a.checkpoint_dir,
        a.checkpoint_every, a.watchdog_s, a.on_failure,
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
    node: str = ""
    rebuild: Callable[[Any], RingTransport] | None = None
    """Connects a new ring over a (shrunk) communicator."""
    opt: tinylm.Adam = field(default_factory=lambda: tinylm.Adam(3e-3))
    resumed: int = 0
    """The update this start resumed from (0: from scratch)."""
    done: int = 0
    """Updates completed."""
    update_started: float = 0.0

    @property
    def rank(self) -> int:
        """This rank."""
        return int(self.comm.rank)

    def step(self, update: int, grad: np.ndarray) -> UpdateLine | None:
        """One update; rank 0 returns its line (None elsewhere, and with --no-log)."""
        start, t0 = time.time(), time.perf_counter()
        self.update_started = start
        loss = tinylm.loss_and_grad(self.model, self.stream.batch(self.args.positions), grad)
        if self.corrupt == (update, self.rank):
            grad[len(grad) // 2] += CORRUPT_DELTA
        for part in buckets(len(grad), self.args.bucket_mb):
            self.algo.run(grad[part], self.args.collective_s)
        grad /= np.float32(self.comm.size)
        wide = grad.astype(np.float64)
        grad_norm = float(np.sqrt(np.dot(wide, wide)))
        self.opt.update(self.model.flat, grad)
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
        """Every update from the resumed one on, rank 0 printing each line as it is done."""
        grad = np.empty_like(self.model.flat)
        started = time.perf_counter()  # reset after the first update, which warms up the ring
        update = self.done = self.resumed
        while update < self.args.updates:
            update += 1
            stream_state = self.stream.rng.bit_generator.state
            try:
                line = self.step(update, grad)
            except (CollectiveTimeout, NetworkFailure):
                if self.args.on_failure != "shrink":
                    raise
                self.shrink(update, stream_state)
                update -= 1  # redo it with fewer ranks
                continue
            self.done = update
            if line is not None:
                print(line.text(), flush=True)
            if self.args.checkpoint_every and update % self.args.checkpoint_every == 0:
                self.save_checkpoint(update)
            if update == self.resumed + 1:
                started = time.perf_counter()
        if self.rank == 0:
            self.finish(time.perf_counter() - started)

    def save_checkpoint(self, update: int) -> None:
        """Rank 0 writes the state after `update`, with every rank's data-stream position."""
        t0 = time.perf_counter()
        streams = self.comm.gather(self.stream.rng.bit_generator.state, root=0)
        if self.rank != 0 or self.args.checkpoint_dir is None or self.opt.m is None:
            return
        assert self.opt.v is not None
        state = checkpoint.TrainState(
            update, self.model.flat.copy(), self.opt.m.copy(), self.opt.v.copy(), self.opt.step,
            list(streams), self.losses[-FINAL_LOSS_UPDATES:],
        )  # fmt: skip
        path = checkpoint.save(self.args.checkpoint_dir, state)
        record = TrainCheckpoint(update, time.time(), time.perf_counter() - t0, str(path))
        print(record.text(), flush=True)

    def restore(self, state: checkpoint.TrainState) -> None:
        """Take a checkpoint's state: the next update is `state.update + 1`."""
        self.model.flat[:] = state.params
        self.opt.m, self.opt.v = state.adam_m.copy(), state.adam_v.copy()
        self.opt.step = state.adam_step
        self.stream.rng.bit_generator.state = state.streams[self.rank]
        self.losses[:] = state.losses
        self.resumed = state.update

    def shrink(self, update: int, stream_state: Any) -> None:
        """Agree with every rank which node failed; drop its ranks (Dropped on them) and go on
        over a new ring of the survivors, redoing `update` from the same data."""
        detected = time.time()
        transport = self.algo.transport
        # A stall the library itself gave up on was idle for its failover time, which may be
        # shorter than the watchdog's: either counts as this rank's data not leaving.
        idle_s = min(self.args.watchdog_s / 2, self.library.failover_s)
        mine = FailureReport(
            self.rank, self.node, transport.send_stalled(idle_s), transport.recv_broken(),
            detected, any(interface_down(nic.addr) for nic in transport.cfg.nics),
        )  # fmt: skip
        plan = plan_shrink(self.comm.allgather(mine))
        if not plan.possible:
            raise ShrinkImpossible(f"update {update}: {plan.reason}")
        survivor = self.rank in plan.survivors
        new_comm = self.comm.Split(0 if survivor else 1, self.rank)
        transport.close()
        if not survivor:
            new_comm.Free()
            raise Dropped
        assert self.rebuild is not None
        self.algo = RingAllreduce(
            self.rebuild(new_comm), new_comm.rank, new_comm.size, self.model.flat.size
        )
        self.comm = new_comm
        self.stream.rng.bit_generator.state = stream_state
        if self.rank == 0:
            print(self.shrink_line(update, plan).text(), flush=True)

    def shrink_line(self, update: int, plan: ShrinkPlan) -> TrainShrink:
        """The `#train-shrink` record: `detect_s` from the failed update's start (this rank's
        clock) to the first rank's detection (all ranks' clocks: one host's, or NTP's)."""
        started, first = self.update_started, plan.first_detected
        detect_s = first - started if started and first else None
        return TrainShrink(update, time.time(), comma_list(plan.dropped), self.comm.size, detect_s)

    def finish(self, seconds: float) -> None:
        """The `#train-end` line: the final loss and a held-out evaluation loss."""
        last = self.losses[-FINAL_LOSS_UPDATES:]
        held_out = tinylm.TokenStream(
            self.args.preset, self.args.seed + 1, self.comm.size, self.comm.size + 1
        )
        eval_loss = tinylm.loss_only(self.model, held_out.batch(self.args.positions))
        lines = "no per-update lines" if self.args.no_log else "per-update lines and digests"
        first = self.resumed + 1
        timed = max(1, self.args.updates - self.resumed - 1)
        print(f"# {timed} updates in {seconds:.6f} s ({lines}, after update {first})", flush=True)
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
    """Resolve the emulated library, connect the ring, initialise model and data, resume."""
    log = R2ccLog.from_env(comm.rank, env)
    library = resolve_library(env, log)
    nics = local_nics(args.nic_addrs, env)
    freeze = FreezeHook.parse(env.get("R2B_TEST_FREEZE"))
    transport = RingTransport(
        transport_config(comm, library, nics, env, log, freeze), sleeping_allgather(comm)
    )

    def rebuild(new_comm: Any) -> RingTransport:
        # The freeze hook names a world rank: a rebuilt ring renumbers, so it goes without.
        cfg = transport_config(new_comm, library, nics, env, log, None)
        return RingTransport(cfg, sleeping_allgather(new_comm))

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
    trainer = Trainer(
        comm, args, library, algo, model, stream, corrupt, [], node_name(comm.rank, env),
        rebuild, tinylm.Adam(args.lr),
    )  # fmt: skip
    if args.checkpoint_dir is not None:
        resume(trainer, args.checkpoint_dir)
    return trainer


def node_name(rank: int, env: dict[str, str]) -> str:
    """This rank's node, for a shrink's drop_failed_node (each rank its own in tests)."""
    host = socket.gethostname()
    return f"{host}/rank{rank}" if env.get(NODE_PER_RANK_VAR, "").strip() == "1" else host


@dataclass(frozen=True)
class ResumePoint:
    """What rank 0 found in the checkpoint directory, broadcast to every rank."""

    attempt: int
    loaded: checkpoint.Loaded[checkpoint.TrainState] | None
    error: str = ""


def find_resume_point(directory: Path, ranks: int) -> ResumePoint:
    """Rank 0: count this start and load the newest checkpoint that verifies."""
    attempt = checkpoint.next_attempt(directory)
    try:
        loaded = checkpoint.load_newest(directory, checkpoint.read)
    except checkpoint.CheckpointError as exc:
        return ResumePoint(attempt, None, f"--checkpoint-dir {directory}: {exc}")
    if loaded is not None and loaded.state.ranks != ranks:
        error = (
            f"{loaded.path}: written by {loaded.state.ranks} ranks, this job has {ranks}: "
            "restart it with as many ranks (or another --checkpoint-dir)"
        )
        return ResumePoint(attempt, None, error)
    return ResumePoint(attempt, loaded)


def resume(trainer: Trainer, directory: Path) -> None:
    """Every rank takes the newest checkpoint's state (rank 0 reads it and broadcasts it)."""
    comm = trainer.comm
    found = find_resume_point(directory, comm.size) if comm.rank == 0 else None
    point: ResumePoint = comm.bcast(found, root=0)
    if point.error:
        raise UsageError(point.error)
    if point.loaded is not None:
        trainer.restore(point.loaded.state)
    if comm.rank != 0:
        return
    for skipped in point.loaded.skipped if point.loaded else ():
        print(f"{PROGRAM}: skipped a damaged checkpoint: {skipped}", file=sys.stderr, flush=True)
    if point.loaded is not None or point.attempt > 1:
        path = str(point.loaded.path) if point.loaded else ""
        print(TrainResume(trainer.resumed, time.time(), point.attempt, path).text(), flush=True)


def run(comm: Any, args: TrainArgs, env: dict[str, str]) -> int:
    """The job; a network failure or timeout aborts every rank, as NCCL's would (unless the
    job shrinks)."""
    trainer = setup(comm, args, env)
    host = socket.gethostname()
    try:
        trainer.train()
    except Dropped:
        return 0
    except CollectiveTimeout:
        where = f"update {trainer.done + 1}"
        if args.watchdog_s and args.watchdog_s <= args.collective_s:
            watchdog_abort(trainer, trainer.done + 1)
        abort_job(comm, EXIT_TIMEOUT, f"{host}: Test timeout ({args.timeout_s}s) {where}", where)
    except NetworkFailure as exc:
        where = f"update {trainer.done + 1}"
        reason = f"remote process exited or there was a network error / {exc}"
        abort_job(comm, EXIT_NET, f"{host}: Test NCCL failure {where} '{reason}'", where)
    except ShrinkImpossible as exc:
        if trainer.rank == 0:  # every rank reached the same verdict
            print(f"{PROGRAM}: shrink failed: {exc}", file=sys.stderr, flush=True)
        trainer.comm.Abort(EXIT_NET)
    trainer.comm.Barrier()
    trainer.algo.transport.close()
    return 0


def watchdog_abort(trainer: Trainer, update: int) -> None:
    """The watchdog gave up on `update`: rank 0 prints `#train-abort` and aborts the job (exit
    4); another rank waits a while for rank 0 to do so (its own watchdog fires too), so the
    record is printed, then aborts by itself."""
    comm, waited = trainer.comm, float(trainer.args.watchdog_s)
    reason = f"update {update}'s collective did not complete in {waited:g} s"
    if comm.rank == 0:
        print(TrainAbort(update, time.time(), waited, reason).text(), flush=True)
        print(f"{PROGRAM}: watchdog: {reason}; the job exits", file=sys.stderr, flush=True)
        comm.Abort(EXIT_TIMEOUT)
    time.sleep(max(ABORT_GRACE_S, waited))
    print(f"{PROGRAM}: watchdog (rank {comm.rank}): {reason}", file=sys.stderr, flush=True)
    comm.Abort(EXIT_TIMEOUT)


def main(argv: list[str] | None = None) -> int:
    """Entry point: ``python -m r2bench.workloads.train_emulated [flags]``."""
    return mpi_main(PROGRAM, parse_args, run, argv)


if __name__ == "__main__":
    sys.exit(main())
