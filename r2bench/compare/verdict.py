"""The comparison: verdicts per cell and metric, and per series for outcomes."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from r2bench.compare.policy import (
    HIGHER_IS_BETTER,
    METRICS,
    RECOVERY_METRICS,
    TRAINING_METRICS,
    Policy,
    UndecidedGate,
    XFail,
)
from r2bench.compare.reference import Reference, reference_keyed
from r2bench.compare.samples import (
    Cell,
    Key,
    Series,
    SweepData,
    cells,
    recovery_cells,
    series_columns,
    series_outcomes,
)
from r2bench.compare.stats import (
    Change,
    Undecided,
    Verdict,
    bootstrap,
    decide,
    decide_bounds,
    identical,
    point,
    relative_change,
    rng_for,
)
from r2bench.compare.training import DIFFERS, IDENTICAL, identity_counts, training_cells
from r2bench.tables.build import INCOMPLETE, INVALID

OUTCOME = "outcome"
RUNS = "runs"
IDENTITY = "bit_identical"
"""The row of a series' training runs bit-identical to their baseline run."""
NOT_JUDGED = frozenset({INCOMPLETE, "interrupted", INVALID})
"""Outcomes that say nothing about the code under test (the sweep was cut, a record is bad)."""
EXIT_OK, EXIT_REGRESSION, EXIT_CANNOT = 0, 1, 2
NOT_DATA = frozenset({Verdict.INCOMPLETE, Verdict.MISSING})
"""Verdicts of data that is not there: runs that did not finish, cells the candidate lacks."""


@dataclass(frozen=True)
class Gate:
    """What may pass the CI gate without being judged. By default nothing: a candidate whose
    runs were cut off, whose cells are missing or whose data cannot decide fails, so a gate
    never passes on what it did not see."""

    allow_incomplete: bool = False
    allow_undecided: bool = False

    @classmethod
    def of(cls, policy: Policy) -> Gate:
        """The gate a policy sets (`undecided: pass` lets undecided rows pass)."""
        return cls(allow_undecided=policy.undecided is UndecidedGate.PASS)

    def widened(self, other: Gate) -> Gate:
        """What either gate lets pass (command-line flags add to the policy's gate)."""
        return Gate(
            self.allow_incomplete or other.allow_incomplete,
            self.allow_undecided or other.allow_undecided,
        )

    def blocks(self, verdict: Verdict) -> bool:
        """Whether a row with this verdict fails the gate although nothing regressed."""
        if verdict in NOT_DATA:
            return not self.allow_incomplete
        return verdict is Verdict.UNDECIDED and not self.allow_undecided


@dataclass(frozen=True)
class Row:
    """One verdict: a cell x metric, or a series' outcomes (metric `outcome`)."""

    key: tuple[tuple[str, Any], ...]
    metric: str
    verdict: Verdict
    baseline: float | str | None = None
    candidate: float | str | None = None
    change: float | None = None  # candidate / baseline - 1
    low: float | None = None  # interval of the change
    high: float | None = None
    n_baseline: int = 0
    n_candidate: int = 0
    threshold: str = ""
    note: str = ""
    undecided: Undecided | None = None  # why, when the verdict is `undecided`

    @property
    def fields(self) -> dict[str, Any]:
        return dict(self.key)


@dataclass
class Comparison:
    """All verdicts of one comparison."""

    baseline: str
    candidate: str
    series_columns: list[str]
    policy: Policy
    rows: list[Row] = field(default_factory=list)
    matched_cells: int = 0
    matched_series: int = 0
    gate: Gate = field(default_factory=Gate)

    def count(self) -> Counter[str]:
        """Rows per verdict."""
        return Counter(r.verdict.value for r in self.rows)

    @property
    def regressions(self) -> list[Row]:
        return [r for r in self.rows if r.verdict is Verdict.REGRESSION]

    @property
    def unjudged(self) -> list[Row]:
        """Rows that fail the gate for want of a verdict (incomplete, missing, undecided)."""
        return [r for r in self.rows if self.gate.blocks(r.verdict)]

    @property
    def exit_code(self) -> int:
        if not self.matched_cells and not self.matched_series:
            return EXIT_CANNOT
        return EXIT_REGRESSION if self.regressions or self.unjudged else EXIT_OK


