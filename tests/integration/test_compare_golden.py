"""`compare` gives the verdicts of record on every committed example and test sweep, each
with itself and with every other that shares a cell, and on the sample sweeps of the compare
tests (tests/support/compare_golden.py; the digests were written by the per-cell
implementation the vectorised one replaced)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from tests.support.compare_golden import FIELDS, comparisons, digest, read

NUMBERS = frozenset({"baseline", "candidate", "change", "low", "high"})
EXACT = [i for i, name in enumerate(FIELDS) if name not in NUMBERS]


def _close(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    return bool(a == b)


def test_every_verdict_and_figure_is_the_one_of_record(tmp_path: Path) -> None:
    golden = read()
    seen = set()
    for name, result in comparisons(tmp_path):
        seen.add(name)
        want = golden.get(name)
        assert want is not None, f"{name}: no digest of record (tests/data/compare-golden)"
        got = digest(result)
        assert len(got) == len(want), f"{name}: {len(got)} rows, of record {len(want)}"
        for new, old in zip(got, want, strict=True):
            assert [new[i] for i in EXACT] == [old[i] for i in EXACT], f"{name}: {new} != {old}"
            differ = [
                FIELDS[i] for i, (a, b) in enumerate(zip(new, old, strict=True)) if not _close(a, b)
            ]
            assert not differ, f"{name}: {differ} differ: {new} != {old}"
    assert seen == set(golden), f"comparisons of record not made: {sorted(set(golden) - seen)}"


def test_the_record_holds_every_kind_of_verdict() -> None:
    verdicts = {row[FIELDS.index("verdict")] for rows in read().values() for row in rows}
    assert {"regression", "improvement", "same", "undecided", "missing", "new"} <= verdicts
