"""Hostile and broken results folders: the CI gate counts every cell, nothing is written or read
outside the sweep folder, one bad run record never takes the sweep down, and text from records
stays text in compare's markdown and JUnit XML."""

from __future__ import annotations

import json
import math
import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from typer.testing import CliRunner

from r2bench.cli import app
from r2bench.runfolder import runformat, runmodel
from tests.support import paths
from tests.support.sample_sweep import SampleConfig, write_sample_sweep

CAPTURED = paths.DATA / "nccl-tests"
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
        (run / runformat.COMPLETE).unlink()
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
    (sorted(cand.iterdir())[0] / runformat.COMPLETE).unlink()
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
    (aside / runformat.COMPLETE).unlink()
    code, out = _cli("compare", str(baseline), str(cand), "--allow-undecided")
    assert code == 0, out


def test_undecided_cells_fail_the_gate_unless_allowed(baseline: Path, tmp_path: Path) -> None:
    short = _sample(tmp_path, "short", seed=3, repeats=1, iterations=2)
    other = _sample(tmp_path, "other", seed=4, repeats=1, iterations=2)  # identical: `same`
    code, out = _cli("compare", str(short), str(other), "--allow-incomplete")
    assert code == 1, out
    assert "undecided" in out
    assert _cli("compare", str(short), str(other), "--allow-undecided")[0] == 0


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


# ---- one bad record skips its run, named; the rest of the sweep reports ----------------------

RESULT_CASES = sorted((paths.CORPUS / "results").glob("*.case"))


def _case(path: Path) -> tuple[dict[str, str], str]:
    """A corpus case: `# key: value` header lines, then the file's body (if any)."""
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    head = "".join(ln for ln in lines if ln.startswith("# "))
    header = dict(re.findall(r"^# ([a-z-]+): (.*)$", head, re.MULTILINE))
    body = "".join(ln for ln in lines if not ln.startswith("# "))
    return header, body


def _break(run: Path, header: dict[str, str], body: str) -> Path:
    """Write the case's file into `run`: a patch of the good file, a nesting bomb, or the body."""
    target = run / header["file"]
    if "patch" in header:
        good = json.loads(target.read_text()) if target.is_file() else {}
        target.write_text(json.dumps({**good, **json.loads(header["patch"])}, allow_nan=True))
    elif "nest" in header:
        depth = int(header["nest"])
        target.write_text("[" * depth + "]" * depth)
    else:
        target.write_text(body)
    return target


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _sample(tmp_path_factory.mktemp("good"), "good", modes=(None,), repeats=3)


def _broken_sweep(good: Path, tmp_path: Path, case: Path) -> tuple[Path, Path, str]:
    sweep = _copy(good, tmp_path, "sweep")
    run = sorted(sweep.iterdir())[0]
    header, body = _case(case)
    target = _break(run, header, body)
    return sweep, target, header["expect"]


def _assert_skipped(out: str, target: Path, expect: str) -> None:
    assert "Traceback" not in out
    lines = [ln for ln in out.splitlines() if str(target.parent) in ln and "skipped" in ln]
    assert lines, out
    assert any(f"{target.parent}/{expect}" in ln for ln in lines), (expect, lines)


def test_results_corpus_is_large_enough() -> None:
    assert len(RESULT_CASES) >= 25


TWIN_CASES = {"result-deep-nesting"}
"""A -J twin r2bench refuses: the run keeps its text output's results (issue 31)."""


@pytest.mark.parametrize(
    "case", [c for c in RESULT_CASES if c.stem not in TWIN_CASES], ids=lambda p: p.stem
)
def test_malformed_record_skips_its_run_and_the_sweep_reports(
    good: Path, tmp_path: Path, case: Path
) -> None:
    sweep, target, expect = _broken_sweep(good, tmp_path, case)
    code, out = _cli("report", str(sweep))
    assert code == 0, out
    _assert_skipped(out, target, expect)
    page = (sweep / "report.html").read_text()
    assert target.parent.name in page and "invalid" in page
    runs = (sweep / "tables" / "runs.csv").read_text()
    assert runs.count('"ok"') == 2, runs


