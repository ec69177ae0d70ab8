"""The comparison policy: how sure, how large a change must be, and what is expected to fail.

```yaml
confidence: 0.95          # two-sided bootstrap interval
resamples: 2000           # bootstrap resamples (seeded: the same inputs give the same verdicts)
seed: 0
min_samples: 5            # fewer samples on a side: `undecided` (identical sides: `same`)
undecided: fail           # whether `undecided` rows fail the gate (fail) or pass it (pass)
run_noise: 0.0            # the testbed's relative run-to-run spread (sd), beyond the samples
reference_tolerance: 0.10 # bounds --write-reference writes (at least this, relative)
metrics:
  busbw_gbps: {min_effect: 0.05, statistic: median}
  time_us: {min_effect: 0.05, statistic: median}
  detect_s: {min_effect: 0.10}        # recovery metrics: per series of faulted runs,
  stall_s: {min_effect: 0.10}         # one sample a run (so runs, not iterations, count
  failback_ratio: {min_effect: 0.05}  # towards min_samples)
  step_s: {min_effect: 0.05}          # training runs: per series, each update a sample
  tokens_per_s: {min_effect: 0.05}
  hit_step_s: {min_effect: 0.10}      # one sample a faulted run, as the recovery metrics
  overhead_ratio: {min_effect: 0.05}  # one a run: its median step / the baseline run's
  cost_detect_s: {min_effect: 0.10}   # the cost of the fault to a run with a recovery
  cost_back_s: {min_effect: 0.10}     # strategy (`recovery_cost`), one sample a run
  cost_lost_gpu_s: {min_effect: 0.10}
  cost_goodput_ratio: {min_effect: 0.05}
rules:                    # later rules win; match values are shell-style patterns
  - match: {scenario: "nic*"}
    metrics: {busbw_gbps: {min_effect: 0.15}, time_us: {min_effect: 0.15}}
  - size_max: 64K          # latency-bound sizes are noisier
    metrics: {time_us: {min_effect: 0.20}, busbw_gbps: {min_effect: 0.20}}
xfail:
  - match: {scenario: nic1-down, library: nccl-emulated}
    reason: stock NCCL has no failover: it crashes when a NIC dies
```
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from enum import Enum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from r2bench.analysis.metrics import REGISTRY
from r2bench.config.errors import ConfigError
from r2bench.config.source import load_data
from r2bench.config.types import parse_size

_UNIT_TEXT = {"s": "s", "ratio": "", "flag": ""}

METRICS = ("busbw_gbps", "time_us")
"""Compared per cell; busbw is better higher, time better lower."""
RECOVERY_METRICS = tuple(m.name for m in REGISTRY if m.compared)
"""Compared per series of faulted runs, one sample a run (the registry's `compared` entries)."""
COST_METRICS = ("cost_detect_s", "cost_back_s", "cost_lost_gpu_s", "cost_goodput_ratio")
"""The cost of a fault to a run with a recovery strategy (the `recovery_cost` table's
detect_s, back_s, lost_gpu_s and goodput / goodput_fault_free), one sample a run."""
TRAINING_METRICS = ("step_s", "tokens_per_s", "hit_step_s", "overhead_ratio", *COST_METRICS)
"""Compared per series of training runs (`compare.training`): every update's step time and
tokens/s (each update a sample, runs the unit of replication), and one sample a run of the
step time of the update its fault hit and of its median step over its baseline run's
(`training_checks.overhead_pct` as a ratio, 1 + overhead / 100: a change of an overhead near
0 % has no relative size), and of a run with a recovery strategy its `COST_METRICS`."""
PER_RUN_METRICS = (*RECOVERY_METRICS, "hit_step_s", "overhead_ratio", *COST_METRICS)
"""Metrics with one sample a run: runs, not iterations, count towards `min_samples`."""
COMPARED = (*METRICS, *RECOVERY_METRICS, *TRAINING_METRICS)
HIGHER_IS_BETTER = {
    "busbw_gbps": True,
    "time_us": False,
    **{m.name: m.higher_is_better for m in REGISTRY},
    "step_s": False,
    "tokens_per_s": True,
    "hit_step_s": False,
    "overhead_ratio": False,
    "cost_detect_s": False,
    "cost_back_s": False,
    "cost_lost_gpu_s": False,
    "cost_goodput_ratio": True,
}
UNITS = {
    "busbw_gbps": "GB/s",
    "time_us": "us",
    **{m.name: _UNIT_TEXT[m.unit] for m in REGISTRY},
    "step_s": "s",
    "tokens_per_s": "tokens/s",
    "hit_step_s": "s",
    "overhead_ratio": "",
    "cost_detect_s": "s",
    "cost_back_s": "s",
    "cost_lost_gpu_s": "GPU-s",
    "cost_goodput_ratio": "",
}
DEFAULT_MIN_EFFECT = {
    **{m.name: m.min_effect for m in REGISTRY if m.compared and m.min_effect is not None},
    "hit_step_s": 0.10,  # the stall of a repair: timeouts and polling, as detect_s
    "cost_detect_s": 0.10,  # a watchdog's or a library's timeout
    "cost_back_s": 0.10,
    "cost_lost_gpu_s": 0.10,
}
"""Detection and stalls wait on timeouts and polling: a smaller change is within their jitter
(analysis/metrics.py gives each metric's)."""


class Statistic(str, Enum):
    """What is compared of a cell's samples."""

    MEDIAN = "median"
    MEAN = "mean"


class UndecidedGate(str, Enum):
    """What an `undecided` row does to the gate."""

    FAIL = "fail"  # the gate passes only on what it could judge (more repeats decide more)
    PASS = "pass"  # a testbed too noisy to decide most cells: the gate catches what it can


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class MetricPolicy(_Strict):
    """Decision settings of one metric."""

    min_effect: float = Field(0.05, ge=0, lt=1, description="Smallest relative change that counts.")
    statistic: Statistic = Statistic.MEDIAN


class MetricOverride(_Strict):
    """A rule's change to a metric's settings (unset: keep)."""

    min_effect: float | None = Field(None, ge=0, lt=1)
    statistic: Statistic | None = None


def _size(value: Any) -> int | None:
    return None if value is None else parse_size(value)


class Selector(_Strict):
    """Which cells: key fields matched as shell-style patterns, and a size range."""

    match: dict[str, str] = Field(default_factory=dict)
    size_min: int | None = None
    size_max: int | None = None

    @field_validator("match", mode="before")
    @classmethod
    def _texts(cls, value: Any) -> Any:
        if isinstance(value, Mapping):
            return {str(k): "" if v is None else str(v) for k, v in value.items()}
        return value

    @field_validator("size_min", "size_max", mode="before")
    @classmethod
    def _sizes(cls, value: Any) -> int | None:
        return _size(value)

    def selects(self, key: Mapping[str, Any]) -> bool:
        """Whether a cell (or series, which has no size) is selected."""
        for name, pattern in self.match.items():
            if name not in key or not fnmatch.fnmatchcase(_text(key[name]), pattern):
                return False
        size = key.get("size_bytes")
        if size is None:
            return True
        if self.size_min is not None and int(size) < self.size_min:
            return False
        return self.size_max is None or int(size) <= self.size_max


class Rule(Selector):
    """Other metric settings for the cells a selector picks."""

    metrics: dict[str, MetricOverride] = Field(default_factory=dict)


class XFail(Selector):
    """Cells expected to fail: a regression there is reported as `xfail`, with the reason."""

    reason: str = Field(min_length=1)


class Policy(_Strict):
    """Everything `compare` decides with."""

    confidence: float = Field(0.95, gt=0.5, lt=1)
    resamples: int = Field(2000, ge=100, le=100_000)
    seed: int = 0
    min_samples: int = Field(5, ge=2)
    undecided: UndecidedGate = Field(
        UndecidedGate.FAIL, description="Whether `undecided` rows fail the gate or pass it."
    )
    run_noise: float = Field(
        0.0, ge=0, lt=1, description="Known relative run-to-run spread (sd) of the testbed."
    )
    reference_tolerance: float = Field(0.10, ge=0, lt=1)
    metrics: dict[str, MetricPolicy] = Field(default_factory=lambda: _default_metrics({}))
    rules: list[Rule] = Field(default_factory=list)
    xfail: list[XFail] = Field(default_factory=list)

    @field_validator("metrics")
    @classmethod
    def _known(cls, value: dict[str, MetricPolicy]) -> dict[str, MetricPolicy]:
        unknown = sorted(set(value) - set(COMPARED))
        if unknown:
            raise ValueError(f"unknown metric(s) {unknown}; known: {list(COMPARED)}")
        return _default_metrics(value)

    def metric(self, name: str, key: Mapping[str, Any]) -> MetricPolicy:
        """The settings of `name` for one cell, after every rule that selects it."""
        settings = self.metrics.get(name, MetricPolicy())
        for rule in self.rules:
            override = rule.metrics.get(name)
            if override is not None and rule.selects(key):
                changes = override.model_dump(exclude_none=True)
                settings = settings.model_copy(update=changes)
        return settings

    def expected_failure(self, key: Mapping[str, Any]) -> str | None:
        """The reason of the last xfail entry selecting this cell, or None."""
        reason = None
        for entry in self.xfail:
            if entry.selects(key):
                reason = entry.reason
        return reason


def _default_metrics(given: Mapping[str, MetricPolicy]) -> dict[str, MetricPolicy]:
    """Every compared metric's settings: the given ones, else the defaults."""
    return {
        m: given.get(m) or MetricPolicy(min_effect=DEFAULT_MIN_EFFECT.get(m, 0.05))
        for m in COMPARED
    }


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def load_policy(path: Path | None) -> Policy:
    """The policy in `path` (YAML), or the defaults. Raises ValueError on a bad file."""
    if path is None:
        return Policy()
    try:
        data = load_data(path) or {}
    except ConfigError as exc:
        raise ValueError(f"cannot read the policy: {exc}") from exc
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a policy is a mapping")
    try:
        return Policy.model_validate(data)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from exc
