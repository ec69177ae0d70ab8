"""Predictions scored against verdicts: the confusion table of a sweep (pure).

The file (`config.predictions`) states the class expected of each faulted cell; each faulted
run's verdict (`analysis.verdict`) is counted under (expected, observed). Runs whose failover
could not have worked (`analysis.armed`) are left out, never a hit or a miss; so are runs that
never tested the fault (UNSCORED) and runs no prediction covers (counted apart).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from r2bench.analysis.verdict import OutcomeClass
from r2bench.config.predictions import PredictionsFile


@dataclass(frozen=True)
class ScoredRun:
    """One run as the score sees it: its dimension values, verdict, and whether its failover
    could have worked (`armed`: False leaves it out of the score)."""

    values: Mapping[str, object]
    verdict: OutcomeClass
    armed: bool = True


@dataclass
class Score:
    """Predictions against verdicts."""

    confusion: Counter[tuple[OutcomeClass, OutcomeClass]] = field(default_factory=Counter)
    """(expected, observed) -> runs."""
    unpredicted: int = 0
    unscored: int = 0
    """Faulted runs that never tested the fault (UNSCORED)."""
    unarmed: int = 0
    """Runs whose failover could not have worked: left out, never a hit or a miss."""

    @property
    def scored(self) -> int:
        """Runs scored against a prediction."""
        return sum(self.confusion.values())

    @property
    def hits(self) -> int:
        """Runs whose verdict was the one predicted."""
        return sum(n for (want, got), n in self.confusion.items() if want is got)


def score(file: PredictionsFile, runs: Iterable[ScoredRun]) -> Score:
    """Score every faulted run against the prediction that covers it."""
    result = Score()
    for run in runs:
        if run.verdict is OutcomeClass.NO_FAULT:
            continue
        if run.verdict is OutcomeClass.UNSCORED:
            result.unscored += 1
            continue
        if not run.armed:
            result.unarmed += 1
            continue
        prediction = file.expected(run.values)
        if prediction is None:
            result.unpredicted += 1
            continue
        result.confusion[(OutcomeClass(prediction.expect), run.verdict)] += 1
    return result
