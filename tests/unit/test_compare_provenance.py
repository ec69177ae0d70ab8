"""compare's provenance check over partly known testbeds: a fact only some runs record is
partly unknown, and says so; it is never a difference."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from r2bench.compare.provenance import compare_provenance, sweep_facts
from r2bench.compare.samples import load_sweep
from r2bench.runfolder import runformat
from r2bench.runfolder import store as st
from tests.support.cli_runner import invoke_wide
from tests.support.sweeps import copy_sweep

# ---- compare: a fact only some runs record is partly unknown, and says so --------------------


def _drop_from_spec(run: Path, field: str) -> None:
    spec = json.loads((run / runformat.SPEC).read_text())
    spec.pop(field, None)
    (run / runformat.SPEC).write_text(json.dumps(spec))


@pytest.mark.parametrize("unnamed", [1, 3])
def test_runs_without_a_testbed_are_warned_of_even_when_others_name_one(
    small_sweep: Path, tmp_path: Path, unnamed: int
) -> None:
    cand = copy_sweep(small_sweep, tmp_path / "cand")
    runs = list(st.RunStore.at(cand).run_dirs())
    for run in runs[:unnamed]:
        _drop_from_spec(run, "testbed")
    facts = sweep_facts(load_sweep(cand))
    base = sweep_facts(load_sweep(small_sweep))
    problems, warnings = compare_provenance(base, facts)
    assert problems == []
    (line,) = [w for w in warnings if "testbed" in w]
    assert f"{unnamed} of {len(runs)} runs" in line and "candidate" in line
    result = invoke_wide("compare", str(small_sweep), str(cand))
    assert f"{unnamed} of {len(runs)} runs" in result.output


def test_partly_known_facts_on_both_sides_are_never_a_difference(small_sweep: Path) -> None:
    facts = sweep_facts(load_sweep(small_sweep))
    base = {**facts, "testbed unknown in": "1 of 4 runs"}
    cand = {**facts, "testbed unknown in": "3 of 4 runs"}
    problems, warnings = compare_provenance(base, cand)
    assert problems == [] and len(warnings) == 2
