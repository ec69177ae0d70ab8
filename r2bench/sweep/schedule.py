"""A run's fault schedule as a list of timed actions (pure).

Every fault of the scenario becomes `cycles` pairs of inject/revert actions, each at an offset
from its anchor: the job's launch, its first result line, or a training job's line of update N
(`update N`; both known only once the job prints them). A fault with no duration is reverted
when the run ends.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from r2bench.plan.model import FaultStep

Anchor = str
"""`launch`, `first_result` or `update N`."""
ActionKind = Literal["inject", "revert"]


@dataclass(frozen=True)
class FaultAction:
    """Do `kind` to fault `fault` (its cycle `cycle`) `at_s` seconds after `anchor`."""

    fault: FaultStep
    kind: ActionKind
    cycle: int
    at_s: float
    anchor: Anchor

    @property
    def last_cycle(self) -> bool:
        """Whether no inject follows this action's cycle."""
        return self.cycle == self.fault.cycles - 1


def fault_actions(faults: list[FaultStep]) -> list[FaultAction]:
    """Every inject and timed revert, ordered by anchor then time (inject before revert)."""
    actions = []
    for fault in faults:
        anchor = fault.anchor
        period = fault.period_s or 0.0
        duration = None if fault.heal_after_s is None else fault.heal_after_s - fault.inject_after_s
        for cycle in range(fault.cycles):
            start = fault.inject_after_s + cycle * period
            actions.append(FaultAction(fault, "inject", cycle, start, anchor))
            if duration is not None:
                actions.append(FaultAction(fault, "revert", cycle, start + duration, anchor))
    return sorted(actions, key=lambda a: (_anchor_order(a.anchor), a.at_s, a.kind != "inject"))


def injects_soon_after_launch(faults: list[FaultStep], lead_s: float) -> bool:
    """Whether a fault's first inject is due less than `lead_s` after the job's launch."""
    return any(f.anchor == "launch" and f.inject_after_s < lead_s for f in faults)


def _anchor_order(anchor: Anchor) -> tuple[int, int]:
    """Anchors in the order a job reaches them: launch, first result, update 1, 2..."""
    if anchor.startswith("update "):
        return 2, int(anchor.split()[1])
    return (0 if anchor == "launch" else 1), 0