def _xfail(row: Row, reason: str | None) -> Row:
    if reason is None:
        return row
    if row.verdict is Verdict.REGRESSION:
        return _replace(row, verdict=Verdict.XFAIL, note=f"xfail: {reason}")
    return _replace(
        row, note=f"xfail did not fail ({reason})" + (f"; {row.note}" if row.note else "")
    )


def _replace(row: Row, **changes: Any) -> Row:
    values = {**row.__dict__, **changes}
    return Row(**values)


def _expected(xfails: Iterable[XFail], fields: Mapping[str, Any]) -> str | None:
    reason = None
    for entry in xfails:
        if entry.selects(fields):
            reason = entry.reason
    return reason


def _threshold(min_effect: float) -> str:
    return f"±{min_effect:.0%}"


def _metric_row(
    key: Key,
    metric: str,
    policy: Policy,
    base: Cell | None,
    cand: Cell,
    ref_value: float | None = None,
    bounds: tuple[float | None, float | None] = (None, None),
    family: int = 1,
) -> Row:
    fields = dict(key)
    settings = policy.metric(metric, fields)
    n_cand = cand.count(metric)
    n_base = base.count(metric) if base is not None else 0
    if base is not None:
        threshold = _threshold(settings.min_effect)
    else:
        threshold = "[" + ", ".join("-" if b is None else f"{b:+.0%}" for b in bounds) + "]"
    too_few = [
        f"{side} n={n}"
        for side, n in (("baseline", n_base), ("candidate", n_cand))
        if (side == "candidate" or base is not None) and n < policy.min_samples
    ]
    cand_pooled = [cand.pooled_of(metric)]  # the same samples as the runs' arrays, in one
    base_pooled = [base.pooled_of(metric)] if base is not None else []
    cand_value = point(cand_pooled, settings.statistic)
    base_value = point(base_pooled, settings.statistic) if base is not None else ref_value
    if base is not None and identical(base_pooled, cand_pooled):
        return Row(
            key, metric, Verdict.SAME, base_value, cand_value, 0.0, n_baseline=n_base,
            n_candidate=n_cand, threshold=threshold, note="identical samples",
        )  # fmt: skip
    if too_few:
        change = cand_value / base_value - 1 if base_value else None
        return Row(
            key, metric, Verdict.UNDECIDED, base_value, cand_value, change,
            n_baseline=n_base, n_candidate=n_cand, threshold=threshold,
            note=f"too few samples ({', '.join(too_few)} < {policy.min_samples})",
            undecided=Undecided.TOO_FEW_SAMPLES,
        )  # fmt: skip
    rng = rng_for(policy.seed, str(key), metric)
    cand_boot = bootstrap(cand.samples[metric], settings.statistic, policy.resamples, rng)
    if base is not None:
        base_boot = bootstrap(base.samples[metric], settings.statistic, policy.resamples, rng)
    else:
        base_boot = np.full(policy.resamples, float(base_value or np.nan))
    higher = HIGHER_IS_BETTER[metric]
    ch: Change = relative_change(
        float(base_value or np.nan),
        cand_value,
        base_boot,
        cand_boot,
        higher,
        policy.confidence,
        family,
        policy.run_noise,
        (len(base.samples[metric]) if base is not None else 0, len(cand.samples[metric])),
    )
    if base is not None:
        verdict = decide(ch, settings.min_effect)
    else:
        verdict = decide_bounds(ch, bounds[0], bounds[1], higher)
    return Row(
        key, metric, verdict, base_value, cand_value, ch.change, ch.change_low, ch.change_high,
        n_base, n_cand, threshold, undecided=_why_undecided(verdict, ch),
    )  # fmt: skip


def _why_undecided(verdict: Verdict, change: Change) -> Undecided | None:
    """With enough samples: no finite estimate to judge, or an interval too wide for it."""
    if verdict is not Verdict.UNDECIDED:
        return None
    finite = np.isfinite([change.change, change.change_low, change.change_high]).all()
    return Undecided.TOO_NOISY if finite else Undecided.NO_VALUE


def _outcome_text(outcomes: Counter[str]) -> str:
    total = sum(outcomes.values())
    return ", ".join(f"{k} {v}/{total}" for k, v in sorted(outcomes.items()))


