"""Expand an experiment's sweep into points: one dict of dimension values per run (pure).

Grammar (after Ramble): every `matrix` dimension and every `zip` group is one axis; the runs are
the cross product of the axes, minus the points matching an `exclude` rule. Core dimensions the
sweep does not name (library, collective, scenario, size) become axes over all declared values.
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass, field
from typing import Any

from r2bench.config.errors import ConfigIssue, FieldPath, did_you_mean, format_path
from r2bench.config.experiment import CORE_DIMENSIONS, NO_FAULT, Experiment, SizeRange
from r2bench.config.source import SourceDoc
from r2bench.config.types import parse_size, reserved_variable_problem

_ENV_DIMENSION = re.compile(r"^[A-Z_][A-Z0-9_]*$")


@dataclass(frozen=True)
class Point:
    """One combination of dimension values, and the file path each value came from."""

    values: dict[str, Any]
    origins: dict[str, FieldPath] = field(default_factory=dict)

    def env(self) -> dict[str, str]:
        """The environment-variable dimensions of this point."""
        return {k: v for k, v in self.values.items() if k not in CORE_DIMENSIONS}


Axis = list[Point]


def expand(experiment: Experiment, doc: SourceDoc) -> tuple[list[Point], list[ConfigIssue]]:
    """All sweep points in a stable order, plus every problem found in the sweep section."""
    issues: list[ConfigIssue] = []
    axes = _declared_axes(experiment, doc, issues) + _implicit_axes(experiment)
    swept = {dim for axis in axes for point in axis for dim in point.values}
    for name in sorted(swept & set(experiment.env)):
        hint = "set it in env or sweep it, not both"
        issues.append(
            doc.issue(("env", name), f"'{name}' is also a sweep dimension", hint, at_key=True)
        )
    issues += _duplicate_issues(axes, doc)
    if issues:
        return [], issues
    too_many = _combinations_issue(experiment, doc, axes)
    if too_many is not None:
        return [], [too_many]
    rules = _exclude_rules(experiment, doc, axes, issues)
    most = experiment.max_runs // _runs_per_point(experiment)
    kept, count, matched, dropped = _kept_points(axes, rules, most)
    runs = count * _runs_per_point(experiment)
    if runs > experiment.max_runs:  # counted on what runs: exclusions first
        return [], [_count_issue(experiment, doc, axes, runs, dropped)]
    issues += _idle_rules(rules, axes, matched, doc)
    if not kept and not issues:
        where = ("sweep", "exclude") if experiment.sweep.exclude else ("sweep",)
        issues.append(doc.issue(where, "the sweep expands to no runs", "loosen the exclude rules"))
    return kept, issues


EXPANSION_LIMIT = 1_000_000
"""Most combinations a sweep section may name before its exclusions (unless max_runs is
higher): the exclusions are checked on each one, so a few aliased lists never make billions."""


def _runs_per_point(experiment: Experiment) -> int:
    """Runs of one sweep point: its repeats, times a campaign's trials (counted at the most
    trials any scenario asks for, so a refusal never lets more than max_runs through)."""
    return experiment.repeats * _trials(experiment)


def _trials(experiment: Experiment) -> int:
    return max((s.trials for s in experiment.scenarios), default=1)


def _shape(experiment: Experiment, axes: list[Axis]) -> str:
    """The axis sizes, repeats and trials, e.g. `4 x 3 x 2 repeats x up to 5 trials`."""
    shape = " x ".join(str(len(axis)) for axis in axes if len(axis) > 1) or "1"
    shape += f" x {experiment.repeats} repeats" if experiment.repeats > 1 else ""
    trials = _trials(experiment)
    return shape + (f" x up to {trials} trials" if trials > 1 else "")


def _combinations_issue(
    experiment: Experiment, doc: SourceDoc, axes: list[Axis]
) -> ConfigIssue | None:
    """Refuse, before expanding it, a sweep whose combinations (before its exclusions) are
    more than could ever be checked: the product of the axis sizes, and the repeats when
    nothing is excluded (then that product is the count of runs)."""
    combinations = math.prod(len(axis) for axis in axes)
    if not experiment.sweep.exclude:
        combinations *= _runs_per_point(experiment)
        if combinations > experiment.max_runs:
            return _count_issue(experiment, doc, axes, combinations, 0)
        return None
    limit = max(experiment.max_runs, EXPANSION_LIMIT)
    if combinations <= limit:
        return None
    return doc.issue(
        ("sweep",),
        f"the sweep names {combinations} combinations before its exclusions "
        f"({_shape(experiment, axes)}), more than the {limit} r2bench expands",
        "narrow the matrix (zip dimensions that vary together) instead of excluding most of it",
        at_key=True,
    )


def _count_issue(
    experiment: Experiment, doc: SourceDoc, axes: list[Axis], runs: int, dropped: int
) -> ConfigIssue:
    """The sweep runs more than `max_runs`: how many, after which exclusions, and the fix."""
    excluded = f", {dropped} combinations excluded" if dropped else ""
    return doc.issue(
        ("sweep",),
        f"the sweep expands to {runs} runs ({_shape(experiment, axes)}{excluded}); the limit "
        f"is {experiment.max_runs}",
        "narrow the sweep, or raise max_runs if you mean it",
        at_key=True,
    )


def _kept_points(
    axes: list[Axis], rules: list[_Rule], hold_at_most: int
) -> tuple[list[Point], int, set[int], int]:
    """The points no exclude rule drops (at most `hold_at_most` of them held: past that they
    are only counted), how many there are, the indexes of the rules that dropped one, and how
    many were dropped. One pass over the combinations."""
    kept: list[Point] = []
    count = dropped = 0
    matched: set[int] = set()
    for combo in itertools.product(*axes):
        point = _merge(combo)
        hits = [rule.index for rule in rules if _matches(rule, point)]
        if hits:
            matched.update(hits)
            dropped += 1
            continue
        count += 1
        if count <= hold_at_most:
            kept.append(point)
    return kept, count, matched, dropped


def _declared_axes(experiment: Experiment, doc: SourceDoc, issues: list[ConfigIssue]) -> list[Axis]:
    axes: list[Axis] = []
    for dim, values in experiment.sweep.matrix.items():
        base = ("sweep", "matrix", dim)
        if _check_dimension(dim, values, base, experiment, doc, issues):
            axes.append([_point(dim, value, (*base, i)) for i, value in enumerate(values)])
    for g, group in enumerate(experiment.sweep.zip):
        good = all(
            _check_dimension(dim, values, ("sweep", "zip", g, dim), experiment, doc, issues)
            for dim, values in group.items()
        )
        if good and group:
            length = len(next(iter(group.values())))
            axes.append([_zip_point(group, g, i) for i in range(length)])
    return axes


def _point(dim: str, value: Any, origin: FieldPath) -> Point:
    return Point({dim: _normalize(dim, value)}, {dim: origin})


def _zip_point(group: dict[str, list[Any]], g: int, i: int) -> Point:
    values = {dim: _normalize(dim, vals[i]) for dim, vals in group.items()}
    origins: dict[str, FieldPath] = {dim: ("sweep", "zip", g, dim, i) for dim in group}
    return Point(values, origins)


def _normalize(dim: str, value: Any) -> Any:
    if dim == "size":
        return parse_size(value)
    if dim in CORE_DIMENSIONS:
        return str(value)
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def _implicit_axes(experiment: Experiment) -> list[Axis]:
    named = set(experiment.sweep.matrix) | {d for group in experiment.sweep.zip for d in group}
    defaults: dict[str, list[Any]] = {
        "library": list(experiment.libraries),
        "collective": list(experiment.collectives),
        "scenario": [NO_FAULT] + [s.name for s in experiment.scenarios],
    }
    if isinstance(experiment.sizes, list):
        defaults["size"] = list(experiment.sizes)
    if experiment.recovery is not None:
        defaults["recovery"] = _strategies(experiment)
    origins = {
        "library": ("libraries",),
        "collective": ("collectives",),
        "scenario": ("scenarios",),
        "recovery": ("recovery", "strategies"),
    }
    return [
        [
            Point({dim: value}, {dim: (*origins.get(dim, ("sizes",)), i)})
            for i, value in enumerate(values)
        ]
        for dim, values in defaults.items()
        if dim not in named
    ]


def _check_dimension(
    dim: str,
    values: Any,
    path: FieldPath,
    experiment: Experiment,
    doc: SourceDoc,
    issues: list[ConfigIssue],
) -> bool:
    """Record an issue and return False if `dim: values` is not a valid sweep dimension."""
    before = len(issues)
    if dim not in CORE_DIMENSIONS and not _ENV_DIMENSION.match(dim):
        hint = did_you_mean(dim, CORE_DIMENSIONS, "environment variables are UPPER_CASE")
        issues.append(doc.issue(path, f"unknown sweep dimension '{dim}'", hint, at_key=True))
        return False
    if (reserved := reserved_variable_problem(dim)) is not None:
        why, fix = reserved
        issues.append(doc.issue(path, f"{dim} may not be swept: it {why}", fix, at_key=True))
        return False
    if not values:
        issues.append(doc.issue(path, "empty list: a sweep dimension needs at least one value"))
        return False
    allowed = _allowed_values(dim, experiment)
    for i, value in enumerate(values):
        problem = _value_problem(dim, value, allowed)
        if problem:
            issues.append(doc.issue((*path, i), problem[0], problem[1]))
    return len(issues) == before


def _allowed_values(dim: str, experiment: Experiment) -> list[str] | None:
    if dim == "library":
        return list(experiment.libraries)
    if dim == "collective":
        return list(experiment.collectives)
    if dim == "scenario":
        return [NO_FAULT] + [s.name for s in experiment.scenarios]
    if dim == "recovery":
        return _strategies(experiment)
    return None


def _strategies(experiment: Experiment) -> list[str]:
    """The recovery strategies the experiment declares (none without a `recovery:` section)."""
    if experiment.recovery is None:
        return []
    return [strategy.value for strategy in experiment.recovery.strategies]


def _value_problem(dim: str, value: Any, allowed: list[str] | None) -> tuple[str, str] | None:
    if isinstance(value, dict | list) or value is None:
        return f"expected a single value for '{dim}', found {type(value).__name__}", ""
    if dim == "size" and (error := _size_error(value)):
        return error, "use a size such as 8, 64K or 8G"
    if "\x00" in str(value):
        return "value contains a NUL byte", ""
    if allowed is not None and str(value) not in allowed:
        if not allowed and dim == "recovery":
            return "`recovery` is swept but the experiment has no `recovery:` section", (
                "add recovery: {strategies: [...]} (none, in_library, restart, shrink)"
            )
        hint = did_you_mean(str(value), allowed, "declared: " + ", ".join(allowed))
        return f"'{value}' is not a declared {dim}", hint
    return None


def _size_error(value: Any) -> str | None:
    try:
        parse_size(value)
    except ValueError as exc:
        return str(exc)
    return None


def _merge(combo: tuple[Point, ...]) -> Point:
    values: dict[str, Any] = {}
    origins: dict[str, FieldPath] = {}
    for point in combo:
        values.update(point.values)
        origins.update(point.origins)
    return Point(values, origins)


@dataclass(frozen=True)
class _Rule:
    """One exclude rule: its index in `sweep.exclude`, and the values it drops per dimension."""

    index: int
    values: dict[str, set[str]]


def _exclude_rules(
    experiment: Experiment, doc: SourceDoc, axes: list[Axis], issues: list[ConfigIssue]
) -> list[_Rule]:
    dims = {dim for axis in axes for point in axis for dim in point.values}
    rules = []
    for r, rule in enumerate(experiment.sweep.exclude):
        if not rule:
            issues.append(
                doc.issue(("sweep", "exclude", r), "empty exclude rule would drop every run")
            )
            continue
        unknown = [dim for dim in rule if dim not in dims]
        for dim in unknown:
            hint = did_you_mean(dim, sorted(dims), "dimensions: " + ", ".join(sorted(dims)))
            issues.append(
                doc.issue(
                    ("sweep", "exclude", r, dim),
                    f"'{dim}' is not a sweep dimension",
                    hint,
                    at_key=True,
                )
            )
        if not unknown:
            rules.append(_Rule(r, {dim: _value_set(dim, value) for dim, value in rule.items()}))
    return rules


def _value_set(dim: str, value: Any) -> set[str]:
    values = value if isinstance(value, list) else [value]
    return {str(_normalize(dim, v)) for v in values}


def _matches(rule: _Rule, point: Point) -> bool:
    return all(str(point.values.get(dim)) in allowed for dim, allowed in rule.values.items())


def _idle_rules(
    rules: list[_Rule], axes: list[Axis], matched: set[int], doc: SourceDoc
) -> list[ConfigIssue]:
    """An exclude rule that drops nothing is a mistake (a typo in a value, or values that never
    occur together): say which value, or which rule, matches no run."""
    taken: dict[str, set[str]] = {}
    for axis in axes:
        for point in axis:
            for dim, value in point.values.items():
                taken.setdefault(dim, set()).add(str(value))
    issues = []
    for rule in rules:
        base: FieldPath = ("sweep", "exclude", rule.index)
        unused = {dim: sorted(values - taken[dim]) for dim, values in rule.values.items()}
        for dim, values in unused.items():
            if values:
                known = ", ".join(sorted(taken[dim]))
                issues.append(
                    doc.issue(
                        (*base, dim),
                        f"exclude value {', '.join(values)} matches no run ({dim} takes {known})",
                        "fix the value or remove it",
                    )
                )
        if not any(unused.values()) and rule.index not in matched:
            issues.append(
                doc.issue(
                    base,
                    "this exclude rule matches no run (its values never occur together)",
                    "remove it, or fix the values",
                )
            )
    return issues


def _duplicate_issues(axes: list[Axis], doc: SourceDoc) -> list[ConfigIssue]:
    """A value given twice on one axis (`sizes: [1K, 1024]`, a collective listed twice) would
    plan two runs with one id: refuse the later one."""
    issues = []
    for axis in axes:
        seen: dict[tuple[tuple[str, str], ...], Point] = {}
        for point in axis:
            key = tuple(sorted((dim, str(value)) for dim, value in point.values.items()))
            first = seen.setdefault(key, point)
            if first is point:
                continue
            dim = next(iter(point.values))
            issues.append(
                doc.issue(
                    point.origins[dim],
                    f"{dim} {point.values[dim]} appears twice (first at "
                    f"{format_path(first.origins[dim])}): both would plan runs with one id",
                    "remove one",
                )
            )
    return issues


def size_arguments(experiment: Experiment, point: Point) -> tuple[int, int, int]:
    """(begin, end, factor) for nccl-tests' -b -e -f at this point."""
    if "size" in point.values:
        size = int(point.values["size"])
        return size, size, 2
    sizes = experiment.sizes
    assert isinstance(sizes, SizeRange)
    return sizes.begin, sizes.end, sizes.factor
