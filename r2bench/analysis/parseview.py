"""A run folder read as one run, for `r2bench parse`: its stdout and stderr together, with its
`-J` results, spec, recorded outcome and events, as the tables read it (`analysis.parsedrun`).

Given one of a run folder's own files (`results/<sweep>/<run>/stdout.txt`), `parse` reads the
whole folder: a run's stdout and stderr are two halves of one run, never two runs to judge.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from r2bench.analysis.decision import decide
from r2bench.analysis.parsedrun import ParsedRun, parse_run, read_outputs
from r2bench.parse.events import read_events
from r2bench.parse.models import Event, Outcome, ParsedNcclTests
from r2bench.parse.r2ccl_artifact import (
    ArtifactError,
    HotRepairRun,
    events_between,
    looks_like_artifact,
    read_artifact,
)
from r2bench.parse.verify import Verification
from r2bench.runfolder import runformat, runmodel

RUN_FILES = (
    runformat.SPEC,
    runformat.PROVENANCE,
    runformat.STDOUT,
    runformat.STDERR,
    runformat.STDOUT_TIMES,
    runformat.STDERR_TIMES,
    runformat.RESULT_JSON,
    runformat.EVENTS,
    runformat.FAULTS,
    runformat.OUTCOME,
    runformat.COMPLETE,
)
"""The files r2bench writes in a run folder: given one of them, `parse` reads the folder."""


def run_folder_of(path: Path) -> Path | None:
    """The run folder `path` is, or holds as one of its own files (`RUN_FILES`); None for
    anything else (a log of its own, a folder without spec.json)."""
    if path.is_dir():
        return path if (path / runformat.SPEC).is_file() else None
    if path.name in RUN_FILES and (path.parent / runformat.SPEC).is_file():
        return path.parent
    return None


@dataclass(frozen=True)
class FolderRun:
    """What `parse` says of a run folder."""

    path: Path
    files: list[str]
    """The folder's files read, in `RUN_FILES` order."""
    parsed: ParsedNcclTests
    events: list[tuple[str, Event]]
    """(source file, event): both logs' events, or events.jsonl's when the sweep kept them."""
    outcome: Outcome
    recorded: bool
    """True: the outcome is the one the sweep recorded (outcome.json); False: judged here."""
    verification: Verification | None = None
    transport: str | None = None
    exit_code: int | None = None
    warnings: list[str] = field(default_factory=list)


def read_folder(path: Path) -> FolderRun:
    """Read a run folder as one run. Raises `runmodel.RecordError` naming the file and field
    when its record cannot be read (a bad spec.json, a folder from a newer r2bench)."""
    record = runmodel.load_run(path)
    if record.problems:
        raise runmodel.RecordError("; ".join(record.problems))
    files = [name for name in RUN_FILES if record.file(name) is not None]
    outputs = read_outputs(record)
    run = parse_run(record, outputs)
    parsed = _with_spec_collective(run, record.spec.collective)
    if run.logged:  # the sizes only the workload's `#iter` lines hold (parse.iterlines)
        blocks = [*parsed.per_iteration, *(block.times for block in run.logged)]
        parsed = parsed.model_copy(update={"per_iteration": blocks})
    outcome, recorded = run.outcome, run.outcome is not None and record.end is not None
    if outcome is None:  # no outcome.json (a run that did not finish): judged from the logs
        outcome = decide(
            parsed,
            run.events,
            env=record.spec.env,
            verification=run.verification,
            evidence=run.evidence,
        )
    return FolderRun(
        path=path,
        files=files,
        parsed=parsed,
        events=run.events,
        outcome=outcome,
        recorded=recorded,
        verification=run.verification,
        transport=run.transport,
        exit_code=record.end.exit_code if record.end else None,
        warnings=list(parsed.warnings),
    )


def _with_spec_collective(run: ParsedRun, collective: str | None) -> ParsedNcclTests:
    """The results, with the collective the run's spec names where the output names none
    (the emulator's program is `ring_allreduce`, no nccl-tests test name)."""
    parsed = run.parsed
    if parsed.collective or not collective:
        return parsed
    return parsed.model_copy(update={"collective": collective, "collective_from": "run_spec"})


def parse_artifact_file(path: Path) -> list[tuple[ParsedNcclTests, list[Event], Outcome]] | None:
    """`r2bench parse`'s view of an artifact log: one (results, events, outcome) per run, or
    None when `path` is no artifact log. A refused run raises its located ArtifactError."""
    if not looks_like_artifact(path):
        return None
    log = read_artifact(path)
    if log.errors:
        first = log.errors[0]
        raise ArtifactError(first.path, first.line, first.what, first.fix)
    with path.open("rb") as handle:
        events = read_events(handle)
    out = []
    for run in log.runs:
        evs = events_between(events, run.first_line, run.last_line)
        if isinstance(run, HotRepairRun):
            out.append((run.as_parsed(), evs, run.outcome(path.name)))
        else:
            outcome = decide(run.parsed, [(path.name, e) for e in evs], source=path.name)
            out.append((run.parsed, evs, outcome))
    return out
