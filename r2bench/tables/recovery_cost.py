"""The `recovery_cost` table: a row per training run with a recovery strategy (spec.json's
`recovery`): its strategy, library, scenario and every cost metric of `analysis.recovery_cost`
with its `<metric>_basis`.

A run's part is made once from its parsed folder (`cost_doc`: the cost without the baseline,
its recovery steps) and kept with its training summary (`tables.training`); the loss deltas
compare runs with each other, so they are filled in when the tables are assembled
(`recovery_rows`), against the fault-free baseline run the training checks find.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from r2bench.analysis.parsedrun import ParsedRun
from r2bench.analysis.recovery_cost import (
    METRICS,
    RecoveryInputs,
    parse_attempts,
    quality,
    recovery_cost,
)
from r2bench.analysis.training import TrainingRun, baseline_for
from r2bench.parse.models import EventKind, OutcomeStatus

ATTEMPTS = "attempts.jsonl"
"""A restart run's attempts, one JSON line each (the sweep's, controller clock)."""
FAILOVER_KINDS = frozenset(
    {
        EventKind.R2CC_HOT_REPAIR_BROADCAST, EventKind.R2CC_HOT_REPAIR_RECEIVED,
        EventKind.R2CC_HOT_REPAIR_DETECTED, EventKind.R2CC_STEP_SYNC,
        EventKind.R2CC_GATHER_COMPLETE, EventKind.R2CC_BACKUP_SWITCH,
    }
)  # fmt: skip
"""The events that say R-2CCL reacted to a failure (its hot repair)."""
OK_STATUSES = frozenset({OutcomeStatus.OK, OutcomeStatus.FAULT_WITHOUT_EFFECT})
"""Outcomes of a job that did not fail: its end is no reaction to the fault."""
HEAD_COLUMNS = ("run_id", "strategy", "library", "scenario", "repeat", "baseline_run_id")
RECOVERY_COLUMNS = (
    *HEAD_COLUMNS,
    "fault_at",
    "frontier",
    "step_s",
    *(c for m in METRICS for c in (m, f"{m}_basis")),
    "steps",
)
"""The `recovery_cost` table's columns; `steps`: the recovery steps after the fault as JSON,
`[[name, controller time], ...]` (abort, exit, restart, resume, shrink, failover); `fault_at`
the fault applied (controller clock)."""
STEPS_KEY = "steps"


def cost_doc(run: ParsedRun) -> dict[str, Any] | None:
    """A training run's cost, without the baseline (None: the run names no strategy)."""
    log, spec = run.training, run.record.spec
    strategy = spec.recovery_strategy
    if log is None or strategy is None:
        return None
    fault = run.windows[0].applied if run.windows else None
    path = run.record.file(ATTEMPTS)
    attempts = parse_attempts(path.read_text(errors="replace")) if path else []
    inputs = RecoveryInputs(
        strategy, log, fault, run.clock.launch_offset, attempts, _failover_at(run, fault),
        failed_exit_at=_failed_exit(run),
    )  # fmt: skip
    cost = recovery_cost(inputs)
    doc = cost.row()
    doc[STEPS_KEY] = [[name, at] for name, at in cost.steps]
    doc["fault_at"] = fault
    return doc


def _failed_exit(run: ParsedRun) -> float | None:
    """When the job ended, for a run whose outcome is a failure (None otherwise)."""
    status = run.outcome.status if run.outcome else None
    if run.job_end is None or status is None or status in OK_STATUSES:
        return None
    return run.job_end.at


def _failover_at(run: ParsedRun, fault: float | None) -> float | None:
    """The first R-2CCL failover event at or after the fault (controller clock)."""
    if fault is None:
        return None
    times = []
    for _, event in run.events:
        if event.kind in FAILOVER_KINDS:
            at = run.clock.of_event(event)
            if at is not None and at[0] >= fault:
                times.append(at[0])
    return min(times, default=None)


def recovery_rows(
    summaries: Sequence[Mapping[str, Any]], runs: Sequence[TrainingRun]
) -> list[dict[str, Any]]:
    """The table's rows: each run's kept cost, its loss deltas against its baseline run."""
    by_id = {run.run_id: run for run in runs}
    out = []
    for doc in summaries:
        cost = doc.get("recovery")
        run = by_id.get(str(doc["run_id"]))
        if not isinstance(cost, Mapping) or run is None:
            continue
        base = baseline_for(run, runs)
        row: dict[str, Any] = {name: cost.get(name) for name in RECOVERY_COLUMNS}
        row.update(
            run_id=run.run_id, library=run.library, scenario=run.scenario, repeat=run.repeat,
            baseline_run_id=base.run_id if base else None,
        )  # fmt: skip
        if cost.get("frontier") is not None or base is not None:
            loss, final = quality(run.log, base.log if base else None)
            row["loss_delta"], row["loss_delta_basis"] = loss.value, loss.basis
            row["final_loss_delta"], row["final_loss_delta_basis"] = final.value, final.basis
        row[STEPS_KEY] = json.dumps(cost.get(STEPS_KEY) or [])
        out.append(row)
    return out
