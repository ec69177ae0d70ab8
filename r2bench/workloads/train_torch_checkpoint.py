"""The PyTorch job's checkpoints, for the restart strategy (imports torch).

Rank 0 writes the model, AdamW's state and the grad scaler after every K-th update, through the
same atomic path as the emulated job (:mod:`r2bench.workloads.checkpoint`: temporary file, fsync,
rename, the newest two kept, the newest written recorded). At start rank 0 counts the start and
finds the newest checkpoint that loads; it sends what it found to every rank over Gloo, and every
rank loads that file itself: the checkpoint directory must be one every rank can read (shared
storage, as training clusters use; one host's namespace nodes share it). The data stream is a
function of the update number (:mod:`r2bench.workloads.train_data`), so the resumed job's losses
from the next update on are those of an uninterrupted run.
"""

from __future__ import annotations

import os
import pickle
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from r2bench.workloads import checkpoint
from r2bench.workloads.train_format import TrainCheckpoint, TrainResume

SUFFIX = ".pt"


@dataclass(frozen=True)
class ResumePoint:
    """What rank 0 found: the start's number and the checkpoint to load ("" for none), or why
    the job cannot start."""

    attempt: int
    path: str = ""
    error: str = ""


@dataclass(frozen=True)
class Resumed:
    """The state every rank loaded, and the record rank 0 prints (None on a first start)."""

    update: int
    losses: list[float]
    record: TrainResume | None


def save(directory: Path, update: int, job: Any, losses: list[float]) -> TrainCheckpoint:
    """Rank 0: write the state after `update`; the `#train-checkpoint` record."""
    started = time.perf_counter()
    target = checkpoint.checkpoint_path(directory, update, SUFFIX)
    temp = checkpoint.temporary_path(target)
    state = {
        "update": update,
        "ranks": job.ranks.world,
        "model": job.model.state_dict(),
        "optimizer": job.optimizer.state_dict(),
        "scaler": job.scaler.state_dict(),
        "losses": list(losses),
    }
    directory.mkdir(parents=True, exist_ok=True)
    with temp.open("wb") as out:
        torch.save(state, out)
        out.flush()
        os.fsync(out.fileno())
    checkpoint.publish(temp, target)
    return TrainCheckpoint(update, time.time(), time.perf_counter() - started, str(target))


def read(path: Path) -> dict[str, Any]:
    """One checkpoint's state on the CPU; ValueError names the file and what is wrong."""
    try:
        state: dict[str, Any] = torch.load(path, map_location="cpu", weights_only=True)
    except (OSError, EOFError, RuntimeError, ValueError, KeyError, pickle.UnpicklingError,
            zipfile.BadZipFile) as exc:  # fmt: skip
        raise ValueError(f"{path}: not a readable checkpoint ({exc})") from None
    if not isinstance(state, dict) or "update" not in state or "model" not in state:
        raise ValueError(f"{path}: not a checkpoint of this job (no update or model)")
    return state


def find(directory: Path) -> ResumePoint:
    """Rank 0: count this start and find the newest checkpoint that loads."""
    attempt = checkpoint.next_attempt(directory)
    try:
        loaded = checkpoint.load_newest(directory, read)
    except checkpoint.CheckpointError as exc:
        return ResumePoint(attempt, error=f"--checkpoint-dir {directory}: {exc}")
    return ResumePoint(attempt, str(loaded.path) if loaded else "")


def resume(job: Any, directory: Path) -> Resumed:
    """Every rank takes the newest checkpoint's state (ValueError: the job cannot start)."""
    found = [find(directory) if job.ranks.rank == 0 else None]
    dist.broadcast_object_list(found, src=0, group=job.gloo)
    point = found[0]
    assert isinstance(point, ResumePoint)
    if point.error:
        raise ValueError(point.error)
    if not point.path:
        first = TrainResume(0, time.time(), point.attempt) if point.attempt > 1 else None
        return Resumed(0, [], first)
    state = read(Path(point.path))
    if state["ranks"] != job.ranks.world:
        raise ValueError(
            f"{point.path}: written by {state['ranks']} ranks, this job has {job.ranks.world}: "
            "restart it with as many ranks (or another --checkpoint-dir)"
        )
    job.model.load_state_dict(state["model"])
    job.optimizer.load_state_dict(state["optimizer"])
    job.scaler.load_state_dict(state["scaler"])
    update = int(state["update"])
    record = TrainResume(update, time.time(), point.attempt, point.path)
    return Resumed(update, [float(x) for x in state["losses"]], record)
