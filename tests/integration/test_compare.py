"""`r2bench compare` on sweeps made for the purpose (the sample sweep, with a 10% busbw drop at
one size, or mode 1 crashing under the fault), and on references written from them."""

from __future__ import annotations

import dataclasses
import json
import shutil
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import yaml
from rich.console import Console

from r2bench.commands.compare import compare_command
from r2bench.compare.policy import METRICS, Policy, Statistic, load_policy
from r2bench.compare.provenance import compare_provenance, sweep_facts
from r2bench.compare.reference import load_reference, reference_from_sweep, reference_yaml
from r2bench.compare.samples import CompareInputError, SweepData
from r2bench.compare.samples import load_sweep as _load_sweep
from r2bench.compare.stats import Verdict, bootstrap, rng_for
from r2bench.compare.verdict import Gate, compare_reference, compare_sweeps
from tests.support import paths, sample_sweep
from tests.support.sample_sweep import SampleConfig, write_sample_sweep

CAPTURED = paths.DATA / "nccl-tests"
DROP_SIZE = 8 << 8  # 2 KiB
SHAPE = {"modes": (None, "1"), "sizes": 10, "iterations": 30, "repeats": 3}


_LOADED: dict[Path, SweepData] = {}


def load_sweep(path: Path) -> SweepData:
    """Tables built once per sweep (building them is most of the time)."""
    if path not in _LOADED:
        _LOADED[path] = _load_sweep(path)
    return _LOADED[path]


def _sweep(
    root: Path, name: str, seed: int, monkeypatch: pytest.MonkeyPatch | None = None, **kw: object
) -> Path:
    cfg = SampleConfig(sweep=name, seed=seed, **{**SHAPE, **kw})  # type: ignore[arg-type]
    write_sample_sweep(root, CAPTURED, cfg)
    return root / name


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("compare")
    out = {"base": _sweep(root, "base", 1), "same": _sweep(root, "same", 2)}
    with pytest.MonkeyPatch.context() as mp:
        original: Callable[[int], float] = sample_sweep._base_us
        mp.setattr(
            sample_sweep,
            "_base_us",
            lambda size: original(size) / 0.9 if size == DROP_SIZE else original(size),
        )
        out["drop"] = _sweep(root, "drop", 3)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sample_sweep, "MODE_SLOWDOWN", {"2": 1.4})  # mode 1 now dies at the fault
        out["crash"] = _sweep(root, "crash", 4)
    out["short"] = _sweep(root, "short", 5, iterations=2, repeats=1)
    out["short2"] = _sweep(root, "short2", 6, iterations=2, repeats=1)
    return out


def _quiet() -> Console:
    return Console(file=open("/dev/null", "w"), width=200)


def test_identical_inputs_are_the_same_and_pass(sweeps: dict[str, Path]) -> None:
    base = load_sweep(sweeps["base"])
    result = compare_sweeps(base, base, Policy())
    # the crashed runs' few samples too: identical sides leave nothing to decide
    assert {r.verdict for r in result.rows} == {Verdict.SAME}
    assert result.exit_code == 0
    assert all(r.change == 0 for r in result.rows if r.metric != "outcome")


def test_same_code_other_noise_not_flagged(sweeps: dict[str, Path]) -> None:
    result = compare_sweeps(load_sweep(sweeps["base"]), load_sweep(sweeps["same"]), Policy())
    assert result.regressions == []
    assert result.matched_cells >= 2 * 10 * 2  # modes x sizes x placements, fault-free at least


def test_ten_percent_busbw_drop_at_one_size_is_flagged(sweeps: dict[str, Path]) -> None:
    result = compare_sweeps(load_sweep(sweeps["base"]), load_sweep(sweeps["drop"]), Policy())
    flagged = {(r.fields["size_bytes"], r.metric) for r in result.regressions}
    assert flagged, "the 10% drop was not flagged"
    assert {size for size, _ in flagged} == {DROP_SIZE}
    busbw = [r for r in result.regressions if r.metric == "busbw_gbps"]
    assert busbw and all(-0.14 < (r.change or 0) < -0.06 for r in busbw)
    assert result.exit_code == 1


def test_ok_to_crashed_is_a_regression_whatever_the_numbers(sweeps: dict[str, Path]) -> None:
    result = compare_sweeps(load_sweep(sweeps["base"]), load_sweep(sweeps["crash"]), Policy())
    outcome = [r for r in result.rows if r.metric == "outcome" and r.verdict is Verdict.REGRESSION]
    assert [(r.fields["R2CC_MODE"], r.fields["scenario"]) for r in outcome] == [("1", "nic_down")]
    assert "crashed" in str(outcome[0].candidate) and outcome[0].baseline == "ok 3/3"
    assert result.exit_code == 1


def test_xfail_turns_an_expected_regression_into_xfail(
    sweeps: dict[str, Path], tmp_path: Path
) -> None:
    policy_file = tmp_path / "policy.yaml"
    policy_file.write_text(
        "xfail:\n  - match: {R2CC_MODE: '1', scenario: 'nic*'}\n    reason: known crash\n"
    )
    policy = load_policy(policy_file)
    result = compare_sweeps(load_sweep(sweeps["base"]), load_sweep(sweeps["crash"]), policy)
    assert not [r for r in result.rows if r.metric == "outcome" and r.verdict is Verdict.REGRESSION]
    assert any(r.verdict is Verdict.XFAIL and "known crash" in r.note for r in result.rows)


