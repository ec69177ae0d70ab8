"""What the tiers of test_config_hostile.py share (tests/unit, tests/integration, tests/system)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from r2bench.config.errors import ConfigError
from r2bench.plan.build import load_inputs, make_plan
from r2bench.plan.render import plan_json
from tests.support import paths

CORPUS = paths.CORPUS
TESTBED = CORPUS / "testbed.yaml"


def outcome(tmp_path: Path, text: str, testbed: Path = TESTBED) -> ConfigError | None:
    path = tmp_path / "hostile.yaml"
    path.write_text(text, encoding="utf-8")
    try:
        make_plan(load_inputs(path, testbed))
    except ConfigError as error:
        assert error.issues
        for issue in error.issues:
            assert issue.file in (str(path), str(testbed))
            assert issue.line is not None, issue.render()
        return error
    return None


# ---- nesting -------------------------------------------------------------------------------


def nest(depth: int, kinds: list[str]) -> str:
    opening = "".join("[" if kinds[i % len(kinds)] == "l" else "{a: " for i in range(depth))
    closing = "".join("]" if kinds[i % len(kinds)] == "l" else "}" for i in reversed(range(depth)))
    return opening + "1" + closing


def assert_plain_numbers(plan: object) -> None:
    data = json.loads(plan_json(plan))  # type: ignore[arg-type]
    for run in data["runs"]:
        assert isinstance(run["spec"]["deadline_s"], int | float)
        for fault in run["faults"]:
            assert isinstance(fault["lease_s"], int | float)
            lease = re.search(r"--lease-s (\S+)", fault["inject"]["command"])
            assert lease and re.fullmatch(r"[0-9]+(\.[0-9]+)?", lease.group(1)), lease


# ---- bounded memory: the sweep is counted before it is built ---------------------------------

SWEEP_BOMB = """\
name: bomb
libraries: {l: {recipe: r2ccl}}
collectives: [all_reduce]
sizes: {begin: 8, end: 1G}
sweep:
  matrix:
    A: &v [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
    B: *v
    C: *v
    D: *v
    E: *v
    F: *v
    G: *v
"""
