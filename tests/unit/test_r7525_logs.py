"""R-2CCL's reference logs of its CloudLab r7525 reproduction (tests/data/r7525), read right:
runs, modes, K, 4 GiB busbw, per-iteration times and receive tables of 01/02, outcomes, and
located refusals of logs that contradict themselves."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from r2bench.analysis.importer import import_dir
from r2bench.commands.parse import parse_command, parse_file
from r2bench.parse.models import OutcomeStatus
from r2bench.parse.nccltests.text import ends_complete
from r2bench.parse.r2ccl_artifact import MIB, HotRepairRun, declared_failure, read_artifact
from tests.support import paths

LOGS = paths.DATA / "r7525" / "logs"
GIB4 = 4 << 30


def log(name: str):
    return read_artifact(LOGS / name, name)


def busbw_4g(run) -> tuple[float | None, float | None]:
    """(out-of-place, in-place) busbw at 4 GiB of a harness run."""
    rows = {r.placement: r.busbw_gbps for r in run.parsed.rows if r.size_bytes == GIB4}
    return rows.get("out_of_place"), rows.get("in_place")


def copy_with(tmp_path: Path, name: str, *edits: tuple[str, str]) -> Path:
    """A copy of a reference log with `old -> new` replacements (each must apply once)."""
    text = (LOGS / name).read_text()
    for old, new in edits:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    out = tmp_path / name
    out.write_text(text)
    return out


# --------------------------------------------------------------------------- nccl-tests runs


def test_03_three_runs_with_their_modes_and_the_table_never_a_row() -> None:
    got = log("03.nccl_tests_compare_all.log")
    assert [r.settings["R2CC_MODE"] for r in got.harness_runs] == ["0", "2", "3"]
    for run in got.harness_runs:
        assert run.settings["R2CC_FAILED_NODE"] == "0"
        assert run.settings["R2CC_FAILED_HCA"] == "mlx5_2"
        assert run.settings["NCCL_IB_HCA"] == "mlx5_0,mlx5_2,mlx5_3"
        assert (
            run.command == "all_reduce_perf -b 256M -e 4G -f 4 -g 1 -c 1 -n 5 -w 2 -d float -o sum"
        )
        assert len(run.parsed.rows) == 6  # 3 sizes x 2 placements: no row from the table
        assert run.parsed.unreadable_rows == 0 and not run.parsed.warnings
        assert run.parsed.ranks == 6 and ends_complete(run.parsed)
    assert [busbw_4g(r) for r in got.harness_runs] == [(3.53, 3.53), (2.35, 2.35), (2.56, 2.56)]
    assert [(r.first_line, r.last_line) for r in got.harness_runs] == [(1, 29), (30, 58), (59, 88)]
    [table] = got.tables
    assert table.title.startswith("comparison (") and (table.first_line, table.last_line) == (
        89,
        94,
    )
    assert [declared_failure(r.settings) for r in got.harness_runs] == [
        None,  # R2CC_MODE 0: R2CC off, the stated failure is not applied
        "mlx5_2 of node 0 declared failed",
        "mlx5_2 of node 0 declared failed",
    ]


def test_07_nine_runs_in_upstreams_order_with_k() -> None:
    got = log("07.nccl_tests_r2cc_allreduce_k_sweep.log")
    labels = [r.label for r in got.harness_runs]
    assert labels == [
        "healthy_1",
        "balance_1",
        "r2cc_allreduce_K1",
        "r2cc_allreduce_K2",
        "r2cc_allreduce_K4",
        "r2cc_allreduce_K8",
        "r2cc_allreduce_K16",
        "healthy_2",
        "balance_2",
    ]
    modes = [r.settings["R2CC_MODE"] for r in got.harness_runs]
    assert modes == ["0", "2", "3", "3", "3", "3", "3", "0", "2"]
    ks = [r.settings.get("R2CC_AR_STAGE2_CHUNKS") for r in got.harness_runs]
    assert ks == [None, None, "1", "2", "4", "8", "16", None, None]
    assert all(r.settings.get("R2CC_AR_SCHEDULE") == "1" for r in got.harness_runs[2:7])
    times = [(r.parsed.rows[0].time_us, r.parsed.rows[1].time_us) for r in got.harness_runs]
    assert times[6] == (2695495.0, 2692850.0)  # K = 16
    assert [busbw_4g(r) for r in got.harness_runs] == [
        (3.53, 3.53),
        (2.35, 2.36),
        (2.21, 2.21),
        (2.42, 2.43),
        (2.56, 2.56),
        (2.63, 2.64),
        (2.66, 2.66),
        (3.53, 3.53),
        (2.35, 2.35),
    ]
    assert all(len(r.parsed.rows) == 2 and r.parsed.unreadable_rows == 0 for r in got.harness_runs)
    [table] = got.tables
    assert table.title.startswith("time relative to healthy vs. the model")


@pytest.mark.parametrize(
    ("name", "mode", "oop", "ip"),
    [
        ("04.nccl_tests_baseline_healthy.log", "0", 3.53, 3.53),
        ("05.nccl_tests_balance_unhealthy.log", "2", 2.35, 2.35),
        ("06.nccl_tests_r2cc_allreduce_unhealthy.log", "3", 2.56, 2.56),
    ],
)
def test_04_to_06_one_full_sweep_each(name: str, mode: str, oop: float, ip: float) -> None:
    [run] = log(name).harness_runs
    assert run.settings["R2CC_MODE"] == mode
    assert len({r.size_bytes for r in run.parsed.rows}) == 30  # 8 B .. 4 GiB
    assert busbw_4g(run) == (oop, ip)
    assert run.parsed.unreadable_rows == 0


def test_r2ccl_is_recognised_from_its_own_lines() -> None:
    warn = log("06.nccl_tests_r2cc_allreduce_unhealthy.log").r2cc_proof
    assert warn is not None and "r2cc/allreduce/r2cc_allreduce.cc:213" in warn.text
    harness = log("04.nccl_tests_baseline_healthy.log").r2cc_proof
    assert harness is not None and harness.line == 1 and "R2CC_MODE=0" in harness.text
    hot = log("01.hot_repair_to_balance.log").r2cc_proof
    assert hot is not None and "Failure evidence" in hot.text


def test_summaries_are_tables_not_runs() -> None:
    for name, titles in (
        ("08.hot_repair_cuda_graph.log", 1),
        ("09.training_with_nic_failure.log", 3),
        ("rx_per_node.log", 2),
    ):
        got = log(name)
        assert got.runs == [] and len(got.tables) == titles and not got.errors


# --------------------------------------------------------------------------- the hot-repair runs

TIMES_01 = [2162, 2040, 3539, 3040, 3043, 3044, 3043, 3043, 3044, 3043]
TIMES_02 = [2257, 2033, 2974, 3162, 2824, 2796, 2794, 2805, 2797, 2869]
RX_01 = {
    "mlx5_0": [2406, 2406, 4188, 3609, 3609, 3609, 3609, 3609, 3609, 3609],
    "mlx5_2": [2312, 2312, 601, 0, 0, 0, 0, 0, 0, 0],
    "mlx5_3": [2312, 2312, 2312, 3468, 3468, 3468, 3468, 3468, 3468, 3468],
}
RX_02 = {
    "mlx5_0": [2406, 2406, 3184, 3128, 3129, 3128, 3128, 3129, 3128, 3128],
    "mlx5_2": [2312, 2312, 1566, 0, 0, 0, 0, 0, 0, 0],
    "mlx5_3": [2312, 2312, 2312, 3005, 3005, 3005, 3005, 3005, 3005, 3005],
}


@pytest.mark.parametrize(
    ("name", "times", "rx", "received"),
    [
        ("01.hot_repair_to_balance.log", TIMES_01, RX_01, 601),
        ("02.hot_repair_to_r2cc_allreduce.log", TIMES_02, RX_02, 1566),
    ],
)
def test_hot_repair_run_field_by_field(
    name: str, times: list[int], rx: dict[str, list[int]], received: int
) -> None:
    got = log(name)
    [run] = got.runs
    assert isinstance(run, HotRepairRun)
    assert (run.iters, run.size_bytes, run.count, run.datatype) == (10, GIB4, 1 << 30, "floats")
    assert run.disconnect_delay_ms == 4000
    assert run.disconnect_cmd == "./nic/disconnect_nic1.sh"
    assert [d.host for d in run.devices] == [
        "node-1",
        "node-1",
        "node-2",
        "node-2",
        "node-3",
        "node-3",
    ]
    assert run.library_version == "2.23.4+cuda12.2"
    assert run.times_ms == times
    assert [it.iteration for it in run.iterations] == list(range(1, 11))
    assert all(it.status == "OK" and it.of == 10 for it in run.iterations)
    assert run.cut_during == 3  # the cut completed while iteration 3 was in flight
    assert run.nics == ["mlx5_0", "mlx5_2", "mlx5_3"]
    assert [row.time_ms for row in run.traffic] == times
    for nic, mib in rx.items():
        assert run.rx(nic) == [v * MIB for v in mib]
    assert run.verification is not None
    assert (run.verification.elements, run.verification.iterations) == (1 << 30, 10)
    assert (run.verification.ranks, run.verification.wrong) == (6, 0)
    ev = run.failure_evidence
    assert ev is not None and (ev.nic, ev.iteration, ev.received_mib, ev.of_mib) == (
        "mlx5_2",
        3,
        received,
        2312,
    )
    assert run.verdict == "PASS" and run.result_exit == 0 and run.failover_iter == 4
    outcome = run.outcome("stdout")
    assert outcome.status is OutcomeStatus.OK
    assert [e.line for e in outcome.evidence] == [77, 78, 79, 88]
    parsed = run.as_parsed()
    [series] = parsed.per_iteration
    assert series.placement == "in_place" and series.size_bytes == GIB4
    assert series.times_us == tuple(t * 1000.0 for t in times)


def test_result_exit_2_is_wrong_results(tmp_path: Path) -> None:
    path = copy_with(
        tmp_path,
        "01.hot_repair_to_balance.log",
        (
            "10 iterations checked on all 6 ranks: 0 wrong",
            "10 iterations checked on all 6 ranks: 3 wrong",
        ),
        ("[Rank 0] TEST PASS:", "[Rank 0] TEST FAIL:"),
        ("[result] exit=0 PASS", "[result] exit=2 FAIL"),
    )
    [run] = read_artifact(path).hot_repair_runs
    assert run.outcome().status is OutcomeStatus.WRONG_RESULTS


def test_result_exit_3_is_a_fault_that_missed(tmp_path: Path) -> None:
    path = copy_with(
        tmp_path,
        "01.hot_repair_to_balance.log",
        (
            "mlx5_2 cut during iteration 3 (601 of 2312 MB received before the cut;",
            "mlx5_2 was cut between iterations (no AllReduce running;",
        ),
        ("[result] exit=0 PASS", "[result] exit=3 RETRY"),
    )
    [run] = read_artifact(path).hot_repair_runs
    outcome = run.outcome()
    assert outcome.status is OutcomeStatus.FAULT_MISSED and "missed" in outcome.reason


# --------------------------------------------------------------------------- bad input


def test_result_line_contradicting_the_verification_is_refused_with_its_line(
    tmp_path: Path,
) -> None:
    path = copy_with(
        tmp_path,
        "01.hot_repair_to_balance.log",
        (
            "10 iterations checked on all 6 ranks: 0 wrong",
            "10 iterations checked on all 6 ranks: 3 wrong",
        ),
    )
    got = read_artifact(path, "01.log")
    assert got.runs == []
    [refusal] = got.errors
    assert (refusal.path, refusal.line) == ("01.log", 88)  # the [result] line
    assert "exit=0" in refusal.what and "line 77 counts 3 wrong elements" in refusal.what
    assert "re-run the test or correct the [result] line" in refusal.fix
    assert str(refusal).startswith("01.log:88: ")


def test_result_line_contradicting_a_failed_iteration_is_refused(tmp_path: Path) -> None:
    path = copy_with(
        tmp_path,
        "02.hot_repair_to_r2cc_allreduce.log",
        ("Iter 5/10 END: OK (elapsed 2824 ms)", "Iter 5/10 END: FAIL (elapsed 2824 ms)"),
    )
    [refusal] = read_artifact(path).errors
    assert refusal.line == 88 and "iteration 5 ended FAIL (line 51)" in refusal.what


def test_receive_table_disagreeing_with_the_iterations_is_refused(tmp_path: Path) -> None:
    path = copy_with(
        tmp_path,
        "01.hot_repair_to_balance.log",
        ("4      3040       3609", "4      3099       3609"),
    )
    [refusal] = read_artifact(path).errors
    assert refusal.line == 70 and "3099 ms" in refusal.what and "3040 ms" in refusal.what


@pytest.mark.parametrize("k", ["0", "17", "x"])
def test_k_outside_1_to_16_refuses_that_run_only(tmp_path: Path, k: str) -> None:
    path = copy_with(
        tmp_path,
        "07.nccl_tests_r2cc_allreduce_k_sweep.log",
        ("R2CC_AR_STAGE2_CHUNKS=8 ", f"R2CC_AR_STAGE2_CHUNKS={k} "),
    )
    got = read_artifact(path, "07.log")
    assert len(got.harness_runs) == 8  # nothing else lost
    assert "r2cc_allreduce_K8" not in [r.label for r in got.harness_runs]
    [refusal] = got.errors
    assert refusal.path == "07.log" and refusal.line == 151  # its [k-sweep] line
    assert f"R2CC_AR_STAGE2_CHUNKS={k}" in refusal.what and "1 to 16" in refusal.what


def test_import_keeps_the_good_runs_and_names_the_refused_one(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    for name in ("03.nccl_tests_compare_all.log", "07.nccl_tests_r2cc_allreduce_k_sweep.log"):
        (logs / name).write_bytes((LOGS / name).read_bytes())
    bad = copy_with(
        tmp_path, "07.nccl_tests_r2cc_allreduce_k_sweep.log", ("CHUNKS=16 ", "CHUNKS=32 ")
    )
    (logs / "07.nccl_tests_r2cc_allreduce_k_sweep.log").write_bytes(bad.read_bytes())
    report = import_dir(logs, tmp_path / "results", "r7525")
    assert len(report.imported) == 3 + 8
    refused = [why for _, why in report.skipped if why.startswith("refused:")]
    assert len(refused) == 1 and ":181: R2CC_AR_STAGE2_CHUNKS=32" in refused[0]


def test_parse_command_refuses_a_contradicting_log_with_its_location(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = copy_with(
        tmp_path, "02.hot_repair_to_r2cc_allreduce.log", ("exit=0 PASS", "exit=2 FAIL")
    )
    assert parse_command([path], as_json=True) == 2
    err = capsys.readouterr().err
    assert f"{path}:88:" in err.replace("\n", "") and "exit=2" in err


def test_parse_reads_the_hot_repair_program_as_a_run(capsys: pytest.CaptureFixture[str]) -> None:
    assert parse_command([LOGS / "01.hot_repair_to_balance.log"], as_json=True) == 0
    [doc] = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert doc["outcome"] == "ok" and doc["collective"] == "all_reduce"
    [series] = doc["per_iteration"]
    assert series["times_us"][2] == 3539000.0
    runs = parse_file(LOGS / "07.nccl_tests_r2cc_allreduce_k_sweep.log")
    assert len(runs) == 9 and all(outcome.status is OutcomeStatus.OK for _, _, outcome in runs)


# --------------------------------------------------------------------------- the imported sweep


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory):
    pytest.importorskip("pandas")
    from r2bench.tables.build import build_tables

    results = tmp_path_factory.mktemp("r7525")
    report = import_dir(LOGS, results, "logs")
    return report, build_tables(report.sweep_dir)


def test_import_gives_17_runs_all_r2ccl(imported) -> None:
    report, tables = imported
    assert len(report.imported) == 17  # 01, 02, 3 of 03, 04, 05, 06, 9 of 07
    assert not report.scenarios  # artifact scenarios come from the settings, not file names
    runs = tables.runs
    assert set(runs["library"]) == {"r2ccl"} and set(runs["outcome"]) == {"ok"}
    assert not runs["library_basis"].str.startswith("guess").any()
    hot = runs[runs["scenario"] == "mlx5_2-cut"]
    assert len(hot) == 2 and set(hot["n_nodes"]) == {3}
    skipped = dict(report.skipped)
    assert "never read as result rows" in skipped[str(LOGS / "08.hot_repair_cuda_graph.log")]


def test_report_series_keep_healthy_balance_and_allreduce_apart(imported) -> None:
    from r2bench.report.series import series_info

    _, tables = imported
    info = series_info(tables.runs)
    rows = tables.results[
        (tables.results["size_bytes"] == GIB4) & (tables.results["placement"] == "out_of_place")
    ].merge(info.runs[["run_id", "series"]], on="run_id")
    of_03 = rows[rows["series"].str.contains("03.nccl_tests_compare_all")]
    by_mode = {s.split(" · ")[2]: list(g["busbw_gbps"]) for s, g in of_03.groupby("series")}
    # the table's busbw comes from time and size (parse.bandwidth): the printed 2 decimals
    printed = {"mode 0": [3.53], "mode 2": [2.35], "mode 3": [2.56]}
    assert by_mode == {mode: pytest.approx(v, abs=0.005) for mode, v in printed.items()}
    of_07 = rows[rows["series"].str.contains("07.nccl_tests_r2cc_allreduce_k_sweep")]
    k_series = {s for s in of_07["series"] if "R2CC_AR_STAGE2_CHUNKS=" in s}
    assert len(k_series) == 5  # K = 1, 2, 4, 8, 16: one series each
    assert len(set(of_07["series"])) == 7  # and healthy, Balance with their two repeats each
