"""The report's recovery-strategy section (`report.recovery_cost`) from a sweep with a restart
run and its baseline (`tests/unit/test_recovery_cost_table.py`'s folders)."""

from __future__ import annotations

import json
import re

import pytest

from r2bench.analysis.extrapolate import SCALE_FILE, ScaleInputs
from r2bench.report.html import build_report
from r2bench.report.recovery_cost import (
    answer_html,
    extrapolation_html,
    has_recovery_cost,
    read_scale,
    timeline_figures,
)
from r2bench.tables import build as tb
from tests.support.training_runs import (
    TrainingText,
    fault_applied,
    launch_offset,
    training_folder,
)
from tests.unit.test_recovery_cost_table import restart_lines


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    root = tmp_path_factory.mktemp("recovery-report")
    training_folder(root, "a-base", TrainingText(), library="nccl")
    run = training_folder(root, "b-restart", TrainingText(), faulted=True)
    (run / "stdout.txt").write_text("\n".join(restart_lines(fault_applied(), launch_offset())))
    spec = json.loads((run / "spec.json").read_text())
    spec["recovery"] = {"strategy": "restart"}
    (run / "spec.json").write_text(json.dumps(spec))
    return root, tb.build_tables(root)


def test_the_answer_has_a_row_per_strategy_library_and_fault(sweep) -> None:  # type: ignore[no-untyped-def]
    _, tables = sweep
    assert has_recovery_cost(tables)
    text = answer_html(tables)
    assert text.count("<tr>") == 2  # the header and one row
    assert "<td>restart</td><td>r2ccl</td><td>nic3-down-3s</td><td>1</td>" in text
    assert "the fault to the first abort" in text  # a basis on hover


def test_the_timeline_is_flat_while_the_job_restarts(sweep) -> None:  # type: ignore[no-untyped-def]
    _, tables = sweep
    (figure,) = timeline_figures(tables)
    trace = figure.spec["data"][0]
    assert trace["y"][:25] == list(range(1, 26))
    assert trace["y"][25] == 26 and trace["x"][25] == pytest.approx(4.3, abs=1e-3)
    notes = [a["text"] for a in figure.spec["layout"]["annotations"]]
    assert notes == ["abort", "resume", "fault"]


def test_the_extrapolation_shows_its_inputs_apart(sweep) -> None:  # type: ignore[no-untyped-def]
    _, tables = sweep
    text = extrapolation_html(tables, ScaleInputs(ranks=64), "the test")
    assert "Extrapolation (not measured)" in text
    assert "<code>ranks</code> = 64" in text and "<code>restart_s</code> = 4080.0" in text
    assert "64 x (2 + 4080" in text


def test_the_page_carries_the_section(sweep, tmp_path) -> None:  # type: ignore[no-untyped-def]
    root, tables = sweep
    out = tmp_path / "report.html"
    figures = build_report(root, tables, out)
    assert any(f.id == "recoverycost-restart" for f in figures)
    page = out.read_text()
    assert "Recovery strategies: what one NIC failure cost" in page
    assert page.index("what one NIC failure cost") < page.index("Training: step time")


def test_the_users_scale_comes_from_the_sweeps_at_scale_file(  # type: ignore[no-untyped-def]
    sweep, tmp_path
) -> None:
    root, tables = sweep
    (root / SCALE_FILE).write_text("ranks: 4096\nrestart_s: 600\ncheckpoint_load_s: 30.5\n")
    page_path = tmp_path / "report.html"
    build_report(root, tables, page_path)
    page = page_path.read_text()
    assert "Inputs, from at-scale.yaml" in page
    assert "<code>ranks</code> = 4096" in page and "<code>restart_s</code> = 600.0" in page
    assert "4096 x (2 + 600" in page  # the formula used the user's numbers
    for wrong, said in (
        ("gpus: 8\n", "'gpus' is not an input; use one of ranks"),
        ("ranks: 1.5\n", "ranks: 1.5 is not a whole number >= 0"),
        ("restart_s: -1\n", "restart_s: -1 is not a number >= 0"),
        ("[1, 2]\n", "give a mapping of ranks"),
    ):
        (root / SCALE_FILE).write_text(wrong)
        with pytest.raises(ValueError, match=re.escape(said)):
            read_scale(root)
    (root / SCALE_FILE).unlink()
    assert read_scale(root)[0] == ScaleInputs()
