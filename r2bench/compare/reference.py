"""Reference files: expected values with bounds per cell, kept as data (ReFrame style).

```yaml
format: r2bench-reference/1
sweep: ci-virtual                  # where the values came from
series_columns: [collective, library, scenario, R2CC_MODE]
provenance:                         # what a candidate must match (compare.provenance)
  testbed: ci-virtual
  nccl_tests_version: 2.19.6
  library_version[r2ccl]: 2.28.3
cells:                              # one line per cell; metrics are [value, lower, upper, unit]
- {collective: all_reduce, library: emulated, scenario: none, R2CC_MODE: '1', size_bytes: 4194304,
   placement: out_of_place, type: float, redop: sum, n: 16,
   busbw_gbps: [0.361, -0.1, null, GB/s], time_us: [11608.0, null, 0.1, us]}
series:                             # outcomes of the runs of each series
- {collective: all_reduce, library: emulated, scenario: nic1-down, R2CC_MODE: '0', outcomes: {crashed: 2}}
xfail:                              # same shape as a policy's
- {match: {scenario: nic1-down, library: nccl-emulated}, reason: stock NCCL has no failover}
```
`lower`/`upper` are relative to the value (-0.1: 10 % below); `null` is unbounded. busbw is
bounded below and time above by default: faster is never a failure.
"""

from __future__ import annotations

import math
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field

from r2bench.compare.policy import HIGHER_IS_BETTER, METRICS, UNITS, Policy, XFail
from r2bench.compare.provenance import Facts, sweep_facts
from r2bench.compare.samples import (
    CELL_FIELDS,
    CompareInputError,
    Key,
    SweepData,
    cells,
    make_key,
    series_columns,
    series_outcomes,
)
from r2bench.compare.stats import bootstrap, point, relative_change, rng_for
from r2bench.config.errors import ConfigError
from r2bench.config.source import WrittenFloat, load_data, read_as_number
from r2bench.config.types import short_repr

FORMAT = "r2bench-reference/1"
RESERVED = frozenset({"n", "outcomes", *METRICS})


class Bound(BaseModel):
    """ReFrame's reference tuple: value, lower and upper (relative, None: unbounded), unit."""

    model_config = ConfigDict(frozen=True)
    value: float
    lower: float | None = None
    upper: float | None = None
    unit: str = ""


class RefCell(BaseModel):
    """A reference cell: its key fields and bounds per metric."""

    model_config = ConfigDict(frozen=True)
    key: dict[str, Any]
    metrics: dict[str, Bound]
    n: int = 0


class RefSeries(BaseModel):
    """Outcome counts of a series' runs."""

    model_config = ConfigDict(frozen=True)
    key: dict[str, Any]
    outcomes: dict[str, int]


class Reference(BaseModel):
    """A whole reference file."""

    model_config = ConfigDict(frozen=True)
    sweep: str = ""
    written: str = ""
    series_columns: list[str]
    provenance: Facts = Field(default_factory=dict)
    """The sweep's testbed, nccl-tests and library versions (empty: written before references
    kept them, so unknown)."""
    cells: list[RefCell] = Field(default_factory=list)
    series: list[RefSeries] = Field(default_factory=list)
    xfail: list[XFail] = Field(default_factory=list)

    def cell_keys(self) -> list[str]:
        """The key fields of a cell, in order."""
        return [*self.series_columns, *CELL_FIELDS]


def _bound(name: str, raw: Any) -> Bound:
    if not isinstance(raw, (list, tuple)) or not 1 <= len(raw) <= 4:
        raise CompareInputError(f"{name}: expected [value, lower, upper, unit], got {raw!r}")
    value, lower, upper, unit = (*raw, None, None, "")[:4]
    for part, number in (("value", value), ("lower", lower), ("upper", upper)):
        if (number is not None or part == "value") and not _finite(number):
            raise CompareInputError(
                f"{name}: {part} must be a finite number, got {short_repr(number)}"
            )
    return Bound(value=value, lower=lower, upper=upper, unit=unit or "")


