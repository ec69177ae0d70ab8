"""The PyTorch side of the training workload (imports torch): process groups, DDP, the update loop
and its metrics. `r2bench.workloads.train_torch` parses the flags and calls :func:`run`.

Two process groups: NCCL (the library under test) carries the gradients through DDP; Gloo carries
every metric (step times, losses, digests), so the measurements never ride the library they
measure. Deterministic throughout (seeds, deterministic algorithms, TF32 off, the cuBLAS
workspace set before CUDA starts): two fault-free runs on the same testbed and transport give the
same losses, gradient norms and parameters bit for bit.
"""

from __future__ import annotations

import hashlib
import os
import random
import socket
import sys
import time
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, NoReturn

import numpy as np
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from r2bench.workloads import servedlib, train_torch_checkpoint
from r2bench.workloads.gpt_model import Gpt, optimizer_groups
from r2bench.workloads.train_data import BatchSpec, DataError, token_source
from r2bench.workloads.train_format import TrainEnd, TrainStart, UpdateLine
from r2bench.workloads.train_options import (
    EXIT_NET,
    EXIT_USAGE,
    FINAL_LOSS_UPDATES,
    GRAD_CLIP,
    PROGRAM,
    WEIGHT_DECAY,
    Options,
    Ranks,
    advertised_address,
    bucket_cap_mb,
    end_text,
    final_loss,
    learning_rate,
    mean_over_ranks,
)
from r2bench.workloads.watchdog import Watchdog

AUTOCAST = {"bf16": torch.bfloat16, "fp16": torch.float16}
# Words of the errors PyTorch raises when a collective fails without a DistError of its own.
COLLECTIVE_WORDS = ("NCCL", "nccl", "Gloo", "gloo", "ProcessGroup", "Watchdog", "Connection")


@dataclass
class Job:
    """Everything one rank trains with."""

    opts: Options
    ranks: Ranks
    device: torch.device
    model: Gpt
    ddp: DistributedDataParallel
    optimizer: torch.optim.Optimizer
    scaler: torch.amp.GradScaler
    gloo: Any
    gradient_bytes: int


class CollectiveFailure(Exception):
    """A collective (NCCL, or Gloo's metrics) failed during an update."""


def run(opts: Options, ranks: Ranks, rendezvous: tuple[str, int] | None) -> int:
    """Train; the process's exit code (a failed collective exits at once, see `_fail`)."""
    deterministic(opts.seed)
    device = torch.device("cuda", ranks.local % max(1, torch.cuda.device_count()))
    torch.cuda.set_device(device)
    addr, port = rendezvous or mpi_rendezvous(ranks)
    timeout = timedelta(seconds=opts.timeout_s)
    dist.init_process_group(
        "nccl",
        init_method=f"tcp://{addr}:{port}",
        rank=ranks.rank,
        world_size=ranks.world,
        timeout=timeout,
        device_id=device,
    )
    gloo = dist.new_group(backend="gloo", timeout=timeout)
    try:
        data = token_source(
            BatchSpec(opts.batch, opts.seq_len, opts.shape.vocab),
            opts.seed,
            opts.data,
            ranks.rank,
            ranks.world,
        )
        eval_tokens = data.eval_batch()
        job = build_job(opts, ranks, device, gloo)
        served = identify_library(job)
        resumed = resume(job)
        if ranks.rank == 0:
            _say(start_line(job, served).text())
            if resumed.record is not None:
                _say(resumed.record.text())
        losses, steps = train(job, data, resumed)
        eval_loss = evaluate(job, eval_tokens)
    except (DataError, ValueError) as exc:  # bad data, or no checkpoint to resume from
        _fail(EXIT_USAGE, f"{PROGRAM}: rank {ranks.rank}: {exc}")
    except CollectiveFailure as exc:
        _fail(EXIT_NET, f"{PROGRAM}: rank {ranks.rank}: {exc}")
    if ranks.rank == 0:
        mean_step = sum(steps) / len(steps) if steps else None
        _say(end_text(end_line(opts, losses, eval_loss), mean_step))
    dist.destroy_process_group()
    return 0


