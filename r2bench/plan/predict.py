"""A plan's campaign, pre-told and predictions notes, and the predictions template (pure, but
for reading the predictions file).

`plan` says, per campaign scenario, its trials, seed and draws; per run told the failing NIC in
advance under a real fault, that it is pre-told; and for a predictions file (`--predict FILE`
or the experiment's `predictions:`), its SHA-256, the faulted cells it leaves unpredicted and
the predictions that cover no cell.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import yaml

from r2bench.config.experiment import Experiment
from r2bench.config.predictions import SCORED_NAMES, coverage, read_predictions, sha256_of
from r2bench.config.pretold import Told, declared, told
from r2bench.plan.campaign import drawn_range, is_drawn, schedule
from r2bench.plan.model import Plan, PlannedRun
from r2bench.safeio import read_bytes_bounded

MAX_PREDICTIONS_BYTES = 1 << 20
"""A predictions file is a page of YAML: refuse anything larger than a megabyte."""
TEMPLATE_EXPECT = "TODO"
"""What a written template leaves for the author to fill in (a class plan refuses)."""


def campaign_notes(experiment: Experiment) -> list[str]:
    """One note per campaign scenario: its trials, seed, distribution and drawn schedule."""
    notes = []
    for scenario in experiment.scenarios:
        if not scenario.campaign:
            continue
        ranges = "; ".join(
            f"fault {i}: {drawn_range(f)}"
            for i, f in enumerate(scenario.faults)
            if is_drawn(f.trigger)
        )
        drawn = [
            ",".join(f"{d.after_s:g}s" + (f"@u{d.update}" if d.update else "") for d in trial)
            for trial in schedule(scenario)
        ]
        text = f"campaign {scenario.name}: {scenario.trials} trial(s) per cell"
        if scenario.seed is not None:
            text += f", seed {scenario.seed}; {ranges}; drawn: {' | '.join(drawn)}"
            text += " (every cell gets the same time in the same trial)"
        notes.append(text)
    return notes


def told_notes(runs: Sequence[PlannedRun]) -> list[str]:
    """A note per library and scenario whose runs declare the failing NIC to the library
    while a real fault is injected: their results are pre-told, not blind."""
    seen: dict[tuple[str, str], list[str]] = {}
    for run in runs:
        spec = run.spec
        if told(spec.env, bool(spec.faults)) is Told.PRE_TOLD:
            seen.setdefault((spec.library_label, spec.scenario), declared(spec.env))
    return [
        f"{label} under {scenario} is pre-told ({' '.join(names)} declare the failing NIC "
        "while it is cut for real): its results are labelled pre-told, not blind"
        for (label, scenario), names in sorted(seen.items())
    ]


def faulted_cells(plan: Plan) -> list[dict[str, str]]:
    """The dimension values of every faulted run (the cells a prediction covers)."""
    cells = []
    for run in plan.runs:
        spec = run.spec
        if not spec.faults:
            continue
        cell = {"library": spec.library_label, "collective": spec.collective}
        cell["scenario"] = spec.scenario
        if spec.recovery is not None:
            cell["recovery"] = spec.recovery.strategy.value
        cells.append({**cell, **spec.env})
    return cells


def prediction_notes(plan: Plan, path: Path) -> list[str]:
    """The SHA-256 of a predictions file and how it covers the plan (ConfigError: invalid)."""
    file = read_predictions(path)
    digest = sha256_of(read_bytes_bounded(path, MAX_PREDICTIONS_BYTES, "a predictions file"))
    notes = [f"predictions {path}: SHA-256 {digest} ({len(file.predictions)} predictions)"]
    if file.experiment is not None and file.experiment != plan.experiment:
        notes.append(
            f"predictions {path} were written for experiment '{file.experiment}', "
            f"not '{plan.experiment}'"
        )
    cover = coverage(file, faulted_cells(plan))
    for cell in cover.unpredicted:
        notes.append(f"predictions {path}: no prediction covers the cell {cell}")
    for index in cover.idle:
        notes.append(f"predictions {path}: predictions[{index}] covers no run of the plan")
    return notes


def template(plan: Plan) -> str:
    """A predictions file for the plan's faulted cells (library x scenario, and every other
    dimension that varies between them), each `expect` left to fill in."""
    cells = faulted_cells(plan)
    varying = [k for k in _keys(cells) if _varies_within_a_series(cells, k)]
    keys = ["library", "scenario", *(k for k in varying if k not in ("library", "scenario"))]
    unique: list[dict[str, str]] = []
    for cell in cells:
        match = {k: cell[k] for k in keys if k in cell}
        if match not in unique:
            unique.append(match)
    body = {
        "experiment": plan.experiment,
        "predictions": [{"match": m, "expect": TEMPLATE_EXPECT, "why": ""} for m in unique],
    }
    head = (
        f"# Predictions for experiment {plan.experiment}: replace each {TEMPLATE_EXPECT} with "
        f"one of {', '.join(SCORED_NAMES)}\n# before the sweep, and name this file "
        "in the experiment's `predictions:` so the sweep records its SHA-256.\n"
    )
    return head + yaml.safe_dump(body, sort_keys=False)


def _keys(cells: Sequence[dict[str, str]]) -> list[str]:
    keys: list[str] = []
    for cell in cells:
        keys += [k for k in cell if k not in keys]
    return keys


def _varies_within_a_series(cells: Sequence[dict[str, str]], key: str) -> bool:
    """Whether `key` takes two values among the cells of one library and scenario (a setting
    every run of a library shares is implied by the library's name)."""
    values: dict[tuple[str, str], set[str | None]] = {}
    for cell in cells:
        values.setdefault((cell["library"], cell["scenario"]), set()).add(cell.get(key))
    return any(len(v) > 1 for v in values.values())
