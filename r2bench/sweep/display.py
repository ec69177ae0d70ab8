"""What a sweep shows while it runs (a rich progress display, or one line per run) and at
the end (outcome counts per scenario x library/mode, the failed runs with their reasons, and
what the runs show in sentences, from the report's summary)."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from rich.console import Console, Group, RenderableType
from rich.padding import Padding
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table
from rich.text import Text

from r2bench.parse.models import OutcomeStatus
from r2bench.plan.model import PlannedRun
from r2bench.sweep.run import RunResult, Stage

FIRST_STAGE = Stage.PREFLIGHT.value
"""A run's first stage: the run that enters it is the current one."""

STATUS_STYLE = {
    OutcomeStatus.OK: "green",
    OutcomeStatus.INTERRUPTED: "yellow",
}


def series_label(run: PlannedRun) -> str:
    """`library`, `library mode N`, and a training run's recovery strategy: the column a run
    counts in (the same job under two strategies is two answers, never one mixed count)."""
    mode = run.spec.env.get("R2CC_MODE")
    label = run.spec.library_label + (f" mode {mode}" if mode is not None else "")
    recovery = run.spec.recovery
    return label + (f" {recovery.strategy.value}" if recovery is not None else "")


@dataclass
class SweepDisplay:
    """Progress of a sweep: runs done/total, current run and stage, time left, outcomes."""

    console: Console
    total: int
    quiet: bool = False
    counts: Counter[str] = field(default_factory=Counter)
    durations: list[float] = field(default_factory=list)
    done: int = 0
    _progress: Progress | None = None
    _task: TaskID | None = None
    _current: str = ""
    """The run that started last: its stages are shown."""
    _description: str = ""
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __enter__(self) -> SweepDisplay:
        if not self.quiet:
            self._progress = Progress(
                TextColumn("[bold]sweep"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("{task.fields[left]}"),
                TextColumn("{task.fields[outcomes]}"),
                TextColumn("{task.description}"),
                console=self.console,
                transient=False,
            )
            self._progress.start()
            self._task = self._progress.add_task("", total=self.total, left="", outcomes="")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()

    def skipped(self, count: int) -> None:
        """Runs already complete from an earlier sweep."""
        self.done += count
        if count:
            self.console.print(f"{count} run(s) already complete: skipped (resume)")
        self._update("")

    def stage(self, run_id: str, stage: str) -> None:
        """A run moved to `stage`: shown for the current run (the last to start); the stages
        of the run before, recorded while this one starts, are not."""
        with self._lock:
            if stage == FIRST_STAGE:
                self._current = run_id
            if run_id == self._current:
                self._description = f"{run_id} [dim]{stage}[/]"
                self._update(self._description)

    def finished(self, result: RunResult) -> None:
        """A run was recorded (whatever its outcome; called from the thread that records)."""
        with self._lock:
            self._finished(result)

    def _finished(self, result: RunResult) -> None:
        self.done += 1
        self.durations.append(result.job_seconds)
        self.counts[result.status.value] += 1
        if self.quiet or self._progress is None:
            stamp = time.strftime("%H:%M:%S")
            self.console.print(
                f"{stamp} [{self.done}/{self.total}] {result.run_id} {result.status.value} "
                f"{result.job_seconds:.1f}s {'' if result.status is OutcomeStatus.OK else result.reason}",
                markup=False,
                highlight=False,
            )
        self._update("" if result.run_id == self._current else self._description)

    def _update(self, description: str) -> None:
        if self._progress is None or self._task is None:
            return
        left = ""
        if self.durations:
            remaining = (self.total - self.done) * (sum(self.durations) / len(self.durations))
            left = f"~{remaining:.0f}s left"
        outcomes = " ".join(f"{k}={v}" for k, v in sorted(self.counts.items()))
        self._progress.update(
            self._task, completed=self.done, description=description, left=left, outcomes=outcomes
        )


def summary_table(runs: Sequence[PlannedRun], results: dict[str, RunResult]) -> Table:
    """Outcome counts per scenario (rows) x library/mode (columns)."""
    columns = sorted({series_label(run) for run in runs})
    scenarios = sorted({run.spec.scenario for run in runs})
    cells: dict[tuple[str, str], Counter[str]] = {}
    for run in runs:
        result = results.get(run.spec.run_id)
        status = result.status.value if result else "not run"
        cells.setdefault((run.spec.scenario, series_label(run)), Counter())[status] += 1
    table = Table(title="outcomes (runs per scenario x library/mode)")
    table.add_column("scenario", style="bold")
    for column in columns:
        table.add_column(column)
    for scenario in scenarios:
        row = [scenario]
        for column in columns:
            counts = cells.get((scenario, column), Counter())
            row.append(" ".join(f"{status} {n}" for status, n in sorted(counts.items())) or "-")
        table.add_row(*row)
    return table


def failed_list(results: dict[str, RunResult]) -> Group | None:
    """The runs whose outcome was not ok, or whose faults did not go as planned: each run and
    its outcome on one line, its reason wrapped under it as prose (a reason in a table column
    is squeezed to a few characters at 80 columns). None when every run was ok."""
    failed = [r for r in results.values() if r.status is not OutcomeStatus.OK or r.fault_trouble]
    if not failed:
        return None
    parts: list[RenderableType] = [Text("runs not ok, or whose faults did not go as planned:")]
    for result in failed:
        status = result.status.value + (" (fault not as planned)" if result.fault_trouble else "")
        parts.append(Text.assemble("  ", (result.run_id, "bold"), ": ", (status, "red")))
        reason = result.reason + (f" ({result.fault_trouble})" if result.fault_trouble else "")
        parts.append(Padding(Text(reason), (0, 0, 0, 4)))
    return Group(*parts)


def answer_lines(sentences: Sequence[str]) -> Group | None:
    """What the runs show, one sentence a line under a heading (None when there are none)."""
    if not sentences:
        return None
    grid = Table.grid(padding=(0, 1))  # a bullet and a hanging indent: one sentence per row
    grid.add_column(width=1)
    grid.add_column()
    for sentence in sentences:
        grid.add_row("-", Text(sentence))
    return Group(Text("what the runs show:", style="bold"), Padding(grid, (0, 0, 0, 1)))
