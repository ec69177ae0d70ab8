"""`max_runs` is counted on what runs: after the sweep's exclusions, times the repeats; a sweep
section too large to expand at all is refused before it is, located."""

from __future__ import annotations

import time
from pathlib import Path

from r2bench.config.errors import ConfigError
from r2bench.plan.build import load_inputs, make_plan
from r2bench.plan.sweep import EXPANSION_LIMIT
from tests.support import paths

CLOUDLAB = paths.REPO / "experiments" / "testbeds" / "dgx-h100-2node.yaml"
BASE = (
    "name: t\ncollectives: [all_reduce]\nsizes: {begin: 8, end: 1M}\n"
    "libraries:\n  stock: {recipe: nccl}\n"
)
TEN = "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]"


def _plan_error(tmp_path: Path, body: str) -> ConfigError | None:
    path = tmp_path / "exp.yaml"
    path.write_text(BASE + body)
    try:
        make_plan(load_inputs(path, CLOUDLAB))
    except ConfigError as error:
        return error
    return None


def test_exclusions_are_counted_before_the_limit(tmp_path: Path) -> None:
    """Before: 10 x 10 with 90 excluded was refused at max_runs 10 (counted as 100)."""
    sweep = f"sweep:\n  matrix:\n    A: {TEN}\n    B: {TEN}\n  exclude:\n"
    sweep += "".join(
        f"    - {{A: '{a}', B: {[str(b) for b in range(10) if b != a]}}}\n" for a in range(10)
    )
    assert _plan_error(tmp_path, sweep + "max_runs: 10\n") is None
    error = _plan_error(tmp_path, sweep + "max_runs: 9\n")
    assert error is not None and len(error.issues) == 1
    message = error.issues[0].message
    assert "expands to 10 runs" in message and "90 combinations excluded" in message, message
    error = _plan_error(tmp_path, sweep + "max_runs: 19\nrepeats: 2\n")
    assert error is not None and "expands to 20 runs" in error.issues[0].message


def test_without_exclusions_the_count_is_refused_before_anything_is_built(tmp_path: Path) -> None:
    body = f"sweep:\n  matrix:\n    A: {TEN}\n    B: {TEN}\n    C: {TEN}\n    D: {TEN}\n"
    body += f"    E: {TEN}\n    F: {TEN}\n    G: {TEN}\n    H: {TEN}\n    I: {TEN}\n"
    started = time.perf_counter()
    error = _plan_error(tmp_path, body)
    assert time.perf_counter() - started < 5  # 10^9 combinations never expanded
    assert error is not None and "expands to 1000000000 runs" in error.issues[0].message


def test_a_sweep_section_too_large_to_expand_is_refused_located(tmp_path: Path) -> None:
    body = f"sweep:\n  matrix:\n    A: {TEN}\n    B: {TEN}\n    C: {TEN}\n    D: {TEN}\n"
    body += f"    E: {TEN}\n    F: {TEN}\n    G: {TEN}\n  exclude:\n    - {{A: '1'}}\n"
    error = _plan_error(tmp_path, body)
    assert error is not None and len(error.issues) == 1
    issue = error.issues[0]
    assert issue.line == 6 and issue.path == ("sweep",)
    assert "names 10000000 combinations before its exclusions" in issue.message
    assert f"more than the {EXPANSION_LIMIT}" in issue.message
