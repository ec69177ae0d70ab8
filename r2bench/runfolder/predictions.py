"""The predictions a sweep registered before its first run: `predictions.json` (where the file
was, its SHA-256, when) and `predictions.registered.yaml` (a copy of the bytes hashed), in the
sweep folder. Written once: a resumed sweep keeps the first record, so the report scores what
was registered and says whether the file at its place changed since.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from r2bench.config.predictions import sha256_of
from r2bench.safeio import JSON_RECORD_LIMIT, InputRefused, atomic_write, read_bytes_bounded

RECORD = "predictions.json"
COPY = "predictions.registered.yaml"
MAX_BYTES = 1 << 20
"""A predictions file is a page of YAML: refuse one larger than a megabyte."""


class PredictionsRecord(BaseModel):
    """`predictions.json`."""

    model_config = ConfigDict(frozen=True)

    path: str
    """The file as the experiment named it, resolved (where the report looks again)."""
    sha256: str
    registered_at: str
    """UTC, ISO 8601: before the sweep's first run."""


@dataclass(frozen=True)
class Registered:
    """What the sweep folder holds of the predictions, and how the file stands now."""

    record: PredictionsRecord
    copy: Path
    now_sha256: str | None
    """The SHA-256 of the file at `record.path` now (None: gone or unreadable)."""

    @property
    def changed(self) -> bool:
        """Whether the file at its place is no longer the one registered."""
        return self.now_sha256 != self.record.sha256


def register(sweep_dir: Path, path: Path) -> tuple[PredictionsRecord, bool]:
    """Record the predictions file `path` in the sweep folder unless one is recorded already;
    returns the record in force and whether it was written now."""
    existing = read_record(sweep_dir)
    if existing is not None:
        return existing, False
    data = read_bytes_bounded(path, MAX_BYTES, "a predictions file")
    record = PredictionsRecord(
        path=str(path.resolve()),
        sha256=sha256_of(data),
        registered_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
    )
    sweep_dir.mkdir(parents=True, exist_ok=True)
    atomic_write(sweep_dir / COPY, data, root=sweep_dir)
    atomic_write(sweep_dir / RECORD, record.model_dump_json(indent=2) + "\n", root=sweep_dir)
    return record, True


def read_record(sweep_dir: Path) -> PredictionsRecord | None:
    """The sweep's predictions record (None: it registered none, or the record is unreadable)."""
    path = sweep_dir / RECORD
    if not path.is_file():
        return None
    try:
        data = json.loads(read_bytes_bounded(path, JSON_RECORD_LIMIT, "a predictions record"))
        return PredictionsRecord.model_validate(data)
    except (OSError, InputRefused, ValueError):
        return None


def registered(sweep_dir: Path) -> Registered | None:
    """The registered predictions and the file's state now (None: none registered)."""
    record = read_record(sweep_dir)
    copy = sweep_dir / COPY
    if record is None or not copy.is_file():
        return None
    try:
        now: str | None = sha256_of(read_bytes_bounded(Path(record.path), MAX_BYTES, "a file"))
    except (OSError, InputRefused):
        now = None
    return Registered(record, copy, now)