def _outcome_row(key: Key, base: Counter[str], cand: Counter[str]) -> Row:
    b = Counter({k: v for k, v in base.items() if k not in NOT_JUDGED})
    c = Counter({k: v for k, v in cand.items() if k not in NOT_JUDGED})
    text_b, text_c = _outcome_text(base), _outcome_text(cand)
    nb, nc = sum(b.values()), sum(c.values())
    if not nb or not nc:
        return Row(key, OUTCOME, Verdict.UNDECIDED, text_b, text_c, n_baseline=nb,
                   n_candidate=nc, note="no finished run on a side",
                   undecided=Undecided.NO_FINISHED_RUN)  # fmt: skip
    ok_b, ok_c = b["ok"] / nb, c["ok"] / nc
    if ok_c < ok_b:
        verdict, note = Verdict.REGRESSION, "runs that ended ok now fail"
    elif ok_c > ok_b:
        verdict, note = Verdict.IMPROVEMENT, ""
    else:
        verdict, note = Verdict.SAME, ""
    return Row(key, OUTCOME, verdict, text_b, text_c, n_baseline=nb, n_candidate=nc, note=note)


def _unfinished_rows(cand_series: Mapping[Key, Series]) -> list[Row]:
    """One row per candidate series with runs that did not finish or could not be read: the
    runs that finished may look fine, but the gate has not seen the rest."""
    rows = []
    for key in sorted(cand_series, key=_sort):
        outcomes = Counter(cand_series[key].outcomes)
        cut = Counter({k: v for k, v in outcomes.items() if k in NOT_JUDGED})
        if not cut:
            continue
        total, n_cut = sum(outcomes.values()), sum(cut.values())
        note = f"{n_cut} of {total} candidate runs did not finish ({_outcome_text(cut)})"
        rows.append(Row(key, RUNS, Verdict.INCOMPLETE, candidate=_outcome_text(outcomes),
                        n_candidate=total, note=note))  # fmt: skip
    return rows


def _sort(key: Key) -> tuple[str, ...]:
    return tuple(f"{v:020d}" if isinstance(v, int) else str(v) for _, v in key)


def _cell_rows(
    base_cells: Mapping[Key, Cell], cand_cells: Mapping[Key, Cell], policy: Policy
) -> tuple[list[Row], int]:
    rows, matched = [], 0
    family = len(set(base_cells) & set(cand_cells))
    for key in sorted(set(base_cells) | set(cand_cells), key=_sort):
        base, cand = base_cells.get(key), cand_cells.get(key)
        if base is None:
            rows.append(Row(key, "-", Verdict.NEW, note="only in the candidate"))
        elif cand is None:
            rows.append(Row(key, "-", Verdict.MISSING, note="not in the candidate"))
        else:
            matched += 1
            rows += [_metric_row(key, m, policy, base, cand, family=family) for m in METRICS]
    return rows, matched


def compare_sweeps(base: SweepData, cand: SweepData, policy: Policy) -> Comparison:
    """Two sweeps, cell by cell and series by series."""
    names = series_columns(base.tables, cand.tables)
    out = Comparison(base.name, cand.name, names, policy, gate=Gate.of(policy))
    rows, out.matched_cells = _cell_rows(
        cells(base.tables, names), cells(cand.tables, names), policy
    )
    base_series = series_outcomes(base.tables, names)
    cand_series = series_outcomes(cand.tables, names)
    for key in sorted(set(base_series) & set(cand_series), key=_sort):
        out.matched_series += 1
        rows.append(
            _outcome_row(
                key, Counter(base_series[key].outcomes), Counter(cand_series[key].outcomes)
            )
        )
    rows += _recovery_rows(
        recovery_cells(base.tables, names), recovery_cells(cand.tables, names), policy
    )
    rows += _training_rows(
        training_cells(base.tables, names), training_cells(cand.tables, names), policy
    )
    rows += _identity_rows(identity_counts(base.tables, names), identity_counts(cand.tables, names))
    rows += _unfinished_rows(cand_series)
    out.rows = [_xfail(r, policy.expected_failure(r.fields)) for r in rows]
    return out


