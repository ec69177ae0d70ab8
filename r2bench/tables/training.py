"""The training tables: `training` (a row per update per run) and `training_checks` (a row per
training run: R-2CCL's artifact checks against its baseline run, `analysis.training`).

A run's part is made once from its parsed folder (`TrainingRows.add`: its updates as columns,
on the controller clock, and a summary of the rest: its training options, start and end lines,
stubs called and the update its fault hit) and kept with its other rows (`tables.rowcache`);
the checks compare runs with each other, so they are made when the tables are assembled
(`tables.build`), from every run's part (`training_runs`). A sweep of collective runs gets both
tables empty, with their columns. No pandas here: the sweep keeps a run's rows without it.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from r2bench.analysis.parsedrun import ParsedRun
from r2bench.analysis.training import FaultHit, TrainingRun
from r2bench.parse.training import TrainingLog, Updates
from r2bench.tables.recovery_cost import cost_doc
from r2bench.workloads.train_format import TrainEnd, TrainStart

TRAINING_COLUMNS = (
    *("run_id", "library", "scenario", "repeat", "update", "start", "end", "step_s", "loss"),
    *("tokens_per_s", "grad_norm", "allreduce_bytes", "digest", "digests_agree"),
)
"""One row per update of a training run; `start`/`end` on the controller clock, `step_s` the
slowest rank's, `loss` null where the workload logged a non-finite one, `digest` and
`digests_agree` every `digest_every` updates."""
_SUMMARY_KEYS = (
    *("run_id", "experiment", "library", "scenario", "repeat", "options", "baseline"),
    *("faulted", "start", "end", "stubs", "unreadable", "repeated", "hit", "offset"),
    "recovery",
)


def summary(run: ParsedRun) -> dict[str, Any] | None:
    """What the checks read of a training run besides its updates, as plain values (None for
    a run without a training log)."""
    log = run.training
    if log is None:
        return None
    rec, spec = run.record, run.record.spec
    options = (spec.model_extra or {}).get("training")
    baseline = options.get("baseline") if isinstance(options, dict) else None
    return {
        "run_id": rec.run_id,
        "experiment": spec.experiment or "",
        "library": spec.library_label or "",
        "scenario": spec.scenario or "",
        "repeat": spec.repeat,
        "options": json.dumps(options, sort_keys=True) if options is not None else "",
        "baseline": baseline if isinstance(baseline, str) else None,
        "faulted": bool(spec.faults) or any(f.action == "inject" for f in rec.faults),
        "start": asdict(log.start) if log.start else None,
        "end": asdict(log.end) if log.end else None,
        "stubs": list(log.stubs),
        "unreadable": log.unreadable,
        "repeated": log.repeated,
        "hit": run.training_hit.as_doc() if run.training_hit else None,
        "offset": run.clock.launch_offset,
        "recovery": cost_doc(run),
    }


def add_updates(columns: dict[str, list[Any]], run: ParsedRun) -> None:
    """Append a training run's updates to the `training` table's columns (times on the
    controller clock)."""
    log = run.training
    if log is None or not len(log.updates):
        return
    u, spec, offset = log.updates, run.record.spec, run.clock.launch_offset
    n = len(u)
    for name, value in (
        ("run_id", run.record.run_id),
        ("library", spec.library_label),
        ("scenario", spec.scenario),
        ("repeat", spec.repeat),
    ):
        columns[name].extend([value] * n)
    columns["update"].extend(u.update)
    columns["start"].extend([t - offset for t in u.start])
    columns["end"].extend([t - offset for t in u.end])
    for name in ("step_s", "tokens_per_s"):
        columns[name].extend(getattr(u, name))
    for name in ("loss", "grad_norm"):  # null, not NaN: the kept rows are JSON
        columns[name].extend([None if x != x else x for x in getattr(u, name)])
    columns["allreduce_bytes"].extend(u.allreduce_bytes)
    columns["digest"].extend(u.digest)
    columns["digests_agree"].extend(u.digests_agree)


def checked_summary(doc: Any) -> dict[str, Any]:
    """A kept summary, as `summary` makes it (ValueError otherwise: the run is parsed again)."""
    if not isinstance(doc, dict) or set(doc) != set(_SUMMARY_KEYS):
        raise ValueError("not a training summary")
    _run_of(doc, Updates())  # every field of its type, or TypeError/ValueError
    return doc


def training_runs(
    columns: dict[str, list[Any]], summaries: list[dict[str, Any]]
) -> list[TrainingRun]:
    """Every training run of the tables: its summary and its rows of the `training` columns
    (each run's rows are one stretch: rows are added run by run)."""
    stretches: dict[str, tuple[int, int]] = {}
    ids = columns["run_id"]
    first = 0
    for i in range(1, len(ids) + 1):
        if i == len(ids) or ids[i] != ids[first]:
            stretches.setdefault(ids[first], (first, i))
            first = i
    out = []
    for doc in summaries:
        lo, hi = stretches.get(doc["run_id"], (0, 0))
        out.append(_run_of(doc, _updates(columns, lo, hi, doc["offset"])))
    return out


def _updates(columns: dict[str, list[Any]], lo: int, hi: int, offset: float) -> Updates:
    """Rows lo..hi of the columns as a run's updates (times back on rank 0's clock)."""
    u = Updates()
    u.update.extend(columns["update"][lo:hi])
    u.start.extend(t + offset for t in columns["start"][lo:hi])
    u.end.extend(t + offset for t in columns["end"][lo:hi])
    for name in ("step_s", "tokens_per_s"):
        getattr(u, name).extend(columns[name][lo:hi])
    for name in ("loss", "grad_norm"):
        getattr(u, name).extend(float("nan") if x is None else x for x in columns[name][lo:hi])
    u.allreduce_bytes.extend(columns["allreduce_bytes"][lo:hi])
    u.digest.extend(columns["digest"][lo:hi])
    u.digests_agree.extend(columns["digests_agree"][lo:hi])
    return u


def _run_of(doc: dict[str, Any], updates: Updates) -> TrainingRun:
    start = TrainStart(**doc["start"]) if doc["start"] is not None else None
    end = TrainEnd(**doc["end"]) if doc["end"] is not None else None
    hit = FaultHit(**doc["hit"]) if doc["hit"] is not None else None
    stubs = tuple(str(s) for s in doc["stubs"])
    log = TrainingLog(start, updates, end, stubs, int(doc["unreadable"]), int(doc["repeated"]))
    repeat = doc["repeat"]
    if not (repeat is None or isinstance(repeat, int)) or not isinstance(
        doc["offset"], float | int
    ):
        raise ValueError("repeat or offset of another type")
    return TrainingRun(
        str(doc["run_id"]), str(doc["library"]), str(doc["scenario"]), repeat,
        str(doc["options"]), doc["baseline"] if isinstance(doc["baseline"], str) else None,
        bool(doc["faulted"]), log, hit, str(doc["experiment"]),
    )  # fmt: skip
