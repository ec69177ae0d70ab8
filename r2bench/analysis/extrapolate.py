"""An extrapolation, labelled as one: the expected GPU-hours a day NIC failures cost a job at a
user's scale, per recovery strategy, from times measured on the testbed and the user's inputs
(docs/recovery.md, "Recovery strategies").

Failures a day: `f = rate x nics x 24` (rate: NIC failures per NIC per hour). Each failure
costs the whole job (`ranks` GPUs) its stall, and per strategy:

- in_library: `ranks x stall`, stall = the measured back_s less one step (the job never stops);
- restart: `ranks x (detect + restart + load + interval / 2 x step)`: the watchdog's detection
  as measured, the restart time (default the R-2CCL paper's 68 minutes), the checkpoint's load
  time, and on average half a checkpoint interval of updates redone;
- shrink: `ranks x (detect + step) + gpus_per_node x rejoin`: the survivors detect and redo one
  update; the failed node's GPUs do no work for the job until it rejoins (`rejoin_h`);
- none: not extrapolated: the job dies or hangs until a person notices.

Measured values and extrapolated rows are separate types, never one table. Pure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import Any

SCALE_FILE = "at-scale.yaml"
"""The user's scale for a sweep's extrapolation: a YAML mapping of ScaleInputs' fields, in the
sweep folder (the report reads it; the defaults stand for what it leaves out)."""

PAPER_RESTART_S = 68 * 60.0
"""The R-2CCL paper's time to restart a large job after a failure: 68 minutes."""


@dataclass(frozen=True)
class ScaleInputs:
    """The user's scale: every input of the extrapolation, shown beside its rows."""

    ranks: int = 1024
    nics: int = 1024
    nic_failure_rate_per_h: float = 1e-4
    """NIC failures per NIC per hour."""
    checkpoint_interval: int = 1000
    """Updates between checkpoints."""
    checkpoint_load_s: float = 60.0
    restart_s: float = PAPER_RESTART_S
    gpus_per_node: int = 8
    rejoin_h: float = 24.0
    """Hours until a dropped node's GPUs work for the job again (shrink)."""


def scale_inputs(doc: Any, source: str) -> ScaleInputs:
    """The scale a parsed YAML document sets (None or empty: the defaults); ValueError names
    `source`, the field and the fix."""
    if doc is None:
        return ScaleInputs()
    names = {f.name: f.type for f in fields(ScaleInputs)}
    if not isinstance(doc, dict):
        raise ValueError(f"{source}: give a mapping of {', '.join(names)}")
    values: dict[str, int | float] = {}
    for key, value in doc.items():
        if key not in names:
            raise ValueError(f"{source}: {key!r} is not an input; use one of {', '.join(names)}")
        integer = names[key] == "int"
        ok = isinstance(value, int) if integer else isinstance(value, int | float)
        if isinstance(value, bool) or not ok or not math.isfinite(value) or value < 0:
            kind = "a whole number" if integer else "a number"
            raise ValueError(f"{source}: {key}: {value!r} is not {kind} >= 0")
        values[key] = value if integer else float(value)
    return replace(ScaleInputs(), **values)  # type: ignore[arg-type]  # checked above


@dataclass(frozen=True)
class MeasuredTimes:
    """What the testbed measured for one strategy (medians over its runs)."""

    strategy: str
    detect_s: float | None
    back_s: float | None
    step_s: float | None


@dataclass(frozen=True)
class Extrapolated:
    """One strategy's expected cost at the user's scale."""

    strategy: str
    per_failure_gpu_s: float | None
    failures_per_day: float
    gpu_hours_per_day: float | None
    formula: str
    """The formula with every value put in, or why there is no number."""


def failures_per_day(scale: ScaleInputs) -> float:
    """`rate x nics x 24`."""
    return scale.nic_failure_rate_per_h * scale.nics * 24


def extrapolate(measured: MeasuredTimes, scale: ScaleInputs) -> Extrapolated:
    """The expected lost GPU-hours a day of one strategy (see the module docstring)."""
    f = failures_per_day(scale)
    per_failure, formula = _per_failure(measured, scale)
    if per_failure is None:
        return Extrapolated(measured.strategy, None, f, None, formula)
    per_day = per_failure * f / 3600
    text = f"{formula} = {per_failure:,.0f} GPU-s a failure x {f:.3g} failures a day"
    return Extrapolated(measured.strategy, per_failure, f, per_day, text)


def _per_failure(m: MeasuredTimes, s: ScaleInputs) -> tuple[float | None, str]:
    if m.strategy == "none":
        return None, "not extrapolated: without recovery the job dies or hangs"
    if m.step_s is None:
        return None, "not extrapolated: no step time was measured"
    if m.strategy == "in_library":
        if m.back_s is None:
            return None, "not extrapolated: the job never got back beyond its frontier"
        stall = max(0.0, m.back_s - m.step_s)
        return s.ranks * stall, f"{s.ranks} x ({m.back_s:.3g} - {m.step_s:.3g}) s"
    if m.detect_s is None:
        return None, "not extrapolated: no detection was measured"
    if m.strategy == "restart":
        redo = s.checkpoint_interval / 2 * m.step_s
        seconds = m.detect_s + s.restart_s + s.checkpoint_load_s + redo
        text = (
            f"{s.ranks} x ({m.detect_s:.3g} + {s.restart_s:.4g} + {s.checkpoint_load_s:.3g}"
            f" + {s.checkpoint_interval} / 2 x {m.step_s:.3g}) s"
        )
        return s.ranks * seconds, text
    if m.strategy == "shrink":
        idle = s.gpus_per_node * s.rejoin_h * 3600
        text = (
            f"{s.ranks} x ({m.detect_s:.3g} + {m.step_s:.3g}) s"
            f" + {s.gpus_per_node} x {s.rejoin_h:.3g} h"
        )
        return s.ranks * (m.detect_s + m.step_s) + idle, text
    return None, f"not extrapolated: unknown strategy {m.strategy!r}"
