"""Every malformed file in tests/corpus is rejected with a located, actionable error and exit 2.

Each corpus file starts with `# expect-path: FIELD.PATH` and `# expect: MESSAGE PART`; the test
runs the real CLI (`r2bench plan`) and checks both appear on one error line together with the
file name, line and column, and that no traceback escapes.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from r2bench.cli import app

CORPUS = Path(__file__).parent / "corpus"
CORPUS_TESTBED = CORPUS / "testbed.yaml"
GOOD_EXPERIMENT = Path(__file__).parents[1] / "experiments" / "paper" / "one-nic-down.yaml"

EXPERIMENT_CASES = sorted((CORPUS / "experiment").glob("*.yaml"))
TESTBED_CASES = sorted((CORPUS / "testbed").glob("*.yaml"))


def _expectations(path: Path) -> tuple[str, str]:
    header = dict(re.findall(r"^# (expect(?:-path)?): (.*)$", path.read_text(), re.MULTILINE))
    return header["expect-path"].strip(), header.get("expect", "").strip()


def _plan(experiment: Path, testbed: Path) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["plan", str(experiment), "--testbed", str(testbed)])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
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
    assert len(EXPERIMENT_CASES) + len(TESTBED_CASES) >= 40


@pytest.mark.parametrize("case", EXPERIMENT_CASES, ids=lambda p: p.stem)
def test_malformed_experiment_is_rejected(case: Path) -> None:
    _assert_rejected(case, *_plan(case, CORPUS_TESTBED))


@pytest.mark.parametrize("case", TESTBED_CASES, ids=lambda p: p.stem)
def test_malformed_testbed_is_rejected(case: Path) -> None:
    _assert_rejected(case, *_plan(GOOD_EXPERIMENT, case))


def test_corpus_baseline_is_valid() -> None:
    """The corpus testbed and the paper experiment are accepted, so failures above are real."""
    exit_code, output = _plan(GOOD_EXPERIMENT, CORPUS_TESTBED)
    assert exit_code == 0, output
