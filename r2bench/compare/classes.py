"""The outcome classes (`analysis.verdict`: TRANSPARENT, DECLINED, ...) of each faulted series
on both sides of a comparison, printed under the verdict table (pure).

`compare` judges a series' outcomes by the share that ended ok; these lines give a reader the
classes the field speaks in, with the runs whose failover could not have worked (not armed)
and the pre-told ones counted apart. They judge nothing: the gate is the table's.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import pandas as pd

from r2bench.analysis.armed import Armed
from r2bench.analysis.verdict import OutcomeClass
from r2bench.compare.samples import Key, make_key
from r2bench.tables.build import Tables

PLAIN = ("collective", "library", "scenario", "recovery")
"""Series fields shown as bare values (the others as NAME=value)."""
HEADING = "outcome classes of the faulted series (baseline -> candidate):"


def series_classes(tables: Tables, names: Sequence[str]) -> dict[Key, str]:
    """Per faulted series: its classes as `DECLINED 2/3, HUNG 1/3`, plus the runs not armed
    and pre-told (empty when the tables have no `verdict` column: an older sweep)."""
    runs = tables.runs
    if "verdict" not in runs:
        return {}
    faulted = runs[runs["verdict"] != OutcomeClass.NO_FAULT.value]
    grouped: dict[Key, list[dict[str, object]]] = {}
    for row in faulted.to_dict("records"):
        grouped.setdefault(make_key(row, names), []).append(row)
    return {key: _text(rows) for key, rows in grouped.items()}


def _text(rows: list[dict[str, object]]) -> str:
    counted = Counter(str(r["verdict"]) for r in rows)
    total = len(rows)
    text = ", ".join(f"{name} {n}/{total}" for name, n in sorted(counted.items()))
    unarmed = sum(1 for r in rows if r.get("armed") == Armed.UNARMED.value)
    told = sum(1 for r in rows if r.get("told") == "pre-told")
    if unarmed:
        text += f" ({unarmed} not armed)"
    if told:
        text += f" ({told} pre-told)"
    return text


def class_lines(names: Sequence[str], baseline: Tables | None, candidate: Tables) -> list[str]:
    """The lines under the table: one per faulted series of the candidate (the baseline's
    classes beside it; `-` against a reference file, which keeps outcomes only)."""
    cand = series_classes(candidate, names)
    if not cand:
        return []
    base = series_classes(baseline, names) if baseline is not None else {}
    lines = [HEADING]
    for key in sorted(cand, key=str):
        label = " ".join(str(v) if n in PLAIN else f"{n}={v}" for n, v in key if not _blank(v))
        lines.append(f"  {label}: {base.get(key, '-')} -> {cand[key]}")
    return lines


def _blank(value: object) -> bool:
    return value is None or value == "" or (isinstance(value, float) and pd.isna(value))
