"""Hostile and broken results folders: the CI gate counts every cell, nothing is written or read
outside the sweep folder, one bad run record never takes the sweep down, and text from records
stays text in compare's markdown and JUnit XML."""

from __future__ import annotations

import json
import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from sample_sweep import SampleConfig, write_sample_sweep
from typer.testing import CliRunner

from r2bench.cli import app
from r2bench.records import store as st

CAPTURED = Path(__file__).parent / "data" / "nccl-tests"
SMALL = {"modes": (None, "1"), "scenarios": ("none",), "repeats": 5, "sizes": 3, "iterations": 6}


def _sample(root: Path, name: str, seed: int = 1, **shape: object) -> Path:
    cfg = SampleConfig(sweep=name, seed=seed, **{**SMALL, **shape})  # type: ignore[arg-type]
    write_sample_sweep(root, CAPTURED, cfg)
    return root / name


def _cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "250"})
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.output


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _sample(tmp_path_factory.mktemp("base"), "base")


def _copy(sweep: Path, to: Path, name: str) -> Path:
    target = to / name
    shutil.copytree(sweep, target, symlinks=True)
    return target


# ---- the gate ----------------------------------------------------------------------------------


def test_candidate_whose_every_run_was_cut_off_fails_the_gate(
    baseline: Path, tmp_path: Path
) -> None:
    cut = _copy(baseline, tmp_path, "cut")
    for run in cut.iterdir():
        (run / st.COMPLETE).unlink()
    md, xml = tmp_path / "c.md", tmp_path / "c.xml"
    code, out = _cli("compare", str(baseline), str(cut), "--markdown", str(md), "--junit", str(xml))
    assert code == 1, out
    assert "not judged" in out and "incomplete" in out
    text = md.read_text()
    assert "❌" in text and "✅" not in text
    suite = ET.parse(xml).getroot().find("testsuite")
    assert suite is not None and int(suite.get("failures") or 0) > 0
    # explicitly allowed: the verdict stands on what was judged (nothing regressed)
    code, out = _cli("compare", str(baseline), str(cut), "--allow-incomplete", "--allow-undecided")
    assert code == 0, out


def test_missing_cells_fail_the_gate_and_are_named(baseline: Path, tmp_path: Path) -> None:
    fewer = _sample(tmp_path, "fewer", seed=2, sizes=2)
    code, out = _cli("compare", str(baseline), str(fewer), "--allow-undecided")
    assert code == 1, out
    assert "missing" in out and "32B" in out
    assert (
        _cli("compare", str(baseline), str(fewer), "--allow-incomplete", "--allow-undecided")[0]
        == 0
    )


def test_one_cut_off_run_of_a_series_fails_the_gate(baseline: Path, tmp_path: Path) -> None:
    cand = _copy(baseline, tmp_path, "one-cut")
    (sorted(cand.iterdir())[0] / st.COMPLETE).unlink()
    code, out = _cli("compare", str(baseline), str(cand), "--allow-undecided")
    assert code == 1, out
    assert "1 of 5 candidate runs did not finish" in out


def test_moved_aside_attempts_of_a_resumed_sweep_do_not_fail_the_gate(
    baseline: Path, tmp_path: Path
) -> None:
    cand = _copy(baseline, tmp_path, "resumed")
    run = sorted(cand.iterdir())[0]
    aside = run.with_name(run.name + ".incomplete-1")
    shutil.copytree(run, aside)
    (aside / st.COMPLETE).unlink()
    code, out = _cli("compare", str(baseline), str(cand), "--allow-undecided")
    assert code == 0, out


def test_undecided_cells_fail_the_gate_unless_allowed(baseline: Path, tmp_path: Path) -> None:
    short = _sample(tmp_path, "short", seed=3, repeats=1, iterations=2)
    code, out = _cli("compare", str(short), str(short), "--allow-incomplete")
    assert code == 1, out
    assert "undecided" in out
    assert _cli("compare", str(short), str(short), "--allow-undecided")[0] == 0


def test_gate_flags_are_documented() -> None:
    code, out = _cli("compare", "--help")
    assert code == 0 and "--allow-incomplete" in out and "--allow-undecided" in out


# ---- markup: text from records stays text -----------------------------------------------------

HOSTILE_TEXT = "<img src=x onerror=alert(1)> ]]> </testsuite> &amp; \x00\x1b[31m\x7f\ufffe @team | **b** [l](http://x) `c`"


def test_markdown_text_has_no_markup_left() -> None:
    from r2bench.markup import markdown_text

    text = markdown_text(HOSTILE_TEXT + "\nline two")
    assert "<" not in text and ">" not in text and "\n" not in text and "\x1b" not in text
    assert "&lt;img" in text and "\\|" in text and "\\*\\*b\\*\\*" in text and "\\@team" in text
    assert "\\[l\\]\\(http" in text and "\\`c\\`" in text and "&amp;amp;" in text


def test_xml_text_makes_any_text_valid_xml() -> None:
    from r2bench.markup import xml_text

    case = ET.Element("testcase", name=xml_text(HOSTILE_TEXT))
    case.text = xml_text(HOSTILE_TEXT + "\ud800")
    again = ET.fromstring(ET.tostring(case, encoding="unicode"))
    assert again.text is not None and "]]>" in again.text and "\\x1b" in again.text
    assert "\\x00" in (again.get("name") or "")


def test_xfail_reason_reaches_markdown_and_junit_escaped(baseline: Path, tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    reason = json.dumps(HOSTILE_TEXT)  # a YAML double-quoted scalar: the escapes stay escapes
    policy.write_text(f"xfail:\n  - match: {{library: '*'}}\n    reason: {reason}\n")
    md, xml = tmp_path / "c.md", tmp_path / "c.xml"
    code, out = _cli(
        "compare", str(baseline), str(baseline), "--policy", str(policy),
        "--markdown", str(md), "--junit", str(xml), "--allow-undecided",
    )  # fmt: skip
    assert code == 0, out
    text = md.read_text()
    assert "xfail did not fail" in text
    assert "<img" not in text and "\x1b" not in text and "\x00" not in text
    assert re.search(r"&lt;img src=x onerror=alert\\\(1\\\)&gt;", text), text
    assert [line for line in text.splitlines() if line.startswith("<")] == [
        "<details><summary>All verdicts</summary>",
        "</details>",
    ]
    root = ET.parse(xml).getroot()  # valid XML whatever the reason holds
    messages = [e.text or "" for e in root.iter("system-out")]
    assert any("]]> </testsuite>" in m and "\\x00" in m for m in messages)
