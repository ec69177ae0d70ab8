"""Real outputs of R-2CCL (CUDA 13 build) and stock NCCL 2.28.9 on a 2x H200 host
(tests/data/r2ccl/README.md says how each was made) through the parser and the classifier.

The xfail tests mark gaps these outputs revealed; each turns into a failure (strict) once fixed,
so the marker must then be removed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from r2bench.analysis.outcome import classify
from r2bench.parse.events import parse_events
from r2bench.parse.models import Outcome, OutcomeStatus
from r2bench.parse.nccltests.text import parse_text
from tests.support import paths

DATA = paths.DATA / "r2ccl"
SIZES = [1 << 20, 4 << 20, 16 << 20, 64 << 20, 256 << 20]


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")


def _run(name: str) -> tuple[str, int]:
    base = (
        DATA / "runs" / name if (DATA / "runs" / f"{name}.txt").exists() else DATA / "faults" / name
    )
    return _text(base.with_suffix(".txt")), int(base.with_suffix(".exit").read_text())


def _outcome(name: str) -> Outcome:
    text, code = _run(name)
    return classify(code, parsed=parse_text(text), events=parse_events(text))


@pytest.mark.parametrize("path", ["nvlink", "socket"])
def test_stock_nccl_runs_parse_and_pass(path: str) -> None:
    text, code = _run(f"stock-{path}-all_reduce")
    parsed = parse_text(text)
    assert code == 0 and parsed.nccl_library == 22809 and parsed.concluded
    rows = [r for r in parsed.rows if r.placement == "out_of_place"]
    assert [r.size_bytes for r in rows] == SIZES and not parsed.wrong_rows
    assert _outcome(f"stock-{path}-all_reduce").status is OutcomeStatus.OK


def test_r2ccl_loaded_and_reported_its_version() -> None:
    text, _ = _run("r2ccl-m2-nvlink-all_reduce")
    parsed = parse_text(text)
    assert parsed.nccl_library == 22304 and "NCCL version 2.23.4+cuda13.0" in text
    assert [r.size_bytes for r in parsed.rows if r.placement == "out_of_place"] == SIZES


def test_rows_split_by_log_lines_are_rejoined() -> None:
    """R-2CCL logs during each collective on the stdout where nccl-tests prints half a row:
    the row's pieces (some glued to the start of a log line) are put back together."""
    parsed = parse_text(_run("r2ccl-m0-nvlink-all_reduce")[0])
    for placement in ("out_of_place", "in_place"):
        assert [r.size_bytes for r in parsed.rows if r.placement == placement] == SIZES
    assert not parsed.warnings


@pytest.mark.xfail(
    strict=True,
    reason="over sockets R-2CCL logs every network step: pieces of rows land inside log lines "
    "(not only at their start), where they cannot be told from the log's own numbers",
)
def test_rows_inside_per_step_logs_are_parsed() -> None:
    parsed = parse_text(_run("r2ccl-m1-socket-all_reduce")[0])
    assert [r.size_bytes for r in parsed.rows if r.placement == "out_of_place"] == SIZES


def test_mode3_on_one_host_returns_wrong_data() -> None:
    """R2CC_MODE=3 with no NIC: every collective returns in ~4 us with every element wrong."""
    text, code = _run("r2ccl-m3-nvlink-all_reduce")
    parsed = parse_text(text)
    assert code == 7 and parsed.oob_failed and len(parsed.wrong_rows) == 10
    assert all(r.time_us is not None and r.time_us < 5 for r in parsed.rows)


@pytest.mark.xfail(
    strict=True,
    reason="a run whose only failure is its #wrong check (nccl-tests exits non-zero after "
    "concluding) is classified crashed, not wrong_results",
)
def test_mode3_outcome_is_wrong_results() -> None:
    assert _outcome("r2ccl-m3-nvlink-all_reduce").status is OutcomeStatus.WRONG_RESULTS


@pytest.mark.parametrize("library", ["stock", "r2ccl-m0"])
def test_sigkilled_rank_is_a_crash_naming_the_rank(library: str) -> None:
    outcome = _outcome(f"{library}-socket-sigkill")
    assert outcome.status is OutcomeStatus.CRASHED and outcome.failed_rank == 1
    assert "killed by signal 9" in outcome.reason


def test_evidence_is_printable() -> None:
    """R-2CCL's socket WARN line carries uninitialised bytes; the evidence must not."""
    outcome = _outcome("r2ccl-m0-socket-sigkill")
    text = outcome.reason + "".join(e.text for e in outcome.evidence)
    assert text.isprintable()


def test_outer_timeout_is_a_timeout_only_with_the_harness_flag() -> None:
    """Mode 1 under R2CC_DISCONNECTED_HCA hung; only the harness knows its deadline fired."""
    text, code = _run("r2ccl-m1-socket-hca0-all_reduce")
    assert code == 137 and "R2CC_MODE=1 (SEND): Channel" in text
    outcome = classify(code, timed_out=True, parsed=parse_text(text), events=parse_events(text))
    assert outcome.status is OutcomeStatus.TIMEOUT
