"""Every malformed file in tests/corpus is rejected with a located, actionable error and exit 2.

Each corpus file starts with `# expect-path: FIELD.PATH` and `# expect: MESSAGE PART`; the test
runs the real CLI (`r2bench plan`) and checks both appear on one error line together with the
file name, line and column, and that no traceback escapes. An experiment case may name the
testbed it is checked against with `# against: FILE` (a file in tests/corpus/against/: the
corpus testbed with one hostile change), else it is checked against tests/corpus/testbed.yaml.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support import paths
from tests.support.cli_runner import invoke_as_main

CORPUS = paths.CORPUS
CORPUS_TESTBED = CORPUS / "testbed.yaml"
GOOD_EXPERIMENT = paths.REPO / "experiments" / "paper" / "one-nic-down.yaml"

EXPERIMENT_CASES = sorted((CORPUS / "experiment").glob("*.yaml"))
TESTBED_CASES = sorted((CORPUS / "testbed").glob("*.yaml"))


def _header(path: Path) -> dict[str, str]:
    text = path.read_text(encoding="utf-8")
    return dict(re.findall(r"^# (expect(?:-path)?|against): (.*)$", text, re.MULTILINE))


def _expectations(path: Path) -> tuple[str, str]:
    header = _header(path)
    return header["expect-path"].strip(), header.get("expect", "").strip()


def _testbed_for(case: Path) -> Path:
    against = _header(case).get("against")
    return CORPUS / "against" / against.strip() if against else CORPUS_TESTBED


def _plan(experiment: Path, testbed: Path) -> tuple[int, str]:
    result = invoke_as_main("plan", str(experiment), "--testbed", str(testbed))
    return result.exit_code, result.output


def _assert_rejected(case: Path, exit_code: int, output: str) -> None:
    path, message = _expectations(case)
    assert exit_code == 2, output
    assert "Traceback" not in output
    located = re.compile(rf"^{re.escape(str(case))}:\d+:\d+: (.*)$", re.MULTILINE)
    lines = located.findall(output)
    assert lines, f"no file:line:col error line in:\n{output}"
    assert any(line.startswith(f"{path}: ") and message in line for line in lines), output


def test_corpus_is_large_enough() -> None:
    assert len(EXPERIMENT_CASES) + len(TESTBED_CASES) >= 100


@pytest.mark.parametrize("case", EXPERIMENT_CASES, ids=lambda p: p.stem)
def test_malformed_experiment_is_rejected(case: Path) -> None:
    _assert_rejected(case, *_plan(case, _testbed_for(case)))


@pytest.mark.parametrize("case", TESTBED_CASES, ids=lambda p: p.stem)
def test_malformed_testbed_is_rejected(case: Path) -> None:
    _assert_rejected(case, *_plan(GOOD_EXPERIMENT, case))


def test_corpus_baseline_is_valid() -> None:
    """The corpus testbed and the paper experiment are accepted, so failures above are real."""
    exit_code, output = _plan(GOOD_EXPERIMENT, CORPUS_TESTBED)
    assert exit_code == 0, output


@pytest.mark.parametrize(
    "variant", sorted((CORPUS / "against").glob("*.yaml")), ids=lambda p: p.stem
)
def test_corpus_testbed_variants_are_valid(variant: Path) -> None:
    """Each hostile testbed variant is itself a valid file: only the fault it meets is refused."""
    exit_code, output = _plan(GOOD_EXPERIMENT.with_name("one-nic-down.yaml"), variant)
    assert exit_code in (0, 2), output
    assert variant.name not in output, output