def _finite(number: Any) -> bool:
    return (
        isinstance(number, int | float) and not isinstance(number, bool) and math.isfinite(number)
    )


def _count(name: str, raw: Any) -> int:
    """A count of runs: a whole number from 0 (.inf, -1 or 2.5 is refused by name)."""
    if raw is None:
        return 0
    if isinstance(raw, str) and raw.isascii() and raw.isdigit() and len(raw) <= 18:
        return int(raw)
    if not _finite(raw) or raw < 0 or raw != int(raw):
        raise CompareInputError(f"{name}: expected a whole count of runs, got {short_repr(raw)}")
    return int(raw)


def parse_reference(data: Any, where: str = "reference") -> Reference:
    """A reference from its YAML data; CompareInputError on anything malformed."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise CompareInputError(f"{where}: not a reference file (format: {FORMAT} expected)")
    try:
        columns = [str(c) for c in data["series_columns"]]
        ref_cells = []
        for i, raw in enumerate(data.get("cells") or []):
            metrics = {m: _bound(f"{where}: cells[{i}].{m}", raw[m]) for m in METRICS if m in raw}
            key = {k: _key_value(v) for k, v in raw.items() if k not in RESERVED}
            n = _count(f"{where}: cells[{i}].n", raw.get("n"))
            ref_cells.append(RefCell(key=key, metrics=metrics, n=n))
        ref_series = [
            RefSeries(
                key={k: _key_value(v) for k, v in raw.items() if k != "outcomes"},
                outcomes={
                    str(k): _count(f"{where}: series[{i}].outcomes.{k}", v)
                    for k, v in (raw.get("outcomes") or {}).items()
                },
            )
            for i, raw in enumerate(data.get("series") or [])
        ]
        return Reference(
            sweep=str(data.get("sweep") or ""),
            written=str(data.get("written") or ""),
            series_columns=columns,
            provenance=_provenance(data.get("provenance"), where),
            cells=ref_cells,
            series=ref_series,
            xfail=[XFail.model_validate(x) for x in data.get("xfail") or []],
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise CompareInputError(f"{where}: {exc}") from exc


def _key_value(value: Any) -> Any:
    """A key value as the sweep spells it: text that a reference written before r2bench
    quoted it reads as a number (`scenario: 1e3`) is that text again."""
    if isinstance(value, WrittenFloat) and read_as_number(value.text):
        return value.text
    return value


def _provenance(raw: Any, where: str) -> Facts:
    """The reference's `provenance:` mapping (field -> value or null); missing: empty."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise CompareInputError(f"{where}: provenance: expected a mapping of field: value")
    return {str(k): None if v is None else str(v) for k, v in raw.items()}


def load_reference(path: Path) -> Reference:
    """Read a reference file."""
    try:
        data = load_data(Path(path))
    except ConfigError as exc:
        raise CompareInputError(str(exc)) from exc
    return parse_reference(data, str(path))


def is_reference_file(path: Path) -> bool:
    """Whether `path` names a reference file rather than a sweep folder."""
    return Path(path).is_file() and Path(path).suffix in (".yaml", ".yml")


def _round(value: float) -> float:
    return float(f"{value:.4g}")


