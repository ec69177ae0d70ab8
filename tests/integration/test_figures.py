"""`r2bench figures`: the paper's figures on the sample sweep and on the real captures."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from r2bench.cli import app
from r2bench.commands.import_logs import import_command
from r2bench.figures.registry import FIGURES
from r2bench.figures.render import draw_all, load_sweeps, wrap_label
from tests.support import paths
from tests.support.sample_fixture import CAPTURED, make_sample_sweep

DRAWN_ON_SAMPLE = [
    "busbw-one-nic-down",
    "overhead-vs-claims",
    "stall-recovery-timeline",
    "outcome-matrix",
]


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_sample_sweep(tmp_path_factory.mktemp("results"), repeats=2)


def test_claims_hold_where_the_evidence_shows_the_faults_hit_traffic(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    sweep = make_sample_sweep(tmp_path_factory.mktemp("counted"), repeats=2, counters=True)
    outcomes = {o.definition.id: o for o in draw_all(load_sweeps([sweep]))}
    verdicts = {i: o.drawn.claim.verdict for i, o in outcomes.items() if o.drawn}
    assert verdicts == {
        "busbw-one-nic-down": "holds",
        "overhead-vs-claims": "not tested",
        "stall-recovery-timeline": "holds",
        "outcome-matrix": "holds",
        "nic-traffic-shift": "holds",
    }


def test_every_figure_names_an_existing_experiment() -> None:
    root = paths.REPO
    for definition in FIGURES:
        assert (root / "experiments" / "paper" / definition.experiment).is_file(), definition.id
        assert definition.needs


def test_sample_sweep_claims(sample: Path) -> None:
    outcomes = {o.definition.id: o for o in draw_all(load_sweeps([sample]))}
    assert [i for i, o in outcomes.items() if o.drawn is not None] == DRAWN_ON_SAMPLE
    traffic = outcomes["nic-traffic-shift"]
    assert traffic.drawn is None and "counters" in traffic.missing
    verdicts = {i: o.drawn.claim.verdict for i, o in outcomes.items() if o.drawn}
    # No NIC counters in this sample: nothing shows the faults hit traffic, so no claim about
    # R2CCL under a NIC failure is tested (the sample with counters below tests them).
    assert verdicts == {
        "busbw-one-nic-down": "not tested",
        "overhead-vs-claims": "not tested",  # end-to-end claims; this is per collective
        "stall-recovery-timeline": "not tested",
        "outcome-matrix": "not tested",
    }
    assert any(
        "no evidence that their fault hit traffic" in n
        for n in outcomes["outcome-matrix"].drawn.claim.numbers
    )  # type: ignore[union-attr]
    outcome = outcomes["outcome-matrix"].drawn
    assert outcome is not None
    assert "NCCL: 0/2 faulted runs ok" in outcome.claim.numbers
    assert "R2CCL mode 1: 2/2 faulted runs ok" in outcome.claim.numbers
    overhead = outcomes["overhead-vs-claims"].drawn
    assert overhead is not None
    layout = overhead.figure.spec["layout"]
    assert {shape["y0"] for shape in layout["shapes"]} == {1.0, 3.0}
    assert any("Not the same measure" in a["text"] for a in layout["annotations"])
    timeline = outcomes["stall-recovery-timeline"].drawn
    assert timeline is not None
    assert any("first R2CC failover event +" in n for n in timeline.claim.numbers)


def test_command_writes_html_and_claims(sample: Path, tmp_path: Path) -> None:
    out = tmp_path / "figs"
    result = CliRunner().invoke(app, ["figures", str(sample), "--out", str(out)])
    assert result.exit_code == 0, result.output
    for fid in DRAWN_ON_SAMPLE:
        assert (out / f"{fid}.html").is_file()
        assert f"{fid}: " in result.stdout
    assert (out / "plotly.min.js").is_file()
    assert "nic-traffic-shift: needs a faulted run with NIC counters" in result.stdout
    assert "run experiments/paper/nic-traffic-shift.yaml" in result.stdout
    claims = json.loads((out / "claims.json").read_text())
    assert [c["id"] for c in claims] == [d.id for d in FIGURES]


def test_real_captures_list_what_is_missing(tmp_path: Path) -> None:
    results = tmp_path / "results"
    assert import_command(CAPTURED, "captures", results) == 0
    outcomes = {o.definition.id: o for o in draw_all(load_sweeps([results / "captures"]))}
    overhead = outcomes["overhead-vs-claims"]
    for fid in ("busbw-one-nic-down", "stall-recovery-timeline", "outcome-matrix"):
        assert outcomes[fid].drawn is None
        assert "a run with an injected fault" in outcomes[fid].missing
    assert overhead.drawn is None and "no-fault baseline" in overhead.missing


def test_missing_sweep_folder_exit_2(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["figures", str(tmp_path / "nope")])
    assert result.exit_code == 2


@pytest.mark.parametrize("definition", FIGURES, ids=lambda d: d.id)
def test_paper_experiment_plans_on_the_8x8_testbed(definition: object) -> None:
    root = paths.REPO
    experiment = root / "experiments" / "paper" / definition.experiment  # type: ignore[attr-defined]
    testbed = root / "experiments" / "testbeds" / "dgx-h100-2node.yaml"
    result = CliRunner().invoke(app, ["plan", str(experiment), "-t", str(testbed), "--json"])
    assert result.exit_code == 0, result.stderr


EXAMPLES = paths.REPO / "results" / "examples"


def test_process_faults_do_not_test_the_nic_claims() -> None:
    """gpu-faults kills or stops a rank: drawn, but the NIC-failure claims are not tested, and
    every series is compared with stock NCCL of the same collective, ranks and nccl-tests."""
    outcomes = {o.definition.id: o for o in draw_all(load_sweeps([EXAMPLES / "gpu-faults"]))}
    for fid in ("busbw-one-nic-down", "stall-recovery-timeline", "outcome-matrix"):
        drawn = outcomes[fid].drawn
        assert drawn is not None, outcomes[fid].missing
        assert drawn.claim.verdict == "not tested"
        assert any("process fault" in n for n in drawn.claim.numbers)
    busbw = outcomes["busbw-one-nic-down"].drawn
    assert busbw is not None
    names = [t["name"] for t in busbw.figure.spec["data"]]
    assert not any("killed" in n for n in names)  # crashed runs are left out, and counted
    assert busbw.figure.meta["left_out"] == "3 runs left out (did not end ok): 3 crashed"
    overhead = outcomes["overhead-vs-claims"].drawn
    assert overhead is not None
    assert overhead.figure.meta["baselines"] == ["all_reduce · stock · v2.28.9 · none"]


def test_fault_free_sweep_draws_only_the_overhead() -> None:
    outcomes = {o.definition.id: o for o in draw_all(load_sweeps([EXAMPLES / "gpu-overhead"]))}
    assert [i for i, o in outcomes.items() if o.drawn is not None] == ["overhead-vs-claims"]
    overhead = outcomes["overhead-vs-claims"].drawn
    assert overhead is not None
    # one bar per collective and mode, each against stock NCCL of its own collective
    assert len(overhead.figure.spec["data"][0]["x"]) == 6
    assert overhead.figure.meta["baselines"] == [
        "all_gather · stock · v2.28.9 · none",
        "all_reduce · stock · v2.28.9 · none",
    ]


def test_emulator_runs_do_not_test_the_r2ccl_claims(sample: Path) -> None:
    tables = load_sweeps([sample])
    runs = tables.runs.copy()
    runs.loc[runs["library"] == "r2ccl", "library_recipe"] = "emulated-lib"
    emulated = dataclasses.replace(tables, runs=runs)
    outcomes = {o.definition.id: o for o in draw_all(emulated)}
    for fid in ("busbw-one-nic-down", "stall-recovery-timeline", "outcome-matrix"):
        drawn = outcomes[fid].drawn
        assert drawn is not None and drawn.claim.verdict == "not tested"
        assert any("CPU emulator (emulated-lib)" in n for n in drawn.claim.numbers)


def test_long_legend_names_wrap_at_their_separators() -> None:
    name = "all_reduce · r2ccl · v2.23.4 · mode 1 · 1 node · NCCL_DEBUG=WARN · none"
    wrapped = wrap_label(name, 30)
    assert wrapped.replace("<br>", " · ") == name
    assert all(len(line) <= 30 for line in wrapped.split("<br>"))
    assert wrapped.split("<br>")[0] == "all_reduce · r2ccl · v2.23.4"
    assert wrap_label("short · name", 30) == "short · name"
    assert wrap_label("one_part_longer_than_the_limit", 10) == "one_part_longer_than_the_limit"


def test_a_sweep_named_twice_counts_each_run_once(sample: Path, tmp_path: Path) -> None:
    """Before: `figures S ./S/` read the sweep twice and every claim counted each run twice
    (a third spelling, a link to it, would count it again)."""
    link = tmp_path / "same-sweep"
    link.symlink_to(sample)
    again = f"{sample}/./"

    def claims(*sweeps: str) -> list[dict[str, object]]:
        out = tmp_path / f"figs{len(sweeps)}"
        result = CliRunner().invoke(app, ["figures", *sweeps, "--out", str(out)])
        assert result.exit_code == 0, result.output
        doc = json.loads((out / "claims.json").read_text())
        return [{k: c[k] for k in ("id", "verdict", "numbers") if k in c} for c in doc]

    def claims_output(other: Path) -> str:
        ran = CliRunner().invoke(
            app, ["figures", str(sample), str(other), "--out", str(tmp_path / "g")]
        )
        return " ".join(ran.output.split())

    once = claims(str(sample))
    assert claims(str(sample), again, str(link)) == once
    result = CliRunner().invoke(app, ["figures", str(sample), again, "--out", str(tmp_path / "f")])
    assert f"note: {sample} is named again: its runs are counted once" in result.output
    assert f"note: {sample} is named again (as {link}): its runs" in claims_output(link)


def test_figure_pages_and_their_bundle_replace_links_never_write_through(
    sample: Path, tmp_path: Path
) -> None:
    out, theirs = tmp_path / "figs", tmp_path / "theirs"
    out.mkdir()
    theirs.write_text("not r2bench's\n")
    for name in ("busbw-one-nic-down.html", "plotly.min.js"):
        (out / name).symlink_to(theirs)
    result = CliRunner().invoke(app, ["figures", str(sample), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert theirs.read_text() == "not r2bench's\n"
    page, bundle = out / "busbw-one-nic-down.html", out / "plotly.min.js"
    assert not page.is_symlink() and 'src="plotly.min.js"' in page.read_text()
    assert not bundle.is_symlink() and bundle.stat().st_size > 1_000_000
    assert not list(out.glob(".*.tmp")), "a temporary file left"


def test_markup_in_the_output_folder_is_printed_as_written(sample: Path, tmp_path: Path) -> None:
    """Before: `--out '[/x]'` ended in rich's markup error (a traceback, exit 70)."""
    out = tmp_path / "[" / "x][bold]figs"
    result = CliRunner().invoke(app, ["figures", str(sample), "--out", str(out)])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert f"claims: {out / 'claims.json'}" in text
    assert f"{out / 'busbw-one-nic-down.html'}" in text
