"""The comparisons whose verdicts `compare` must keep, and a plain digest of each.

Every committed example (results/examples/*) and test sweep (tests/data/sweeps/*,
tests/data/quickstart-sweep) compared with itself, every pair of them that shares a cell,
and the sample sweeps of the compare tests (a 10 % busbw drop at one size, mode 1 crashing,
too few samples, a reference written from a sweep). `tests/data/compare-golden/` holds the
digests the implementation of record gave; `python -m tests.support.compare_golden` writes
them again (only when a change of verdicts is meant)."""

from __future__ import annotations

import gzip
import json
import math
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from r2bench.compare.policy import Policy, load_policy
from r2bench.compare.reference import reference_from_sweep
from r2bench.compare.samples import load_sweep
from r2bench.compare.verdict import Comparison, compare_reference, compare_sweeps
from r2bench.runfolder.runformat import TABLES_DIR
from tests.support import paths, sample_sweep
from tests.support.sample_sweep import SampleConfig, write_sample_sweep

GOLDEN = paths.DATA / "compare-golden"
DIGESTS = "digests.json.gz"
COMMITTED = sorted(
    [
        *(p for p in (paths.REPO / "results" / "examples").iterdir() if p.is_dir()),
        *(p for p in (paths.DATA / "sweeps").iterdir() if p.is_dir()),
        paths.DATA / "quickstart-sweep",
    ]
)
SHAPE = {"modes": (None, "1"), "sizes": 10, "iterations": 30, "repeats": 3}
DROP_SIZE = 8 << 8
POLICIES = {
    "default": Policy(),
    "ci-virtual": load_policy(paths.REPO / "results" / "baselines" / "ci-virtual.policy.yaml"),
}


FIELDS = ("key", "metric", "verdict", "baseline", "candidate", "change", "low", "high",
          "n_baseline", "n_candidate", "threshold", "note", "undecided")  # fmt: skip
"""What a digest row holds, in order."""


def digest(result: Comparison) -> list[list[Any]]:
    """Each row as plain data (FIELDS): key, metric, verdict, why, sample counts and numbers
    (12 significant digits)."""
    return [
        [
            ",".join(f"{k}={v}" for k, v in row.key),
            row.metric,
            row.verdict.value,
            *(_number(v) for v in (row.baseline, row.candidate, row.change, row.low, row.high)),
            row.n_baseline,
            row.n_candidate,
            row.threshold,
            row.note,
            row.undecided.value if row.undecided else None,
        ]
        for row in result.rows
    ]


def _number(value: Any) -> Any:
    if isinstance(value, float):
        return None if math.isnan(value) else float(f"{value:.12g}")
    return value


def _copy(sweep: Path, root: Path) -> Path:
    """A copy without its tables: built afresh, the committed files left as they are."""
    target = root / f"{sweep.parent.name}--{sweep.name}"
    if not target.exists():
        ignore = shutil.ignore_patterns(TABLES_DIR, "report.html")
        shutil.copytree(sweep, target, ignore=ignore)
    return target


def _sample(root: Path, name: str, seed: int, **kw: Any) -> Path:
    cfg = SampleConfig(sweep=name, seed=seed, **{**SHAPE, **kw})
    write_sample_sweep(root, paths.DATA / "nccl-tests", cfg)
    return root / name


def sample_sweeps(root: Path) -> dict[str, Path]:
    """The sample sweeps of the compare tests (seeded: the same files every time)."""
    out = {"base": _sample(root, "base", 1), "same": _sample(root, "same", 2)}
    with pytest.MonkeyPatch.context() as mp:
        original: Callable[[int], float] = sample_sweep._base_us
        mp.setattr(sample_sweep, "_base_us", lambda s: original(s) / (0.9 if s == DROP_SIZE else 1))
        out["drop"] = _sample(root, "drop", 3)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sample_sweep, "MODE_SLOWDOWN", {"2": 1.4})
        out["crash"] = _sample(root, "crash", 4)
    out["short"] = _sample(root, "short", 5, iterations=2, repeats=1)
    out["short2"] = _sample(root, "short2", 6, iterations=2, repeats=1)
    return out


def comparisons(root: Path, of_record: bool = True) -> Iterator[tuple[str, Comparison]]:
    """Every comparison of record, by name (a name is a key of the digests). `of_record`:
    only the committed sweeps the record was written on; one committed since has no verdict
    of the per-cell implementation to be held to."""
    names = {p.parent.name + "--" + p.name: p for p in COMMITTED}
    if of_record:
        record = read()
        names = {n: p for n, p in names.items() if f"default--{n}--{n}" in record}
    loaded = {name: load_sweep(_copy(path, root)) for name, path in names.items()}
    for name, path in sample_sweeps(root / "samples").items():
        loaded[f"sample--{name}"] = load_sweep(path)
    for a, base in loaded.items():
        for b, cand in loaded.items():
            result = compare_sweeps(base, cand, POLICIES["default"])
            if a == b or result.matched_cells:
                yield f"default--{a}--{b}", result
    samples = [name for name in loaded if name.startswith("sample--")]
    for a in samples:
        for b in samples:
            yield (
                f"ci-virtual--{a}--{b}",
                compare_sweeps(loaded[a], loaded[b], POLICIES["ci-virtual"]),
            )
    for pname, policy in POLICIES.items():
        for a in ("sample--base", "sample--same"):
            ref = reference_from_sweep(loaded[a], policy)
            for b in ("sample--same", "sample--drop", "sample--crash", "sample--short"):
                yield f"{pname}--ref-{a}--{b}", compare_reference(ref, loaded[b], policy)


def read() -> dict[str, list[list[Any]]]:
    """The digests of record."""
    data: dict[str, list[list[Any]]] = json.loads(gzip.decompress((GOLDEN / DIGESTS).read_bytes()))
    return data


def write(root: Path) -> int:
    """Write every digest under GOLDEN; returns how many."""
    GOLDEN.mkdir(exist_ok=True)
    everything = {name: digest(result) for name, result in comparisons(root, of_record=False)}
    text = json.dumps(everything, sort_keys=True, separators=(",", ":"))
    (GOLDEN / DIGESTS).write_bytes(gzip.compress(text.encode(), mtime=0))
    return len(everything)


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        print(f"wrote {write(Path(tmp))} comparisons to {GOLDEN}", file=sys.stderr)
