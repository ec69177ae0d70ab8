"""A run's fault windows: one per fault cycle applied, on the controller's clock.

The one type every reader of a fault's time shares: the failure evidence (`evidence`), the
recovery metrics (`metrics`, `recovery`), the `windows` table and, through it, the report's
timelines and the paper figures.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from r2bench.runfolder import runmodel


@dataclass(frozen=True)
class FaultWindow:
    """One fault cycle, on the controller's clock: applied -> link back (None: never back)."""

    applied: float
    back: float | None
    node: str
    nic: str
    kind: str
    fault: int
    cycle: int


def fault_windows(
    faults: Iterable[runmodel.FaultEvent], run_end: float | None
) -> list[FaultWindow]:
    """One window per (fault, cycle) that was applied, in time order, on the controller clock.

    Start: the inject's `applied_at` (else its `time`). End: when the revert was made on the
    node (its `applied_at`, else its `time`), else when the link was seen back (a `verify`, the
    lease's own revert, a heal); None when none was recorded. The report's timelines, the
    figures and the recovery metrics all read these windows.
    """
    by_key: dict[tuple[int, int], dict[str, runmodel.FaultEvent]] = {}
    for f in faults:
        if f.ok or f.action != "inject":
            by_key.setdefault((f.fault, f.cycle), {}).setdefault(f.action, f)
    out = []
    for (fault, cycle), steps in by_key.items():
        inject = steps.get("inject")
        if inject is None or not inject.ok:
            continue
        applied = inject.on_controller_clock(
            inject.applied_at if inject.applied_at is not None else inject.time
        )
        if applied is None:
            continue
        back = None
        for action in ("revert", "verify", "lease_expired", "heal"):
            step = steps.get(action)
            if step is not None:
                node_time = step.applied_at or step.verified_at or step.time
                if node_time is not None:  # a step without its own offset: the inject's
                    back = step.on_controller_clock(node_time, inject.clock_offset_s or 0.0)
                    break
        out.append(FaultWindow(applied, back, inject.node, inject.nic, inject.kind, fault, cycle))
    out.sort(key=lambda w: w.applied)
    if run_end is not None:
        out = [w for w in out if w.applied <= run_end]
    return out
