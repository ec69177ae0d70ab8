"""The emulated training job's checkpoints: the whole state a restarted job needs to go on
bit-identically (parameters, Adam's moments and step, every rank's data-stream position, the
recent losses), written atomically and verified on load.

A checkpoint is one `.npz` file, `ckpt-<update, 8 digits>.npz`, in the job's checkpoint
directory (the PyTorch job writes `.pt` files the same way: :func:`publish` and
:func:`load_newest` take any reader). It is written to a hidden temporary file, flushed to disk and renamed, so a job killed
mid-write leaves no half file under the real name; it carries a SHA-256 over its contents, so a
damaged one is refused on load and the previous one is used instead (the newest
:data:`KEEP` are kept). The directory also holds the job's start counter (`attempts`), one
more at each start: a restart's `#train-resume` line says which start it is; and the update of
the newest checkpoint written (`written`), so a restart that finds the checkpoints gone fails
clearly instead of training again from update 1 as if none had been written.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

import numpy as np

KEEP = 2  # checkpoints kept: the newest, and the one to fall back to if it is damaged
ATTEMPTS_FILE = "attempts"
WRITTEN_FILE = "written"
NAME = re.compile(r"^ckpt-(\d{8})\.(npz|pt)$")
NPZ = ".npz"
ARRAYS = ("params", "adam_m", "adam_v", "meta")


class CheckpointError(RuntimeError):
    """The checkpoint directory holds checkpoints and none of them can be loaded."""


@dataclass
class TrainState:
    """What a checkpoint holds: the job's state after update `update`."""

    update: int
    params: np.ndarray
    adam_m: np.ndarray
    adam_v: np.ndarray
    adam_step: int
    streams: list[dict[str, Any]]
    """Every rank's data-stream generator state (numpy's `bit_generator.state`), rank order."""
    losses: list[float] = field(default_factory=list)
    """The recent per-update losses (the final loss averages the last ones)."""

    @property
    def ranks(self) -> int:
        """The number of ranks that wrote it (a restart must have as many)."""
        return len(self.streams)


def checkpoint_path(directory: Path, update: int, suffix: str = NPZ) -> Path:
    """The file of update `update`'s checkpoint."""
    return directory / f"ckpt-{update:08d}{suffix}"


def temporary_path(target: Path) -> Path:
    """A hidden name beside `target` to write it under before :func:`publish`."""
    return target.parent / f".{target.name}.{os.getpid()}.tmp"


def _meta(state: TrainState) -> np.ndarray:
    doc = {
        "update": state.update,
        "adam_step": state.adam_step,
        "streams": state.streams,
        "losses": state.losses,
    }
    return np.frombuffer(json.dumps(doc).encode(), np.uint8)