def _recovery_rows(
    base_cells: Mapping[Key, Cell], cand_cells: Mapping[Key, Cell], policy: Policy
) -> list[Row]:
    """A slower detection, a longer stall or less bandwidth back after the link returned is a
    regression like a busbw drop: every series with faulted runs on both sides, per metric
    that either side measured."""
    shared = sorted(set(base_cells) & set(cand_cells), key=_sort)
    return [
        _metric_row(key, metric, policy, base_cells[key], cand_cells[key], family=len(shared))
        for key in shared
        for metric in RECOVERY_METRICS
        if base_cells[key].count(metric) or cand_cells[key].count(metric)
    ]


def _training_rows(
    base_cells: Mapping[Key, Cell], cand_cells: Mapping[Key, Cell], policy: Policy
) -> list[Row]:
    """Slower steps, fewer tokens/s, a slower hit update or more overhead against the
    baseline run is a regression like a busbw drop: every series of training runs on both
    sides, per metric either side measured."""
    shared = sorted(set(base_cells) & set(cand_cells), key=_sort)
    return [
        _metric_row(key, metric, policy, base_cells[key], cand_cells[key], family=len(shared))
        for key in shared
        for metric in TRAINING_METRICS
        if base_cells[key].count(metric) or cand_cells[key].count(metric)
    ]


def _identity_rows(base: Mapping[Key, Counter[str]], cand: Mapping[Key, Counter[str]]) -> list[Row]:
    """Per series on both sides: a smaller share of runs bit-identical to their baseline run
    is a regression, whatever the numbers (bit identity is no matter of noise)."""
    rows = []
    for key in sorted(set(base) & set(cand), key=_sort):
        b, c = base[key], cand[key]
        nb, nc = sum(b.values()), sum(c.values())
        share_b, share_c = b[IDENTICAL] / nb, c[IDENTICAL] / nc
        if share_c < share_b:
            verdict = Verdict.REGRESSION
            note = "runs bit-identical to their baseline run now differ from it"
        elif share_c > share_b:
            verdict, note = Verdict.IMPROVEMENT, ""
        else:
            verdict, note = Verdict.SAME, ""
        rows.append(
            Row(key, IDENTITY, verdict, _identity_text(b), _identity_text(c),
                n_baseline=nb, n_candidate=nc, note=note)
        )  # fmt: skip
    return rows


def _identity_text(counts: Counter[str]) -> str:
    total = sum(counts.values())
    return ", ".join(f"{k} {counts[k]}/{total}" for k in (IDENTICAL, DIFFERS) if counts[k])


def compare_reference(ref: Reference, cand: SweepData, policy: Policy) -> Comparison:
    """A sweep against a reference file: each cell against its value and bounds."""
    names = ref.series_columns
    out = Comparison(
        f"reference {ref.sweep}".strip(), cand.name, names, policy, gate=Gate.of(policy)
    )
    ref_cells, ref_series = reference_keyed(ref)
    cand_cells = cells(cand.tables, names)
    rows: list[Row] = []
    family = len(set(ref_cells) & set(cand_cells))
    for key in sorted(set(ref_cells) | set(cand_cells), key=_sort):
        refc, cell = ref_cells.get(key), cand_cells.get(key)
        if refc is None:
            rows.append(Row(key, "-", Verdict.NEW, note="not in the reference"))
            continue
        if cell is None:
            rows.append(Row(key, "-", Verdict.MISSING, note="not in the candidate"))
            continue
        out.matched_cells += 1
        for metric in METRICS:
            bound = refc.metrics.get(metric)
            if bound is None:
                continue
            row = _metric_row(
                key, metric, policy, None, cell, bound.value, (bound.lower, bound.upper), family
            )
            rows.append(_replace(row, n_baseline=refc.n))
    cand_series = series_outcomes(cand.tables, names)
    for key in sorted(set(ref_series) & set(cand_series), key=_sort):
        out.matched_series += 1
        rows.append(
            _outcome_row(key, Counter(ref_series[key].outcomes), Counter(cand_series[key].outcomes))
        )
    rows += _unfinished_rows(cand_series)
    xfails = [*ref.xfail, *policy.xfail]
    out.rows = [_xfail(r, _expected(xfails, r.fields)) for r in rows]
    return out
