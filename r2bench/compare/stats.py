"""The seeded hierarchical bootstrap and the decision rule.

A side's statistic (median or mean of a cell's samples) is resampled in two levels: runs with
replacement, then samples within each drawn run with replacement (so repeats stay the unit of
replication, and one repeat is still judged from its iterations). Every resample is one row of
a matrix (no Python loop).
The generator is seeded from the policy's seed and the cell's key: the same inputs always get
the same verdicts, and adding a cell does not change the others.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from enum import Enum
from statistics import NormalDist

import numpy as np

from r2bench.compare.policy import Statistic

MAX_POOLED = 500
"""Above this many samples a side is thinned (every n-th sample of each run, the same every
time) before resampling: a bootstrap draws at most `resamples` x MAX_POOLED samples, so a
cell of a 1,000-run sweep costs what a cell of 25 repeats of 20 iterations does. Thinning keeps
every run (the unit resampled) and only widens the interval (a bigger sweep is never less
sure than a smaller one would be), so it can leave a row undecided, never make a false
regression."""


class Verdict(str, Enum):
    """A cell's verdict."""

    REGRESSION = "regression"
    IMPROVEMENT = "improvement"
    SAME = "same"
    UNDECIDED = "undecided"
    XFAIL = "xfail"
    MISSING = "missing"
    NEW = "new"
    INCOMPLETE = "incomplete"  # candidate runs of the series that did not finish


class Undecided(str, Enum):
    """Why a row is `undecided`: what would get it a verdict differs."""

    TOO_FEW_SAMPLES = "too few samples"  # fewer than min_samples on a side: more repeats
    TOO_NOISY = "too noisy"  # the interval reaches past the minimum effect: more repeats
    NO_VALUE = "no value"  # nothing finite to compare (a zero or missing statistic)
    NO_FINISHED_RUN = "no finished run"  # a series' outcomes: no run finished on a side


def rng_for(seed: int, *parts: str) -> np.random.Generator:
    """A generator seeded by the policy seed and stable text (a cell key, a metric)."""
    return np.random.default_rng([seed & 0xFFFFFFFF, *(zlib.crc32(p.encode()) for p in parts)])


def point(groups: list[np.ndarray], statistic: Statistic) -> float:
    """The statistic of the pooled samples."""
    pooled = np.concatenate(groups) if groups else np.empty(0)
    if pooled.size == 0:
        return float("nan")
    return float(np.median(pooled) if statistic is Statistic.MEDIAN else np.mean(pooled))