def test_too_few_samples_is_undecided_never_a_pass(sweeps: dict[str, Path]) -> None:
    result = compare_sweeps(load_sweep(sweeps["short"]), load_sweep(sweeps["short2"]), Policy())
    metric_rows = [r for r in result.rows if r.metric in METRICS]  # 2 samples a cell
    assert metric_rows and all(r.verdict is Verdict.UNDECIDED for r in metric_rows)
    assert all("too few samples" in r.note for r in metric_rows)
    assert result.exit_code == 1
    assert dataclasses.replace(result, gate=Gate(allow_undecided=True)).exit_code == 0


def test_deterministic(sweeps: dict[str, Path]) -> None:
    a = compare_sweeps(load_sweep(sweeps["base"]), load_sweep(sweeps["same"]), Policy())
    b = compare_sweeps(load_sweep(sweeps["base"]), load_sweep(sweeps["same"]), Policy())
    assert a.rows == b.rows


def test_reference_round_trip_and_verdicts(sweeps: dict[str, Path], tmp_path: Path) -> None:
    policy = Policy()
    ref = reference_from_sweep(load_sweep(sweeps["base"]), policy)
    path = tmp_path / "ref.yaml"
    path.write_text(reference_yaml(ref))
    again = load_reference(path)
    assert again.series_columns == ref.series_columns and len(again.cells) == len(ref.cells)
    cell = yaml.safe_load(path.read_text())["cells"][0]
    value, lower, upper, unit = cell["busbw_gbps"]
    assert value > 0 and unit == "GB/s" and lower <= -0.1 and upper is None
    same = compare_reference(again, load_sweep(sweeps["same"]), policy)
    assert same.regressions == [] and same.matched_cells == len(ref.cells)
    crash = compare_reference(again, load_sweep(sweeps["crash"]), policy)
    assert [r.metric for r in crash.regressions] == ["outcome"]


def test_command_exit_codes_and_files(sweeps: dict[str, Path], tmp_path: Path) -> None:
    md, xml = tmp_path / "c.md", tmp_path / "c.xml"
    code = compare_command(
        sweeps["base"], sweeps["drop"], markdown_file=md, junit_file=xml, console=_quiet()
    )
    assert code == 1
    assert "❌" in md.read_text() and "**regression**" in md.read_text()
    suite = ET.parse(xml).getroot().find("testsuite")
    assert suite is not None and int(suite.get("failures") or 0) >= 1
    lenient = Gate(allow_undecided=True)
    assert compare_command(sweeps["base"], sweeps["same"], console=_quiet(), gate=lenient) == 0
    with pytest.raises(CompareInputError, match=r"cannot compare: .*nope: not a sweep folder"):
        compare_command(tmp_path / "nope", sweeps["same"], console=_quiet())
    ref = tmp_path / "ref.yaml"
    assert compare_command(sweeps["base"], None, write_reference=ref, console=_quiet()) == 0
    assert compare_command(ref, sweeps["same"], console=_quiet(), gate=lenient) == 0
    bad = tmp_path / "bad.yaml"
    bad.write_text("cells: []\n")
    with pytest.raises(CompareInputError, match="cannot compare: "):
        compare_command(bad, sweeps["same"], console=_quiet())


def test_nothing_matched_is_exit_2(sweeps: dict[str, Path], tmp_path: Path) -> None:
    other = _sweep(tmp_path, "other", 1, modes=("2",), scenarios=("none",))
    assert compare_command(sweeps["base"], other, console=_quiet()) == 2


def test_bootstrap_is_seeded_and_runs_are_the_unit() -> None:
    groups = [np.array([1.0, 1.1, 0.9]), np.array([2.0, 2.1, 1.9])]
    a = bootstrap(groups, Statistic.MEDIAN, 500, rng_for(0, "k"))
    b = bootstrap(groups, Statistic.MEDIAN, 500, rng_for(0, "k"))
    assert np.array_equal(a, b)
    # two runs far apart: resampling runs spreads the statistic over both
    assert a.min() < 1.2 and a.max() > 1.8
    means = bootstrap([np.array([3.0] * 4)], Statistic.MEAN, 100, rng_for(1, "x"))
    assert np.allclose(means, 3.0)


def _with_recovery(
    data: SweepData, name: str, detect: list[float], failback: list[float]
) -> SweepData:
    """The sweep with the given recovery metrics on its surviving faulted runs (mode 1 under
    the fault) and a stall of about 0.9 s; the crashed NCCL runs keep theirs undefined."""
    runs = data.tables.runs.copy()
    faulted = runs.index[(runs["scenario"] == "nic_down") & (runs["outcome"] == "ok")]
    assert len(faulted) == len(detect) == len(failback)
    runs.loc[faulted, "detect_s"] = detect
    runs.loc[faulted, "stall_s"] = [0.90, 0.88, 0.91][: len(faulted)]
    runs.loc[faulted, "failback_ratio"] = failback
    return SweepData(name, data.path, dataclasses.replace(data.tables, runs=runs))


