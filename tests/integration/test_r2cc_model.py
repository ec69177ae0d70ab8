"""R-2CCL's performance model (analysis/r2cc_model.py) against upstream's README and its 07 log,
and its report section and figure on the imported reference logs.

This module holds those with real processes; the same subject's other tests:
tests/unit/test_r2cc_model.py (its pure tests).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import paths
from tests.support.r2cc_model import imported_tables

LOGS = paths.DATA / "r7525" / "logs"


def test_report_and_figure_on_all_of_logs(tmp_path: Path) -> None:
    pytest.importorskip("plotly")
    from r2bench.figures.registry import draw_model
    from r2bench.report.html import build_report
    from r2bench.report.model import SECTION_TITLE

    tables = imported_tables(LOGS, tmp_path)
    drawn = draw_model(tables)
    assert drawn.claim.verdict == "holds"
    assert len(drawn.claim.numbers) == 10  # 3 Balance (03, 05, 07), 7 R2CC-AllReduce
    bars = drawn.figure.spec["data"]
    assert [t["name"] for t in bars] == [
        "measured (out-of-place)",
        "measured (in-place)",
        "predicted (model)",
    ]
    out = tmp_path / "report.html"
    build_report(tmp_path / "r7525", tables, out)
    page = out.read_text()
    assert SECTION_TITLE.replace("'", "&#x27;") in page and "figure-model-ratio" in page
    assert "more than 5 % off" not in page