@pytest.mark.parametrize("case", sorted(TWIN_CASES))
def test_a_refused_twin_never_costs_the_run_its_text_rows(
    good: Path, tmp_path: Path, case: str
) -> None:
    sweep, target, expect = _broken_sweep(good, tmp_path, RESULT_CASES[0].with_stem(case))
    code, out = _cli("report", str(sweep))
    assert code == 0 and "Traceback" not in out, out
    runs = (sweep / "tables" / "runs.csv").read_text()
    assert runs.count('"ok"') == 3, runs  # the run with the refused twin included
    from r2bench.analysis.parsedrun import parse_run

    parsed = parse_run(runmodel.load_run(target.parent)).parsed
    assert parsed.rows, "the text output's rows were dropped"
    assert any(expect in w and "the text output's results are used" in w for w in parsed.warnings)


@pytest.mark.parametrize("case", ["spec-repeat-text", "provenance-offset-text"])
def test_compare_and_figures_go_on_past_a_malformed_record(
    good: Path, tmp_path: Path, case: str
) -> None:
    sweep, target, expect = _broken_sweep(good, tmp_path, RESULT_CASES[0].with_stem(case))
    code, out = _cli("compare", str(good), str(sweep), "--allow-undecided")
    assert code == 1, out  # the skipped run is not judged
    _assert_skipped(out, target, expect)
    assert "invalid" in out
    code, out = _cli("figures", str(sweep), "--out", str(tmp_path / "figs"), "--format", "svg")
    assert code == 0, out
    _assert_skipped(out, target, expect)


def test_spec_that_is_a_folder_or_too_large_is_reported_not_blanked(
    good: Path, tmp_path: Path
) -> None:
    sweep = _copy(good, tmp_path, "sweep")
    first, second = sorted(sweep.iterdir())[:2]
    (first / runformat.SPEC).unlink()
    (first / runformat.SPEC).mkdir()
    (second / runformat.SPEC).write_text(" " * (17 * 1024 * 1024) + "{}")
    code, out = _cli("report", str(sweep))
    assert code == 0, out
    assert f"{first}/spec.json: not a regular file" in out
    assert f"{second}/spec.json: larger than" in out


def test_sweep_with_no_complete_run_is_reported(good: Path, tmp_path: Path) -> None:
    sweep = _copy(good, tmp_path, "cut")
    for run in sweep.iterdir():
        (run / runformat.COMPLETE).unlink()
    code, out = _cli("report", str(sweep))
    assert code == 0, out
    assert "3 runs" in out and (sweep / "report.html").is_file()


def test_duplicated_run_folder_is_counted_once(good: Path, tmp_path: Path) -> None:
    sweep = _copy(good, tmp_path, "dup")
    run = sorted(sweep.iterdir())[0]
    shutil.copytree(run, sweep / f"{run.name} copy")
    code, out = _cli("report", str(sweep))
    assert code == 0, out
    assert f"{sweep / (run.name + ' copy')}: the same run id as {run.name}" in out
    assert "3 runs" in out


# ---- nothing written or read outside the sweep folder ------------------------------------------

OUTSIDE_MARK = "OUTSIDE-THE-SWEEP"


