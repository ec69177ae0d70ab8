"""What setup tells the user about each step and in total (pure text)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from r2bench.parse.buildlog import BuildFailure


class Status(str, Enum):
    """How a step ended on a node."""

    BUILT = "built"
    CURRENT = "up to date"
    FAILED = "failed"
    SKIPPED = "skipped"


@dataclass(frozen=True)
class StepResult:
    """One component on one node."""

    node: str
    recipe: str
    status: Status
    key: str | None = None
    seconds: float = 0.0
    log: Path | None = None
    detail: str = ""
    failure: BuildFailure | None = None


def describe(result: StepResult) -> list[str]:
    """The lines printed for one step (the first names node and component)."""
    head = f"{result.node}: {result.recipe}"
    if result.status is Status.CURRENT:
        return [f"{head} up to date (key {result.key}{_detail(result)})"]
    if result.status is Status.SKIPPED:
        return [f"{head} skipped: {result.detail}"]
    if result.status is Status.BUILT:
        return [f"{head} built in {result.seconds:.1f} s (key {result.key}); log {result.log}"]
    return [f"{head} FAILED after {result.seconds:.1f} s: {result.detail}", *_failure_lines(result)]


def _detail(result: StepResult) -> str:
    return f", {result.detail}" if result.detail else ""


def _failure_lines(result: StepResult) -> list[str]:
    lines = []
    failure = result.failure
    if failure and failure.first_error:
        error = failure.first_error
        lines.append(f"  first error (log line {error.line}): {error.text}")
    elif failure:
        lines.append("  no compiler error found in the log; see its last lines")
    for text in failure.explanations if failure else ():
        lines.append(f"  known failure: {text}")
    if result.log:
        lines.append(f"  log: {result.log}")
    return lines


def summary(results: list[StepResult], seconds: float) -> str:
    """One closing line: counts by status, nodes involved and the wall time."""
    counts = Counter(result.status for result in results)
    parts = [f"{counts[status]} {status.value}" for status in Status if counts[status]]
    nodes = len({result.node for result in results})
    return f"setup: {', '.join(parts) or 'nothing to do'} ({nodes} node(s)) in {seconds:.1f} s"
