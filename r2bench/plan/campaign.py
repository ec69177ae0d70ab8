"""Fault campaigns: the times a scenario's drawn triggers land at, trial by trial (pure).

A trigger with `within_s` (or `within_updates`) is a distribution, not a time: each trial of
its scenario draws its own time uniformly from `[after_s, after_s + within_s]` (or its own
update from `[update, update + within_updates]`). The draw depends only on the scenario's
`seed`, the scenario's name, the fault's index and the trial's number, so

- the same experiment draws the same schedule every time it is planned (a rerun, a resume);
- another seed draws another schedule;
- every cell of the sweep (each library, collective, size) gets the same schedule for the same
  trial: libraries are compared under the same faults, trial by trial (a paired design).
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass

from r2bench.config.experiment import FaultSpec, Scenario, Trigger
from r2bench.plan.runspec import DrawnFault, RunCampaign

DRAW_DECIMALS = 3
"""Drawn times are rounded to the millisecond: the sweep's clock is no finer, and a record
that reads 1.234 s is one a reader can check by hand."""


@dataclass(frozen=True)
class Draw:
    """What one fault of one trial drew: its time after the anchor, or its update."""

    fault: int
    after_s: float
    update: int | None = None


def trial_rng(seed: int, scenario: str, fault: int, trial: int) -> random.Random:
    """The generator of one fault of one trial. Seeded from a SHA-256 of its coordinates (not
    Python's `hash`, which changes from one process to the next), so a draw never depends on
    the order faults or trials are drawn in."""
    key = f"r2bench-campaign:{seed}:{scenario}:{fault}:{trial}".encode()
    return random.Random(int.from_bytes(hashlib.sha256(key).digest()[:8], "big"))


def is_drawn(trigger: Trigger) -> bool:
    """Whether a trigger is a distribution (each trial draws its own time or update)."""
    return trigger.within_s is not None or trigger.within_updates is not None


def draw_fault(seed: int, scenario: str, index: int, trial: int, fault: FaultSpec) -> Draw:
    """The time (and update) fault `index` of `scenario` lands at in trial `trial`."""
    trigger = fault.trigger
    rng = trial_rng(seed, scenario, index, trial)
    after = trigger.after_s
    if trigger.within_s is not None:
        after = round(rng.uniform(after, after + trigger.within_s), DRAW_DECIMALS)
    update = trigger.update
    if trigger.within_updates is not None and update is not None:
        update = rng.randint(update, update + trigger.within_updates)
    return Draw(index, after, update)


def trial_faults(scenario: Scenario, trial: int) -> tuple[tuple[FaultSpec, ...], list[Draw]]:
    """The scenario's faults as trial `trial` runs them (each drawn trigger replaced by the
    fixed time and update it drew), and the draws themselves for the record."""
    seed = scenario.seed if scenario.seed is not None else 0
    faults: list[FaultSpec] = []
    draws: list[Draw] = []
    for index, fault in enumerate(scenario.faults):
        if not is_drawn(fault.trigger):
            faults.append(fault)
            continue
        drawn = draw_fault(seed, scenario.name, index, trial, fault)
        fixed = fault.trigger.model_copy(
            update={
                "after_s": drawn.after_s,
                "update": drawn.update,
                "within_s": None,
                "within_updates": None,
            }
        )
        faults.append(fault.model_copy(update={"trigger": fixed}))
        draws.append(drawn)
    return tuple(faults), draws


def drawn_range(fault: FaultSpec) -> str:
    """The distribution a drawn trigger draws from, as the record and `plan` state it."""
    t = fault.trigger
    parts = []
    if t.within_s is not None:
        parts.append(f"uniform [{t.after_s:g}, {t.after_s + t.within_s:g}] s after {t.since.value}")
    if t.within_updates is not None and t.update is not None:
        parts.append(f"update uniform [{t.update}, {t.update + t.within_updates}]")
    return ", ".join(parts)


def schedule(scenario: Scenario) -> list[list[Draw]]:
    """Every trial's draws of a scenario (trial 0 first): what `plan` shows and tests compare."""
    seed = scenario.seed if scenario.seed is not None else 0
    return [
        [
            draw_fault(seed, scenario.name, i, trial, fault)
            for i, fault in enumerate(scenario.faults)
            if is_drawn(fault.trigger)
        ]
        for trial in range(scenario.trials)
    ]


def trial_of(
    scenario: Scenario | None, trial: int
) -> tuple[tuple[FaultSpec, ...], RunCampaign | None]:
    """A run's faults for trial `trial` of its scenario, and the campaign record of the run
    (None outside a campaign: a fault-free run, or a scenario of one trial and fixed times)."""
    if scenario is None:
        return (), None
    if not scenario.campaign:
        return tuple(scenario.faults), None
    faults, draws = trial_faults(scenario, trial)
    record = tuple(
        DrawnFault(
            fault=d.fault,
            after_s=d.after_s,
            update=d.update,
            drawn_from=drawn_range(scenario.faults[d.fault]),
        )
        for d in draws
    )
    return faults, RunCampaign(
        trial=trial, trials=scenario.trials, seed=scenario.seed, draws=record
    )