def test_worse_recovery_is_a_regression_like_a_busbw_drop(sweeps: dict[str, Path]) -> None:
    base = load_sweep(sweeps["base"])
    before = _with_recovery(base, "before", [0.50, 0.52, 0.49], [0.80, 0.82, 0.79])
    after = _with_recovery(base, "after", [0.66, 0.68, 0.65], [0.60, 0.62, 0.59])
    result = compare_sweeps(before, after, Policy(min_samples=3))
    verdicts = {
        r.metric: r.verdict
        for r in result.rows
        if r.metric in ("detect_s", "stall_s", "failback_ratio")
    }
    assert verdicts == {
        "detect_s": Verdict.REGRESSION,  # detection 30 % slower
        "stall_s": Verdict.SAME,
        "failback_ratio": Verdict.REGRESSION,  # a quarter less bandwidth after the link is back
    }
    row = next(r for r in result.rows if r.metric == "detect_s")
    assert row.fields["scenario"] == "nic_down" and row.n_baseline == 3
    assert result.exit_code == 1
    same = compare_sweeps(before, before, Policy(min_samples=3))
    assert not [r for r in same.regressions if r.metric in ("detect_s", "failback_ratio")]
    few = compare_sweeps(before, after, Policy())  # 3 runs a side < min_samples 5
    assert {r.verdict for r in few.rows if r.metric == "detect_s"} == {Verdict.UNDECIDED}


# ---- provenance: a candidate measured elsewhere or with other software is not judged ----------


def _on_other_testbed(sweep: Path, to: Path, testbed: str = "elsewhere") -> Path:
    """A copy of `sweep` whose runs name another testbed in their spec.json."""
    target = to / f"{sweep.name}-{testbed}"
    shutil.copytree(sweep, target)
    for spec in target.glob("*/spec.json"):
        data = json.loads(spec.read_text())
        spec.write_text(json.dumps({**data, "testbed": testbed}))
    return target


def test_another_testbed_is_refused_naming_the_field_both_values_and_the_flag(
    sweeps: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = _on_other_testbed(sweeps["same"], tmp_path)
    with pytest.raises(CompareInputError) as refused:
        compare_command(sweeps["base"], other, console=_quiet())
    err = str(refused.value)
    assert err.startswith("cannot compare: provenance differs: ")
    assert "testbed" in err and "'sample'" in err and "'elsewhere'" in err
    assert "--allow-provenance-mismatch" in err
    lenient = Gate(allow_undecided=True)
    code = compare_command(
        sweeps["base"], other, console=_quiet(), gate=lenient, allow_provenance_mismatch=True
    )
    assert code == 0
    assert "warning" in capsys.readouterr().err


def test_a_reference_keeps_the_provenance_it_was_written_from(
    sweeps: dict[str, Path], tmp_path: Path
) -> None:
    ref = tmp_path / "ref.yaml"
    assert compare_command(sweeps["base"], None, write_reference=ref, console=_quiet()) == 0
    written = yaml.safe_load(ref.read_text())["provenance"]
    assert written["testbed"] == "sample" and written["library_version[nccl]"] == "2.28.3"
    other = _on_other_testbed(sweeps["same"], tmp_path)
    with pytest.raises(CompareInputError, match="'elsewhere'"):
        compare_command(ref, other, console=_quiet())


def test_unknown_provenance_is_a_warning_not_a_refusal(
    sweeps: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ref = tmp_path / "old.yaml"
    assert compare_command(sweeps["base"], None, write_reference=ref, console=_quiet()) == 0
    data = yaml.safe_load(ref.read_text())
    del data["provenance"]  # a reference written before r2bench kept it
    ref.write_text(yaml.safe_dump(data))
    lenient = Gate(allow_undecided=True)
    capsys.readouterr()
    assert compare_command(ref, sweeps["same"], console=_quiet(), gate=lenient) == 0
    err = capsys.readouterr().err
    assert "warning" in err and "testbed" in err and "unknown" in err


def test_library_and_nccl_tests_versions_are_checked_per_library(
    sweeps: dict[str, Path],
) -> None:
    base = sweep_facts(load_sweep(sweeps["base"]))
    assert base["nccl_tests_version"] and base["library_version[r2ccl]"] == "2.28.3"
    newer = {**base, "library_version[r2ccl]": "2.29.0", "nccl_tests_version": "9.9.9"}
    problems, warnings = compare_provenance(base, newer)
    assert [p.field for p in problems] == ["library_version[r2ccl]", "nccl_tests_version"]
    assert "'2.28.3'" in problems[0].text() and "'2.29.0'" in problems[0].text()
    assert warnings == []
    unknown = {**base, "nccl_tests_version": None}
    problems, warnings = compare_provenance(base, unknown)
    assert problems == [] and len(warnings) == 1 and "nccl_tests_version" in warnings[0]
    only_here = {**base, "library_version[other]": "1.0"}  # a library the other side lacks
    assert compare_provenance(base, only_here) == ([], [])