def deterministic(seed: int) -> None:
    """Seeds and deterministic kernels (CUBLAS_WORKSPACE_CONFIG was set before CUDA started)."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.cuda.manual_seed_all(seed)
    torch.use_deterministic_algorithms(True)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False


def mpi_rendezvous(ranks: Ranks) -> tuple[str, int]:
    """Rank 0's host name and a free port on it, sent to every rank with MPI (mpi4py)."""
    try:
        from mpi4py import MPI
    except ImportError:
        _fail(EXIT_USAGE, f"{PROGRAM}: set MASTER_ADDR and MASTER_PORT, or install mpi4py")
    chosen: tuple[str, int] | None = None
    if ranks.rank == 0:
        with socket.socket() as probe:  # the port is free now; the store binds it a moment later
            probe.bind(("", 0))
            chosen = (advertised_address(os.environ), probe.getsockname()[1])
    found: tuple[str, int] = MPI.COMM_WORLD.bcast(chosen, root=0)
    return found


def build_job(opts: Options, ranks: Ranks, device: torch.device, gloo: Any) -> Job:
    """The model (the same seeded initialisation on every rank), DDP, AdamW and the scaler."""
    model = Gpt(opts.shape).to(device)
    gradient_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    try:
        ddp = DistributedDataParallel(
            model,
            device_ids=[device.index],
            bucket_cap_mb=bucket_cap_mb(gradient_bytes, opts.bucket_mb),
            broadcast_buffers=False,  # the causal mask is a constant: nothing to send
        )
        _synchronise()  # DDP's parameter broadcast is the first NCCL collective
    except RuntimeError as exc:
        if not is_collective_error(exc):
            raise
        raise CollectiveFailure(f"collective failed while starting DDP: {exc}") from exc
    optimizer = torch.optim.AdamW(
        optimizer_groups(model, WEIGHT_DECAY), lr=opts.lr, betas=(0.9, 0.95), fused=True
    )
    scaler = torch.amp.GradScaler("cuda", enabled=opts.dtype == "fp16")
    return Job(opts, ranks, device, model, ddp, optimizer, scaler, gloo, gradient_bytes)


def identify_library(job: Job) -> servedlib.ServedLibrary:
    """The NCCL that served DDP's first collective; exit 6 if it is not R2B_EXPECT_NCCL's."""
    served = servedlib.detect(os.environ)
    problem = servedlib.check_expected(served, os.environ)
    if problem is not None:
        _fail(EXIT_USAGE, f"{PROGRAM}: rank {job.ranks.rank}: {problem}")
    return served


def start_line(job: Job, served: servedlib.ServedLibrary) -> TrainStart:
    """The `#train-start` record."""
    opts = job.opts
    return TrainStart(
        workload=PROGRAM,
        model=opts.model,
        parameters=sum(p.numel() for p in job.model.parameters()),
        ranks=job.ranks.world,
        seed=opts.seed,
        updates=opts.updates,
        batch=opts.batch,
        seq_len=opts.seq_len,
        allreduce_bytes=job.gradient_bytes,
        library=served.name,
        library_path=served.path,
        dtype=opts.dtype,
        digest_every=opts.digest_every if opts.log else 0,
        stubbed=",".join(served.stubbed),
    )


def resume(job: Job) -> train_torch_checkpoint.Resumed:
    """The state to go on from: the newest checkpoint under --checkpoint-dir, or none."""
    if job.opts.checkpoint_dir is None:
        return train_torch_checkpoint.Resumed(0, [], None)
    return train_torch_checkpoint.resume(job, job.opts.checkpoint_dir)


