"""A predictions file: the outcome class expected of each cell, registered before a sweep
(pure, but for reading the file). `analysis.predictions` scores it after.

A predictions file states the outcome class (`analysis.verdict`) expected of each cell:

    experiment: campaign          # optional: the experiment it was written for
    predictions:
      - match: {library: nccl-emulated, scenario: cut}
        expect: DECLINED
        why: no failover; the IB retries run out and the job aborts
      - match: {library: r2ccl-m0}
        expect: TRANSPARENT

`match` names any of the run's dimensions (library, collective, scenario, recovery, or an
environment variable such as R2CC_MODE); a run is predicted by the first entry whose every
value equals its own. Runs without a fault are not predicted (their class is NO_FAULT). The
sweep records the file's SHA-256 (and a copy) before its first run; the report scores the copy
against the verdicts (a confusion table) and says whether the file changed since.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

from pydantic import Field

from r2bench.config.source import load_yaml
from r2bench.config.types import FreeText, Name, StrictModel
from r2bench.config.validate import validate_model

MatchValue = str | int | float | bool
ScoredName = Literal["TRANSPARENT", "DECLINED", "HUNG", "SILENT_WRONG", "OTHER", "MISSED"]
SCORED_NAMES: tuple[str, ...] = get_args(ScoredName)
"""The classes a prediction may state (`analysis.verdict.SCORED`, as text)."""


class Prediction(StrictModel):
    """One registered prediction: the cells it covers and the class expected of them."""

    match: dict[Name, MatchValue] = Field(
        min_length=1, description="Dimension -> value (library, scenario, R2CC_MODE, ...)."
    )
    expect: ScoredName
    why: FreeText = ""

    def matches(self, values: Mapping[str, object]) -> bool:
        """Whether a run with these dimension values is one of this prediction's cells."""
        return all(_text(values.get(key)) == _text(want) for key, want in self.match.items())


class PredictionsFile(StrictModel):
    """A predictions file as written."""

    experiment: Name | None = None
    predictions: list[Prediction] = Field(min_length=1)

    def expected(self, values: Mapping[str, object]) -> Prediction | None:
        """The first prediction covering a run (None: the run is not predicted)."""
        return next((p for p in self.predictions if p.matches(values)), None)


def _text(value: object) -> str | None:
    """A value as the runs table writes it (`1`, not `True`; None stays None)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def read_predictions(path: Path) -> PredictionsFile:
    """Read and validate a predictions file; raises ConfigError with located issues."""
    return validate_model(PredictionsFile, load_yaml(path))


def sha256_of(data: bytes) -> str:
    """The SHA-256 of a predictions file's bytes, as hex."""
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class Coverage:
    """How a predictions file covers a plan's faulted cells."""

    unpredicted: list[str]
    """Cells (as `key=value, ...`) no prediction covers."""
    idle: list[int]
    """Indexes of predictions that cover no cell (a typo in a library name, ...)."""


def coverage(file: PredictionsFile, cells: Sequence[Mapping[str, object]]) -> Coverage:
    """Which faulted cells no prediction covers, and which predictions cover nothing."""
    used: set[int] = set()
    unpredicted: list[str] = []
    for cell in cells:
        index = next((i for i, p in enumerate(file.predictions) if p.matches(cell)), None)
        if index is None:
            unpredicted.append(", ".join(f"{k}={v}" for k, v in cell.items()))
        else:
            used.add(index)
    idle = [i for i in range(len(file.predictions)) if i not in used]
    return Coverage(sorted(set(unpredicted)), idle)
