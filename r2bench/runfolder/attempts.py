"""A run folder's attempts.jsonl: each start of a restart run's job, launched and ended, one
JSON object a line on the controller clock. The sweep writes it (`sweep.restarts.AttemptLog`);
the outcome and the cost analysis read it back: one format, defined here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError


class AttemptEvent(BaseModel):
    """One line of attempts.jsonl: an attempt launched, or ended (with its exit code)."""

    model_config = ConfigDict(frozen=True)

    attempt: int
    """1 for the first start, 2 for the first restart, ..."""
    event: Literal["launch", "end"]
    at: float
    """Controller clock (Unix seconds)."""
    exit_code: int | None = None
    timed_out: bool = False
    """The attempt ran into the harness deadline (end only)."""


def attempt_events(text: str) -> list[AttemptEvent]:
    """The events of an attempts.jsonl text, a line that is not one skipped (a sweep killed
    mid-write leaves half a line)."""
    events = []
    for line in text.splitlines():
        try:
            events.append(AttemptEvent.model_validate_json(line))
        except ValidationError:
            continue
    return events


def read_attempts(path: Path) -> list[AttemptEvent]:
    """Every line of an attempts.jsonl (none when the file is absent); a bad line raises
    ValueError naming the file and the line."""
    if not path.exists():
        return []
    events = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            events.append(AttemptEvent.model_validate_json(line))
        except ValueError as exc:
            raise ValueError(f"{path}:{number}: not an attempt record ({exc})") from exc
    return events
