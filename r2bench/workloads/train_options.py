"""The PyTorch training workload's pure parts (no torch): its flags, the job's ranks and rendezvous
address from the launcher's environment, the learning-rate schedule, the DDP bucket, the loss
figures and the `#train-end` line. `r2bench.workloads.train_torch` is the entry,
`r2bench.workloads.train_torch_job` the torch side; both import this module.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import math
import socket
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from r2bench.workloads.gpt import GptShape, preset
from r2bench.workloads.train_format import END_TAG, TrainEnd

PROGRAM = "train_torch"
# The same codes as r2bench.workloads.ring_allreduce (a unit test holds them in step).
EXIT_NET, EXIT_TIMEOUT, EXIT_USAGE = 3, 4, 6
DTYPES = ("float32", "bf16", "fp16")
CUBLAS_WORKSPACE = ":4096:8"
"""cuBLAS's deterministic workspace setting (needed with deterministic algorithms)."""
FINAL_LOSS_UPDATES = 10
WARMUP_UPDATES = 50
MIN_LR_SHARE = 0.1
GRAD_CLIP = 1.0
WEIGHT_DECAY = 0.1
DEFAULT_TIMEOUT_S = 600


class UsageError(ValueError):
    """A flag or launch setting the job cannot take."""


@dataclass(frozen=True)
class Options:
    """The parsed command line."""

    model: str
    shape: GptShape
    updates: int
    batch: int
    seq_len: int
    seed: int
    lr: float
    dtype: str
    digest_every: int
    bucket_mb: int | None
    data: Path | None
    log: bool
    timeout_s: int
    checkpoint_dir: Path | None = None
    checkpoint_every: int = 0
    watchdog_s: int = 0


@dataclass(frozen=True)
class Ranks:
    """This process's place in the job."""

    rank: int
    world: int
    local: int


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # argparse would exit 2; usage errors exit 6
        raise UsageError(message)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog=f"python -m r2bench.workloads.{PROGRAM}", allow_abbrev=False)
    p.add_argument("--model", required=True, help="gpt2-124m | gpt2-6l | gpt2-tiny")
    p.add_argument("--updates", type=int, required=True, help="optimizer updates")
    p.add_argument("--batch", type=int, required=True, help="sequences per rank per update")
    p.add_argument("--seq-len", type=int, required=True, help="tokens per sequence")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--lr", type=float, required=True, help="peak learning rate")
    p.add_argument("--dtype", default="float32", help="float32 | bf16 | fp16 (autocast)")
    p.add_argument("--digest-every", type=int, default=10, help="0: no parameter digests")
    p.add_argument("--bucket-mb", type=int, default=None, help="DDP bucket; default: one bucket")
    p.add_argument("--data", type=Path, default=None, help="uint16 token file (default synthetic)")
    p.add_argument("--no-log", action="store_true", help="no #train lines: the cost of logging")
    p.add_argument("--timeout-s", type=int, default=DEFAULT_TIMEOUT_S, help="collective timeout")
    p.add_argument("--checkpoint-dir", type=Path, default=None, help="restart: checkpoints here")
    p.add_argument("--checkpoint-every", type=int, default=0, help="restart: updates between")
    p.add_argument("--watchdog-s", type=int, default=0, help="give up on a stalled update (exit 4)")
    return p


def parse_options(argv: Sequence[str]) -> Options:
    """The options of `argv`; UsageError naming the flag and the fix otherwise."""
    args = _parser().parse_args(list(argv))
    try:
        shape = preset(args.model)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    _require(args.updates >= 1, f"--updates {args.updates}: give at least 1")
    _require(args.batch >= 1, f"--batch {args.batch}: give at least 1")
    _require(
        2 <= args.seq_len <= shape.block,
        f"--seq-len {args.seq_len}: {args.model} takes 2 to {shape.block} tokens",
    )
    _require(math.isfinite(args.lr) and args.lr > 0, f"--lr {args.lr}: give a positive number")
    _require(args.dtype in DTYPES, f"--dtype {args.dtype}: use one of {', '.join(DTYPES)}")
    _require(args.digest_every >= 0, f"--digest-every {args.digest_every}: give 0 or more")
    _require(
        args.bucket_mb is None or args.bucket_mb >= 1, f"--bucket-mb {args.bucket_mb}: give >= 1"
    )
    _require(args.timeout_s >= 1, f"--timeout-s {args.timeout_s}: give at least 1")
    problem = recovery_flag_problem(args.checkpoint_dir, args.checkpoint_every, args.watchdog_s)
    _require(problem is None, problem or "")
    return Options(
        model=args.model,
        shape=shape,
        updates=args.updates,
        batch=args.batch,
        seq_len=args.seq_len,
        seed=args.seed,
        lr=args.lr,
        dtype=args.dtype,
        digest_every=args.digest_every,
        bucket_mb=args.bucket_mb,
        data=args.data,
        log=not args.no_log,
        timeout_s=args.timeout_s,
        checkpoint_dir=args.checkpoint_dir,
        checkpoint_every=args.checkpoint_every,
        watchdog_s=args.watchdog_s,
    )