def identical(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    """Whether two sides hold the same samples (as multisets, at least one): every statistic
    and every resample of them is the same, so no test could tell them apart, however few."""
    pooled_a = np.sort(np.concatenate(a)) if a else np.empty(0)
    pooled_b = np.sort(np.concatenate(b)) if b else np.empty(0)
    return bool(pooled_a.size) and np.array_equal(pooled_a, pooled_b)


def _thin(groups: list[np.ndarray]) -> list[np.ndarray]:
    total = sum(len(g) for g in groups)
    if total <= MAX_POOLED:
        return groups
    step = int(np.ceil(total / MAX_POOLED))
    return [g[::step] for g in groups]


def bootstrap(
    groups: list[np.ndarray], statistic: Statistic, resamples: int, rng: np.random.Generator
) -> np.ndarray:
    """`resamples` bootstrap values of the statistic: runs drawn with replacement, then as many
    samples as each drawn run has, drawn with replacement from it."""
    groups = [g for g in _thin(groups) if len(g)]
    if not groups:
        return np.full(resamples, np.nan)
    k = len(groups)
    sizes = np.array([len(g) for g in groups])
    offsets = np.cumsum(sizes) - sizes
    pooled = np.concatenate(groups)
    runs = rng.integers(0, k, size=(resamples, k)) if k > 1 else np.zeros((resamples, 1), int)
    width = int(sizes.max())
    n = sizes[runs][..., None]
    picks = (rng.random((resamples, runs.shape[1], width)) * n).astype(np.int64)
    values = pooled[offsets[runs][..., None] + np.minimum(picks, n - 1)]
    statistics: np.ndarray  # numpy types its reductions as Any
    if (sizes == width).all():
        flat = values.reshape(resamples, -1)
        statistics = np.median(flat, axis=1) if statistic is Statistic.MEDIAN else flat.mean(axis=1)
        return statistics
    values = np.where(np.arange(width) < n, values, np.nan).reshape(resamples, -1)
    if statistic is Statistic.MEDIAN:
        statistics = np.nanmedian(values, axis=1)
    else:
        statistics = np.nanmean(values, axis=1)
    return statistics


@dataclass(frozen=True)
class Change:
    """A relative change with its interval: `gain` > 0 is better (faster, more busbw)."""

    baseline: float
    candidate: float
    change: float  # candidate / baseline - 1
    gain: float
    low: float  # interval of the gain
    high: float
    change_low: float  # interval of the change
    change_high: float
    fw_low: float = float("nan")  # family-wise interval of the gain (regression decisions)
    fw_high: float = float("nan")
    fw_change_low: float = float("nan")  # family-wise interval of the change
    fw_change_high: float = float("nan")


def relative_change(
    base: float,
    cand: float,
    base_boot: np.ndarray,
    cand_boot: np.ndarray,
    higher_is_better: bool,
    confidence: float,
    family: int = 1,
    run_noise: float = 0.0,
    runs: tuple[int, int] = (1, 1),
) -> Change:
    """The change from `base` to `cand`, the bootstrap percentile interval of its gain at
    `confidence`, and a family-wise interval for deciding a regression among `family` tests
    (Bonferroni: the point estimate +- z(1 - alpha / 2 family) bootstrap standard errors,
    never narrower than the percentile interval). `run_noise` is the testbed's known relative
    run-to-run spread (standard deviation): what the samples of few runs cannot show (a busy
    host slows a whole run). It widens both intervals by its standard error over `runs`
    (baseline, candidate) runs."""
    with np.errstate(divide="ignore", invalid="ignore"):
        if higher_is_better:
            gain, boots = cand / base - 1.0, cand_boot / base_boot - 1.0
        else:
            gain, boots = base / cand - 1.0, base_boot / cand_boot - 1.0
        changes = cand_boot / base_boot - 1.0
    low, high = _interval(boots, confidence)
    change_low, change_high = _interval(changes, confidence)
    change = cand / base - 1.0 if base else float("nan")
    extra = run_noise * float(np.sqrt(sum(1.0 / max(1, k) for k in runs if k)))
    if extra > 0:
        z1 = NormalDist().inv_cdf(1.0 - (1.0 - confidence) / 2.0) * extra
        low, high, change_low, change_high = low - z1, high + z1, change_low - z1, change_high + z1
    z = NormalDist().inv_cdf(1.0 - (1.0 - confidence) / (2.0 * max(1, family)))
    se_gain = float(np.hypot(_se(boots), extra))
    se_change = float(np.hypot(_se(changes), extra))
    return Change(
        base, cand, change, gain, low, high, change_low, change_high,
        min(low, gain - z * se_gain), max(high, gain + z * se_gain),
        min(change_low, change - z * se_change), max(change_high, change + z * se_change),
    )  # fmt: skip


def _se(values: np.ndarray) -> float:
    values = values[np.isfinite(values)]
    return float(np.std(values)) if values.size > 1 else float("nan")


def _interval(values: np.ndarray, confidence: float) -> tuple[float, float]:
    values = values[np.isfinite(values)]
    if not values.size:
        return float("nan"), float("nan")
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(values, [alpha, 1.0 - alpha])
    return float(low), float(high)


def decide(change: Change, min_effect: float) -> Verdict:
    """Regression only when the family-wise interval excludes no change and the estimate is
    worse than the minimum effect; `same` when the percentile interval sits within
    +-min_effect, or excludes no change by less than the minimum effect; `undecided` otherwise
    (too noisy to tell)."""
    gain, low, high = change.gain, change.low, change.high
    if not all(np.isfinite([gain, low, high, change.fw_low, change.fw_high])):
        return Verdict.UNDECIDED
    if change.fw_high < 0 and gain < -min_effect:
        return Verdict.REGRESSION
    if change.fw_low > 0 and gain > min_effect:
        return Verdict.IMPROVEMENT
    if -min_effect <= low and high <= min_effect:
        return Verdict.SAME
    if (low > 0 or high < 0) and abs(gain) <= min_effect:
        return Verdict.SAME
    return Verdict.UNDECIDED


def decide_bounds(
    change: Change, lower: float | None, upper: float | None, higher_is_better: bool
) -> Verdict:
    """Against a reference value with relative bounds on the value (ReFrame style: the value
    may lie in [v (1 + lower), v (1 + upper)], None: unbounded). Outside the bound on the bad
    side, with an interval that excludes the reference value, is a regression (the good side:
    an improvement); inside the bounds is `same`; outside with an interval reaching the
    reference value is `undecided`."""
    rel, low, high = change.change, change.fw_change_low, change.fw_change_high
    if not all(np.isfinite([rel, low, high])):
        return Verdict.UNDECIDED
    below = Verdict.IMPROVEMENT if not higher_is_better else Verdict.REGRESSION
    above = Verdict.REGRESSION if not higher_is_better else Verdict.IMPROVEMENT
    if lower is not None and rel < lower:
        return below if high < 0 else Verdict.UNDECIDED
    if upper is not None and rel > upper:
        return above if low > 0 else Verdict.UNDECIDED
    return Verdict.SAME