def _digest(arrays: dict[str, np.ndarray]) -> str:
    """SHA-256 over the arrays, in a fixed order, with their dtypes and shapes."""
    h = hashlib.sha256()
    for name in ARRAYS:
        a = np.ascontiguousarray(arrays[name])
        h.update(f"{name}:{a.dtype.str}:{a.shape};".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def save(directory: Path, state: TrainState) -> Path:
    """Write `state` atomically (temporary file, fsync, rename), drop the older checkpoints
    beyond :data:`KEEP`, and return the checkpoint's path."""
    directory.mkdir(parents=True, exist_ok=True)
    arrays = {
        "params": state.params,
        "adam_m": state.adam_m,
        "adam_v": state.adam_v,
        "meta": _meta(state),
    }
    target = checkpoint_path(directory, state.update)
    temp = temporary_path(target)
    with temp.open("wb") as out:
        digest = np.frombuffer(_digest(arrays).encode(), np.uint8)
        np.savez(
            out, params=arrays["params"], adam_m=arrays["adam_m"], adam_v=arrays["adam_v"],
            meta=arrays["meta"], sha256=digest,
        )  # fmt: skip
        out.flush()
        os.fsync(out.fileno())
    publish(temp, target)
    return target


def publish(temp: Path, target: Path) -> None:
    """Put a checkpoint written and flushed under `temp` in place as `target`, record it as the
    newest written, make both durable, and drop the older ones beyond :data:`KEEP`."""
    directory = target.parent
    os.replace(temp, target)
    _write_small(directory, WRITTEN_FILE, f"{target.name}\n")
    _sync_directory(directory)
    for old in _checkpoints(directory)[KEEP:]:
        old.unlink(missing_ok=True)


def _write_small(directory: Path, name: str, text: str) -> None:
    """Replace the small file `name` in `directory` atomically (temporary file and rename)."""
    temp = directory / f".{name}.{os.getpid()}.tmp"
    temp.write_text(text)
    os.replace(temp, directory / name)


def _read_text(path: Path) -> str:
    """What a small file holds, stripped; empty when it is absent."""
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        return ""


def _read_count(path: Path) -> int:
    """The number a small file holds; 0 when it is absent or holds none."""
    try:
        return int(_read_text(path) or "0")
    except ValueError:
        return 0


def _sync_directory(directory: Path) -> None:
    """Make the rename durable (a crash after it must not bring the old name back)."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _checkpoints(directory: Path) -> list[Path]:
    """The directory's checkpoint files, newest update first."""
    if not directory.is_dir():
        return []
    found = [p for p in directory.iterdir() if NAME.match(p.name)]
    return sorted(found, key=lambda p: p.name, reverse=True)


def read(path: Path) -> TrainState:
    """Load and verify one checkpoint; ValueError names the file and what is wrong with it."""
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {name: data[name] for name in ARRAYS}
            stored = bytes(data["sha256"]).decode()
    except (OSError, EOFError, KeyError, ValueError, zipfile.BadZipFile) as exc:
        raise ValueError(f"{path}: not a readable checkpoint ({exc})") from None
    if stored != _digest(arrays):
        raise ValueError(f"{path}: SHA-256 mismatch: the file is damaged")
    meta = json.loads(bytes(arrays["meta"]).decode())
    return TrainState(
        update=int(meta["update"]), params=arrays["params"], adam_m=arrays["adam_m"],
        adam_v=arrays["adam_v"], adam_step=int(meta["adam_step"]), streams=meta["streams"],
        losses=[float(x) for x in meta["losses"]],
    )  # fmt: skip


State = TypeVar("State")


@dataclass(frozen=True)
class Loaded(Generic[State]):
    """The newest checkpoint that verified, and the damaged ones skipped on the way."""

    state: State
    path: Path
    skipped: tuple[str, ...] = ()


def load_newest(
    directory: Path,
    reader: Callable[[Path], State] = read,  # type: ignore[assignment]
) -> Loaded[State] | None:
    """The newest checkpoint that `reader` (ValueError: damaged) loads, falling back past
    damaged ones; None when the directory holds none and never did. CheckpointError when it
    holds some and none loads, or when the newest one an earlier start wrote is gone."""
    skipped: list[str] = []
    for path in _checkpoints(directory):
        try:
            return Loaded(reader(path), path, tuple(skipped))
        except ValueError as exc:
            skipped.append(str(exc))
    if skipped:
        raise CheckpointError(
            "no checkpoint in the directory verifies: " + "; ".join(skipped)
            + " (remove the directory to start the job from update 1)"
        )  # fmt: skip
    written = _read_text(directory / WRITTEN_FILE)
    if written:
        raise CheckpointError(
            f"the checkpoint {directory / written} that an earlier start wrote is gone: a "
            "restart would train from update 1 again; restore it, or remove the directory to "
            "start afresh"
        )
    return None


def next_attempt(directory: Path) -> int:
    """Count one more start of the job in `directory` and return it (1: the first start)."""
    directory.mkdir(parents=True, exist_ok=True)
    attempt = _read_count(directory / ATTEMPTS_FILE) + 1
    _write_small(directory, ATTEMPTS_FILE, f"{attempt}\n")
    return attempt