def recovery_flag_problem(
    directory: Path | None, every: int, watchdog_s: int, on_failure: str = "exit"
) -> str | None:
    """What is wrong with a training job's recovery flags, naming the flag and the fix; None
    when they agree with each other."""
    if watchdog_s < 0:
        return f"--watchdog-s {watchdog_s}: must not be negative (0: no watchdog)"
    if (directory is None) != (every == 0):
        return "--checkpoint-dir and --checkpoint-every go together: give both (K >= 1) or neither"
    if every < 0:
        return f"--checkpoint-every {every}: must be at least 1"
    if on_failure == "shrink" and watchdog_s == 0:
        return (
            "--on-failure shrink needs --watchdog-s S: without it a rank that sees no failure "
            "waits forever for the others to agree"
        )
    return None


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise UsageError(message)


def ranks_from_env(env: Mapping[str, str]) -> Ranks:
    """Rank, world size and local rank from Open MPI's variables, else torchrun's."""
    for rank_var, world_var, local_var in (
        ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"),
        ("RANK", "WORLD_SIZE", "LOCAL_RANK"),
    ):
        if rank_var in env and world_var in env:
            try:
                ranks = Ranks(int(env[rank_var]), int(env[world_var]), int(env.get(local_var, "0")))
            except ValueError:
                raise UsageError(
                    f"{rank_var}={env[rank_var]!r} {world_var}={env[world_var]!r}: not whole "
                    "numbers; launch with mpirun or torchrun"
                ) from None
            if not 0 <= ranks.rank < ranks.world or ranks.local < 0:
                raise UsageError(f"{rank_var}={ranks.rank} is outside {world_var}={ranks.world}")
            return ranks
    raise UsageError(
        "no rank variables (OMPI_COMM_WORLD_RANK/SIZE, or RANK/WORLD_SIZE): launch with mpirun"
    )


def rendezvous_from_env(env: Mapping[str, str]) -> tuple[str, int] | None:
    """MASTER_ADDR and MASTER_PORT when both are set (None: rank 0 picks and broadcasts)."""
    addr, port = env.get("MASTER_ADDR", ""), env.get("MASTER_PORT", "")
    if not addr or not port:
        return None
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise UsageError(f"MASTER_PORT={port!r} is not a TCP port (1-65535)")
    return addr, int(port)


def interface_names(env: Mapping[str, str]) -> list[str]:
    """The interfaces named for Gloo or NCCL sockets (`GLOO_SOCKET_IFNAME`, else
    `NCCL_SOCKET_IFNAME`; NCCL's `^` exclusion and `=` exact-match prefixes dropped)."""
    text = env.get("GLOO_SOCKET_IFNAME") or env.get("NCCL_SOCKET_IFNAME") or ""
    if text.startswith("^"):
        return []  # an exclusion list names no interface to use
    return [name.lstrip("=").strip() for name in text.split(",") if name.lstrip("=").strip()]


def advertised_address(env: Mapping[str, str]) -> str:
    """Where the other ranks reach rank 0's store: the IPv4 address of the first socket
    interface named (GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME) that this host has, else its host
    name (a namespace node's name resolves nowhere; its data NIC's address does)."""
    for name in interface_names(env):
        address = interface_ipv4(name)
        if address:
            return address
    return socket.gethostname()


def interface_ipv4(name: str) -> str | None:
    """The IPv4 address of interface `name` (SIOCGIFADDR), or None."""
    siocgifaddr = 0x8915
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            packed = fcntl.ioctl(s.fileno(), siocgifaddr, struct.pack("256s", name[:15].encode()))
        except OSError:
            return None
    return socket.inet_ntoa(packed[20:24])


def interface_down(addr: str) -> bool:
    """Whether the interface that holds IPv4 `addr` reports `operstate` down (False when no
    interface of this network namespace holds it): what a port event tells a real job."""
    for _, name in socket.if_nameindex():
        if interface_ipv4(name) == addr:
            try:
                with open(f"/sys/class/net/{name}/operstate", encoding="ascii") as state:
                    return state.read().strip() == "down"
            except OSError:
                return False
    return False


def learning_rate(update: int, updates: int, peak: float) -> float:
    """Linear warm-up over min(50, updates/10) updates, then cosine down to a tenth of `peak` at
    the last update (nanoGPT's schedule; R-2CCL's training test uses 6e-4 -> 6e-5, warm-up 50)."""
    warmup = max(1, min(WARMUP_UPDATES, updates // 10))
    if update <= warmup:
        return peak * update / warmup
    progress = (update - warmup) / max(1, updates - warmup)
    floor = peak * MIN_LR_SHARE
    return floor + 0.5 * (1.0 + math.cos(math.pi * progress)) * (peak - floor)


def bucket_cap_mb(gradient_bytes: int, bucket_mb: int | None) -> int:
    """DDP's bucket_cap_mb: the flag's, or one bucket holding every gradient (R-2CCL's training
    test: one AllReduce per update)."""
    return bucket_mb if bucket_mb is not None else gradient_bytes // 2**20 + 1


def mean_over_ranks(values: Sequence[float]) -> float:
    """The mean of one value per rank, summed exactly (the same bits whatever the order)."""
    return math.fsum(values) / len(values)


def final_loss(losses: Sequence[float]) -> float | None:
    """The mean of the last ten updates' losses (None before any update)."""
    tail = list(losses[-FINAL_LOSS_UPDATES:])
    return math.fsum(tail) / len(tail) if tail else None


def end_text(end: TrainEnd, mean_step_s: float | None) -> str:
    """The `#train-end` line with `mean_step_s` (readers ignore keys they do not know)."""
    doc = json.loads(end.text().removeprefix(END_TAG).strip())
    doc["mean_step_s"] = mean_step_s if mean_step_s is None else round(mean_step_s, 6)
    return f"{END_TAG} {json.dumps(doc)}"