def reference_from_sweep(sweep: SweepData, policy: Policy) -> Reference:
    """A reference from a sweep: each cell's statistic, and bounds of at least the policy's
    `reference_tolerance`, widened to twice the cell's own relative interval (run-to-run noise
    of the policy included) when it is noisier."""
    names = series_columns(sweep.tables)
    out_cells = []
    for key, cell in sorted(cells(sweep.tables, names).items(), key=lambda kv: _sort(kv[0])):
        fields = dict(key)
        metrics = {}
        for metric in METRICS:
            groups = cell.samples[metric]
            if cell.count(metric) == 0:
                continue
            settings = policy.metric(metric, fields)
            value = point(groups, settings.statistic)
            rng = rng_for(policy.seed, "reference", str(key), metric)
            boots = bootstrap(groups, settings.statistic, policy.resamples, rng)
            spread = relative_change(
                value, value, boots * 0 + value, boots, True, policy.confidence,
                run_noise=policy.run_noise, runs=(0, len(groups)),
            )  # fmt: skip
            half = max(abs(spread.change_low), abs(spread.change_high))
            tolerance = round(max(policy.reference_tolerance, settings.min_effect, 2 * half), 2)
            lower, upper = (-tolerance, None) if HIGHER_IS_BETTER[metric] else (None, tolerance)
            metrics[metric] = Bound(
                value=_round(value), lower=lower, upper=upper, unit=UNITS[metric]
            )
        n = min(cell.count(m) for m in METRICS)
        out_cells.append(RefCell(key=fields, metrics=metrics, n=n))
    out_series = [
        RefSeries(key=dict(s.key), outcomes=dict(sorted(Counter(s.outcomes).items())))
        for k, s in sorted(
            series_outcomes(sweep.tables, names).items(), key=lambda kv: _sort(kv[0])
        )
    ]
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return Reference(
        sweep=sweep.name,
        written=stamp,
        series_columns=names,
        provenance=sweep_facts(sweep),
        cells=out_cells,
        series=out_series,
        xfail=list(policy.xfail),
    )


def _sort(key: Key) -> tuple[str, ...]:
    return tuple(f"{v:020d}" if isinstance(v, int) else str(v) for _, v in key)


class _FlowList(list[Any]):
    pass


def _flow_dumper() -> type[yaml.SafeDumper]:
    class Dumper(yaml.SafeDumper):
        pass

    def flow(dumper: yaml.SafeDumper, data: Any) -> yaml.Node:
        return dumper.represent_mapping("tag:yaml.org,2002:map", data, flow_style=True)

    def text(dumper: yaml.SafeDumper, data: str) -> yaml.Node:
        # YAML 1.1 writes `1e3` plain, and r2bench reads it back as 1000: quote such text,
        # so a scenario called 1e3 matches its own reference.
        style = "'" if read_as_number(data) else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)

    Dumper.add_representer(_FlowDict, flow)
    Dumper.add_representer(str, text)
    return Dumper


class _FlowDict(dict[str, Any]):
    pass


def reference_yaml(ref: Reference) -> str:
    """The reference as YAML: a header, then one line per cell and per series."""
    doc: dict[str, Any] = {
        "format": FORMAT,
        "sweep": ref.sweep,
        "written": ref.written,
        "series_columns": _FlowList(ref.series_columns),
        "provenance": dict(ref.provenance),
        "cells": [
            _FlowDict(
                {
                    **c.key,
                    "n": c.n,
                    **{m: [b.value, b.lower, b.upper, b.unit] for m, b in c.metrics.items()},
                }
            )
            for c in ref.cells
        ],
        "series": [_FlowDict({**s.key, "outcomes": dict(s.outcomes)}) for s in ref.series],
        "xfail": [
            _FlowDict(x.model_dump(exclude_none=True, exclude_defaults=False)) for x in ref.xfail
        ],
    }
    head = (
        "# r2bench reference: expected values per cell, [value, lower, upper, unit]\n"
        "# (bounds relative to the value, null: unbounded). Written by\n"
        "# `r2bench compare SWEEP --write-reference FILE`; edit bounds and xfail by hand.\n"
    )
    dumper = _flow_dumper()
    dumper.add_representer(
        _FlowList, lambda d, v: d.represent_sequence("tag:yaml.org,2002:seq", v, flow_style=True)
    )
    return head + yaml.dump(doc, Dumper=dumper, sort_keys=False, width=100_000)


def reference_keyed(ref: Reference) -> tuple[dict[Key, RefCell], dict[Key, RefSeries]]:
    """The reference's cells and series by key (the order of its series columns)."""
    names = ref.cell_keys()
    by_cell = {make_key(c.key, names): c for c in ref.cells}
    by_series = {make_key(s.key, ref.series_columns): s for s in ref.series}
    return by_cell, by_series