def _tree(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def _outside(tmp_path: Path, good: Path) -> Path:
    """A folder beside the sweep that every link below points into: another sweep's tables, a
    run folder, a log whose lines would parse as events, plain files to overwrite."""
    out = tmp_path / "outside"
    (out / "other" / "tables").mkdir(parents=True)
    (out / "other" / "tables" / "runs.csv").write_text("another sweep's runs\n")
    (out / "figs").mkdir()
    (out / "nodes" / "vm").mkdir(parents=True)
    (out / "nodes" / "vm" / "counters.tsv").write_text(OUTSIDE_MARK + "\n")
    shutil.copytree(sorted(good.iterdir())[0], out / "run")
    spec = json.loads((out / "run" / runformat.SPEC).read_text())
    (out / "run" / runformat.SPEC).write_text(json.dumps({**spec, "run_id": OUTSIDE_MARK}))
    (out / "stderr.txt").write_text(f"vm:1:1 [0] NCCL WARN {OUTSIDE_MARK} ibv_poll_cq error\n" * 3)
    for name in ("victim.html", "victim.json", "victim.svg", "victim.parquet"):
        (out / name).write_text(OUTSIDE_MARK + "\n")
    return out


def test_links_at_every_level_of_a_results_tree_lead_nowhere(good: Path, tmp_path: Path) -> None:
    outside = _outside(tmp_path, good)
    before = _tree(outside)
    sweep = _copy(good, tmp_path / "results", "sweep")
    first, second, third = sorted(sweep.iterdir())
    (sweep / "tables").symlink_to(outside / "other" / "tables")  # the sweep folder's children
    (sweep / "report.html").symlink_to(outside / "victim.html")  # the report file
    (sweep / "figures").symlink_to(outside / "figs")
    (sweep / "zz-linked-run").symlink_to(outside / "run")  # a run folder
    (first / runformat.STDERR).unlink()
    (first / runformat.STDERR).symlink_to(outside / "stderr.txt")  # files in a run folder
    (first / runformat.EVENTS).unlink()
    (second / "node").symlink_to(outside / "nodes")  # a folder in a run folder
    (third / runformat.PROVENANCE).unlink()
    (third / runformat.PROVENANCE).symlink_to(outside / "victim.json")

    code, out = _cli("report", str(sweep), "--format", "svg")
    assert code == 0, out
    assert f"{sweep / 'tables'}: leads outside {sweep}" in out
    assert f"{sweep / 'zz-linked-run'}: a link that leads outside the sweep folder" in out
    for path in (first / runformat.STDERR, second / "node", third / runformat.PROVENANCE):
        assert f"{path}: a link that leads outside the run folder; refusing to read it" in out
    code, out = _cli("figures", str(sweep))
    assert code == 2 and f"{sweep / 'figures'}: leads outside {sweep}" in out, out
    code, out = _cli("compare", str(good), str(sweep), "--allow-undecided")
    assert code == 1 and "invalid" in out, out

    assert _tree(outside) == before  # nothing landed outside
    page = (sweep / "report.html").read_text()
    assert not (sweep / "report.html").is_symlink() and OUTSIDE_MARK not in page


def test_links_inside_the_tables_folder_are_replaced_never_written_through(
    good: Path, tmp_path: Path
) -> None:
    outside = _outside(tmp_path, good)
    before = _tree(outside)
    sweep = _copy(good, tmp_path / "results", "sweep")
    tables = sweep / "tables"
    tables.mkdir()
    (tables / "runs.csv").symlink_to(outside / "victim.html")
    (tables / ".runs.parquet.tmp").symlink_to(outside / "victim.parquet")
    (tables / "runs.parquet").symlink_to(outside / "victim.json")
    code, out = _cli("report", str(sweep))
    assert code == 0, out
    assert _tree(outside) == before
    assert "run_id" in (tables / "runs.csv").read_text()


def test_a_symlinked_sweep_folder_itself_is_the_user_s_choice(good: Path, tmp_path: Path) -> None:
    real = _copy(good, tmp_path / "elsewhere", "sweep")
    (tmp_path / "results").mkdir()
    link = tmp_path / "results" / "sweep"
    link.symlink_to(real)
    code, out = _cli("report", str(link))
    assert code == 0 and "warning" not in out, out
    assert (real / "tables" / "runs.csv").is_file()


# ---- values no measurement can have are flagged, never averaged -------------------------------


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-5.0", "1e999"])
def test_non_finite_or_negative_result_values_are_left_out_and_named(
    good: Path, tmp_path: Path, value: str
) -> None:
    from r2bench.tables.build import build_tables

    sweep = _copy(good, tmp_path, "values")
    run = sorted(sweep.iterdir())[0]
    (run / runformat.STDOUT).unlink()  # the -J file alone holds the numbers
    doc = json.loads((run / runformat.RESULT_JSON).read_text())
    doc["results"][0]["out_of_place"]["bus_bw"] = "__VALUE__"
    doc["results"][0]["out_of_place"]["nwrong"] = "__VALUE__"
    text = json.dumps(doc).replace('"__VALUE__"', value)
    (run / runformat.RESULT_JSON).write_text(text)
    tables = build_tables(sweep)
    mine = tables.results[tables.results["run_id"] == run.name]
    busbw, wrong = mine["busbw_gbps"].dropna(), mine["wrong"].dropna()
    assert (busbw >= 0).all() and busbw.map(math.isfinite).all() and (wrong >= 0).all()
    warned = [w for w in tables.warnings if run.name in w]
    if any(f"{run / runformat.RESULT_JSON}: a value it cannot hold" in w for w in warned):
        assert mine.empty  # the parser refused the file: the run is skipped, named
    else:
        assert len(mine) and any("result values not finite or negative" in w for w in warned), (
            tables.warnings
        )