def train(
    job: Job, data: Any, resumed: train_torch_checkpoint.Resumed
) -> tuple[list[float], list[float]]:
    """Every update after the resumed one; rank 0 prints a `#train` line per update when
    logging, and writes a checkpoint every --checkpoint-every updates. Returns the losses (mean
    over ranks) and step times (logging: the slowest rank's; else rank 0's)."""
    opts = job.opts
    losses: list[float] = list(resumed.losses)
    steps: list[float] = []
    pending: list[torch.Tensor] = []  # without logging, losses stay on the GPU until the end
    looped = time.perf_counter()  # reset after the first update, which sets up connections
    watchdog = Watchdog(opts.watchdog_s, job.ranks.rank).start() if opts.watchdog_s else None
    for update in range(resumed.update + 1, opts.updates + 1):
        tokens = torch.from_numpy(data.batch(job.ranks.rank, update))
        if watchdog is not None:
            watchdog.arm(update)
        try:
            start = time.time()
            loss, norm = step(job, tokens, learning_rate(update, opts.updates, opts.lr))
            _synchronise()
            end = time.time()
            if opts.log:
                line = update_line(job, update, start, end, loss, norm)
                losses.append(line.loss if line.loss is not None else float("nan"))
                steps.append(line.step_s)
            else:
                pending.append(loss.detach())
                steps.append(end - start)
            if update == resumed.update + 1:
                looped = time.perf_counter()
        except RuntimeError as exc:
            if not is_collective_error(exc):
                raise
            raise CollectiveFailure(f"collective failed during update {update}: {exc}") from exc
        if watchdog is not None:
            watchdog.disarm()
        save_checkpoint(job, update, losses)
    if watchdog is not None:
        watchdog.stop()
    if job.ranks.rank == 0:  # the loop's wall time: what logging costs is measured on it
        lines = "per-update lines and digests" if opts.log else "no per-update lines"
        first = resumed.update + 1
        timed = max(1, opts.updates - first)
        seconds = time.perf_counter() - looped
        _say(f"# {timed} updates in {seconds:.6f} s ({lines}, after update {first})")
    if not opts.log:
        losses = tail_losses(job, pending)
    return losses, steps


def save_checkpoint(job: Job, update: int, losses: list[float]) -> None:
    """Rank 0 writes the state after `update` when it is a checkpoint's update."""
    opts = job.opts
    if opts.checkpoint_dir is None or job.ranks.rank != 0 or update % opts.checkpoint_every:
        return
    _say(train_torch_checkpoint.save(opts.checkpoint_dir, update, job, losses).text())


def is_collective_error(exc: RuntimeError) -> bool:
    """Whether `exc` is a failed collective (NCCL's or Gloo's), not another runtime error (an
    out-of-memory, a bug): only the former exits 3."""
    return isinstance(exc, dist.DistError) or any(word in str(exc) for word in COLLECTIVE_WORDS)


def step(job: Job, tokens: torch.Tensor, lr: float) -> tuple[torch.Tensor, torch.Tensor]:
    """One optimizer update; returns the float32 loss and the float64 gradient norm (tensors on
    the GPU: reading them waits for the update)."""
    for group in job.optimizer.param_groups:
        group["lr"] = lr
    batch = tokens.to(job.device)
    with _autocast(job.opts.dtype):
        loss = job.ddp(batch[:, :-1], batch[:, 1:])
    job.scaler.scale(loss).backward()  # DDP's gradient AllReduce runs here
    job.scaler.unscale_(job.optimizer)
    norm = gradient_norm(job.model)
    # Clip at 1 (nanoGPT), on the GPU: no wait for the norm's value.
    scale = torch.clamp(GRAD_CLIP / (norm + 1e-6), max=1.0).float()
    for param in job.model.parameters():
        if param.grad is not None:
            param.grad.mul_(scale)
    job.scaler.step(job.optimizer)
    job.scaler.update()
    job.optimizer.zero_grad(set_to_none=True)
    return loss.detach().float(), norm


def gradient_norm(model: torch.nn.Module) -> torch.Tensor:
    """The L2 norm of the reduced gradients in float64, parameter by parameter in a fixed order
    (deterministic kernels): the same bits in two runs that reduced the same gradients."""
    parts = [
        torch.linalg.vector_norm(p.grad, dtype=torch.float64)
        for p in model.parameters()
        if p.grad is not None
    ]
    return torch.linalg.vector_norm(torch.stack(parts))


def update_line(
    job: Job, update: int, start: float, end: float, loss: torch.Tensor, norm: torch.Tensor
) -> UpdateLine:
    """Gather this update's figures over Gloo and, on rank 0, print its `#train` line."""
    opts = job.opts
    mine = torch.tensor([float(loss.item()), end - start], dtype=torch.float64)
    every = _all_gather(job, mine)
    digest, agree = None, None
    if opts.digest_every and update % opts.digest_every == 0:
        digest, agree = parameter_digest(job)
    step_s = max(float(row[1]) for row in every)
    line = UpdateLine(
        update=update,
        start=start,
        end=end,
        step_s=step_s,
        loss=mean_over_ranks([float(row[0]) for row in every]),
        tokens_per_s=opts.batch * opts.seq_len * job.ranks.world / step_s if step_s > 0 else 0.0,
        grad_norm=float(norm.item()),
        allreduce_bytes=job.gradient_bytes,
        digest=digest,
        digests_agree=agree,
    )
    if job.ranks.rank == 0:
        _say(line.text())
    return line


def parameter_digest(job: Job) -> tuple[str, bool]:
    """This rank's parameter digest and whether every rank's is the same.

    The digest is the SHA-256 of one 64-bit fingerprint per parameter tensor, in order, each
    computed on the GPU: the tensor's 32-bit words (bytes, for other widths) times odd
    position weights (2i + 1), summed in int64 (wrapping). A sum of integers does not depend on
    the order a GPU adds them in, and a change of any one word changes it (an odd weight times
    a nonzero change is nonzero modulo 2**64). Hashing the parameters' bytes on the CPU instead
    cost 0.6 s per digest for GPT-2 6 layers (328 MB), 13 times a 51 ms update on 4 H100s."""
    fingerprints = torch.stack([_fingerprint(p.detach()) for p in job.model.parameters()])
    sha = hashlib.sha256(fingerprints.cpu().numpy().tobytes())
    mine = torch.frombuffer(bytearray(sha.digest()), dtype=torch.uint8)
    every = _all_gather(job, mine)
    return sha.hexdigest(), all(bool(torch.equal(row, every[0])) for row in every)


def _fingerprint(param: torch.Tensor) -> torch.Tensor:
    """One parameter's 64-bit position-weighted word sum (see `parameter_digest`)."""
    flat = param.contiguous().view(-1)
    words = flat.view(torch.int32) if flat.element_size() == 4 else flat.view(torch.uint8)
    weights = torch.arange(words.numel(), device=words.device, dtype=torch.int64) * 2 + 1
    return (words.to(torch.int64) * weights).sum(dtype=torch.int64)


def tail_losses(job: Job, pending: list[torch.Tensor]) -> list[float]:
    """The last updates' losses, each the mean over ranks (gathered once, at the end)."""
    tail = pending[-FINAL_LOSS_UPDATES:]
    if not tail:
        return []
    mine = torch.stack(tail).to(torch.float64).cpu()
    every = _all_gather(job, mine)
    return [mean_over_ranks([float(row[i]) for row in every]) for i in range(len(tail))]


def evaluate(job: Job, eval_tokens: np.ndarray) -> float:
    """The loss on the held-out batch (the same on every rank; rank 0's is reported)."""
    batch = torch.from_numpy(eval_tokens).to(job.device)
    job.model.eval()
    with torch.no_grad(), _autocast(job.opts.dtype):
        loss = job.model(batch[:, :-1], batch[:, 1:])
    job.model.train()
    return float(loss.float().item())


def end_line(opts: Options, losses: list[float], eval_loss: float) -> TrainEnd:
    """The `#train-end` record."""
    return TrainEnd(updates=opts.updates, final_loss=final_loss(losses), eval_loss=eval_loss)


def _all_gather(job: Job, mine: torch.Tensor) -> list[torch.Tensor]:
    """Every rank's `mine` (CPU tensors), over the Gloo group, in rank order."""
    every = [torch.empty_like(mine) for _ in range(job.ranks.world)]
    dist.all_gather(every, mine, group=job.gloo)
    return every


def _autocast(dtype: str) -> AbstractContextManager[Any]:
    if dtype in AUTOCAST:
        autocast: AbstractContextManager[Any] = torch.autocast("cuda", dtype=AUTOCAST[dtype])
        return autocast
    return nullcontext()


def _synchronise() -> None:
    torch.cuda.synchronize()


def _say(text: str) -> None:
    print(text, flush=True)


def _fail(code: int, message: str) -> NoReturn:
    """Say why on stderr and leave at once: a communicator in error can hang the interpreter's
    exit (NCCL's teardown waits on its peers), and mpirun ends the other ranks."""
    print(message, file=sys.stderr, flush=True)
    sys.stdout.flush()
    os._exit(code)
