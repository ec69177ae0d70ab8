"""Tidy tables: derived from run folders, equal to the parsed data, Parquet/CSV round trip."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from r2bench.analysis.importer import import_dir
from r2bench.analysis.parsedrun import TransportTap
from r2bench.parse.nccltests.jsonfile import parse_json
from r2bench.parse.nccltests.runs import combine
from r2bench.parse.nccltests.text import parse_text
from r2bench.runfolder import runformat
from r2bench.runfolder import store as st
from r2bench.runfolder.store import RunStore
from r2bench.tables import build as tb
from r2bench.tables.build import rebuild
from tests.support import paths
from tests.support.captures import DATA, top_level_copy
from tests.support.cli_runner import invoke_wide
from tests.support.sample_sweep import SampleConfig, write_sample_sweep
from tests.support.sweeps import copy_sweep


@pytest.fixture(scope="module")
def captured(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, tb.Tables]:
    results = tmp_path_factory.mktemp("results")
    report = import_dir(top_level_copy(results.parent / "captured"), results, "captured")
    return report.sweep_dir, tb.rebuild(report.sweep_dir)


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, tb.Tables]:
    results = tmp_path_factory.mktemp("results")
    cfg = SampleConfig(repeats=2, sizes=12, iterations=5)
    store = write_sample_sweep(results, DATA, cfg)
    return store.sweep_dir, tb.rebuild(store.sweep_dir)


def run_of(tables: tb.Tables, scenario: str) -> str:
    [run_id] = tables.runs[tables.runs["scenario"] == scenario]["run_id"]
    return str(run_id)


def test_results_match_the_parsed_outputs(captured: tuple[Path, tb.Tables]) -> None:
    _, t = captured
    for name, scenario in (
        ("all_reduce_perf.socket.c1.txt", "socket.c1"),
        ("all_reduce_perf.killed.warn.txt", "killed.warn"),
    ):
        parsed = parse_text((DATA / name).read_text())
        run_id = t.runs[(t.runs["scenario"] == scenario) & (t.runs["collective"] == "all_reduce")]
        rows = t.results[t.results["run_id"] == run_id["run_id"].iloc[0]]
        assert len(rows) == len(parsed.rows)
        # bandwidths from time and size (parse.bandwidth): the printed ones to 2 decimals
        printed = [r.busbw_gbps for r in parsed.rows]
        assert rows["busbw_gbps"].tolist() == pytest.approx(printed, abs=0.005 + 1e-9)
        assert rows["time_us"].tolist() == [r.time_us for r in parsed.rows]
    assert len(t.results) == 254  # every row of the 17 imported outputs
    assert len(t.runs) == 17


def test_a_few_exact_values(captured: tuple[Path, tb.Tables]) -> None:
    _, t = captured
    r = t.results
    ar = r[(r["collective"] == "all_reduce") & (r["scenario"] == "socket.c1")]
    row = ar[(ar["size_bytes"] == 33554432) & (ar["placement"] == "in_place")].iloc[0]
    assert (row["time_us"], row["wrong"], row["outcome"]) == (10251.5, 0, "ok")
    assert row["busbw_gbps"] == pytest.approx(33554432 / 10251.5 / 1e3)  # printed 3.27
    rs = r[r["collective"] == "reduce_scatter"]
    assert rs["wrong"].isna().all()  # -c 0: #wrong printed as N/A
    s1 = r[r["scenario"] == "socket.S1"]
    assert s1["timestamp"].notna().all()
    assert s1["timestamp"].min() == pd.Timestamp("2026-11-22 03:54:36", tz="UTC").timestamp()


def test_result_bandwidths_come_from_time_and_size(captured: tuple[Path, tb.Tables]) -> None:
    """Printed busbw has 2 decimals (0.05 GB/s: a 10 % step); the table's is size / time x
    2(n-1)/n, which the time's 6 digits carry."""
    _, t = captured
    r = t.results
    rows = r[(r["scenario"] == "socket.c1") & (r["collective"] == "all_reduce")]
    small = rows[rows["size_bytes"] == 2048].iloc[0]  # printed 43.53 us, 0.05 GB/s
    computed = 2048 / small["time_us"] / 1e3  # 2 ranks: factor 1
    assert small["busbw_gbps"] == pytest.approx(computed, rel=1e-12)
    assert small["algbw_gbps"] == pytest.approx(computed, rel=1e-12)
    assert round(small["busbw_gbps"], 2) != small["busbw_gbps"]


def test_iterations_come_from_the_json(captured: tuple[Path, tb.Tables]) -> None:
    _, t = captured
    run_id = run_of(t, "socket.I1")
    it = t.iterations[t.iterations["run_id"] == run_id]
    assert len(it) == 6 * 20
    js = parse_json((DATA / "all_reduce_perf.socket.I1.json").read_bytes())
    block = js.per_iteration[0]
    first = it[(it["size_bytes"] == block.size_bytes) & (it["placement"] == block.placement)]
    assert first["time_us"].tolist() == list(block.times_us)
    assert first["iteration"].tolist() == list(range(20))
    # busbw of an iteration = size / time x the row's busbw/algbw factor (1 for 2-rank all_reduce)
    assert first["busbw_gbps"].iloc[0] == pytest.approx(block.size_bytes / block.times_us[0] / 1e3)


def test_runs_table(captured: tuple[Path, tb.Tables]) -> None:
    _, t = captured
    runs = t.runs.set_index("scenario")
    killed = runs.loc["killed.warn"]
    assert (killed["outcome"], killed["failed_rank"], killed["failed_host"]) == ("crashed", 1, "vm")
    assert runs.loc["hung.T15"]["outcome"] == "timeout"
    assert runs.loc["not_enough_slots"]["outcome"] == "launch_failed"
    assert killed["n_rows"] == 16 and bool(killed["complete"])


def test_events_include_log_and_fault_events(sample: tuple[Path, tb.Tables]) -> None:
    _, t = sample
    ev = t.events
    faults = ev[ev["kind"].str.startswith("fault_")]
    n_fault_runs = int((t.runs["n_faults"] > 0).sum())
    assert (faults["kind"] == "fault_inject").sum() == n_fault_runs
    assert (faults["kind"] == "fault_revert").sum() == n_fault_runs
    inject = faults[faults["kind"] == "fault_inject"].iloc[0]
    assert (inject["host"], inject["nic"], inject["fault"]) == ("node1", "mlx5_0", 0)
    assert (ev["kind"] == "r2cc_backup_switch").sum() == 4  # modes 1 and 2, 2 repeats
    assert ev[ev["kind"] == "r2cc_backup_switch"]["time"].notna().all()


def test_env_columns_and_outcomes(sample: tuple[Path, tb.Tables]) -> None:
    _, t = sample
    assert "R2CC_MODE" in t.results.columns
    modes = set(t.results["R2CC_MODE"].dropna())
    assert modes == {"0", "1", "2"}
    assert t.results[t.results["library"] == "nccl"]["R2CC_MODE"].isna().all()
    out = t.runs.groupby(["scenario", "outcome"]).size().to_dict()
    assert out == {("nic_down", "crashed"): 4, ("nic_down", "ok"): 4, ("none", "ok"): 8}


def test_iteration_timestamps_are_ordered_within_a_run(sample: tuple[Path, tb.Tables]) -> None:
    _, t = sample
    run_id = t.runs[t.runs["outcome"] == "ok"]["run_id"].iloc[0]
    it = t.iterations[t.iterations["run_id"] == run_id]
    res = t.results[(t.results["run_id"] == run_id) & (t.results["placement"] == "in_place")]
    assert it["timestamp"].notna().all()
    # each iteration ends within the printed (whole) second of its row, or before it
    last = it.groupby(["size_bytes", "placement"])["timestamp"].max()
    for _, row in res.iterrows():
        assert row["timestamp"] <= last[(row["size_bytes"], "in_place")] < row["timestamp"] + 1


def test_parquet_and_csv_round_trip(sample: tuple[Path, tb.Tables]) -> None:
    sweep_dir, t = sample
    out = sweep_dir / "tables"
    for name, frame in t.items():
        pd.testing.assert_frame_equal(
            pd.read_parquet(out / f"{name}.parquet"),
            frame,
            check_dtype=False,
            check_categorical=False,
        )
        csv = pd.read_csv(out / f"{name}.csv")
        assert len(csv) == len(frame) and list(csv.columns) == list(frame.columns)
    csv = pd.read_csv(out / "results.csv")
    assert csv["busbw_gbps"].tolist() == pytest.approx(t.results["busbw_gbps"].tolist())


def test_incomplete_runs_are_listed_not_measured(tmp_path: Path) -> None:
    cfg = SampleConfig(modes=("1",), scenarios=("none",), repeats=1, sizes=4, iterations=2)
    store = write_sample_sweep(tmp_path, DATA, cfg)
    broken = store.create("all_reduce-crashed-controller")
    broken.write_stdout((DATA / "all_reduce_perf.socket.c1.txt").read_text())
    t = tb.build_tables(store.sweep_dir)
    assert len(t.runs) == 2
    row = t.runs[t.runs["run_id"] == "all_reduce-crashed-controller"].iloc[0]
    assert (row["outcome"], bool(row["complete"])) == ("incomplete", False)
    assert "all_reduce-crashed-controller" not in set(t.results["run_id"])


def test_parallel_build_equals_serial(
    sample: tuple[Path, tb.Tables], monkeypatch: pytest.MonkeyPatch
) -> None:
    sweep_dir, _ = sample
    serial = tb.build_tables(sweep_dir, workers=1)
    monkeypatch.setattr(tb, "PARALLEL_MIN_RUNS", 2)
    parallel = tb.build_tables(sweep_dir, workers=2)
    for name, frame in serial.items():
        pd.testing.assert_frame_equal(getattr(parallel, name), frame)


def test_tables_of_an_empty_sweep(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    t = tb.build_tables(tmp_path / "empty")
    assert all(len(frame) == 0 for _, frame in t.items())
    tb.write_tables(t, tmp_path / "empty" / "tables")
    assert len(pd.read_parquet(tmp_path / "empty" / "tables" / "runs.parquet")) == 0


def test_combine_keeps_text_rows(captured: tuple[Path, tb.Tables]) -> None:
    """A run with text and JSON: rows come from the text, per-iteration times from the JSON."""
    _, t = captured
    text = parse_text((DATA / "all_reduce_perf.socket.I1.txt").read_text())
    both = combine(text, parse_json((DATA / "all_reduce_perf.socket.I1.json").read_bytes()))
    rows = t.results[t.results["run_id"] == run_of(t, "socket.I1")]
    assert rows["time_us"].tolist() == [r.time_us for r in both.rows]
    assert RunStore.at(captured[0]).is_complete(run_of(t, "socket.I1"))


def test_transport_where_the_logs_say_it_and_none_where_they_do_not(
    captured: tuple[Path, tb.Tables],
) -> None:
    _, t = captured
    runs = t.runs[t.runs["collective"] == "all_reduce"].set_index("scenario")
    assert runs.loc["socket.info", "transport"] == "NET/Socket"  # `[receive] via NET/Socket/0`
    no_info = runs.loc["socket.c1"]  # nccl-tests' output alone: NCCL_DEBUG unset
    assert no_info["transport"] is None or pd.isna(no_info["transport"])
    assert (runs["transport"].astype("string").fillna("x") != "").all()  # never an empty string
    listed = runs.drop(index="not_enough_slots")  # a launch that failed lists no device
    assert (listed["device_kind"] == "GPU").all() and (listed["gpus_per_rank"] == 1).all()
    assert pd.isna(runs.loc["not_enough_slots", "device_kind"])


def test_the_emulator_is_a_cpu_over_tcp(tmp_path: Path) -> None:
    """The emulator logs no `via` line; its banner says `TCP over 4 NIC(s) per rank` and its
    devices `emulated CPU (...)`: no GPU per rank."""
    sweep = tmp_path / "quickstart"
    shutil.copytree(paths.DATA / "sweeps" / "quickstart-nccl-emulated", sweep)
    runs = tb.build_tables(sweep).runs
    assert runs["transport"].tolist() == ["TCP (emulated)"] * 2
    assert runs["device_kind"].tolist() == ["CPU"] * 2
    assert runs["gpus_per_rank"].isna().all()


@pytest.mark.parametrize(
    ("log", "transport"),
    [
        (DATA / "v2.13.13" / "all_reduce_perf.np2.info.txt", "P2P"),  # `via P2P/CUMEM`
        (DATA.parent / "gpu-netns" / "stock-nic3-down.stdout.txt", "NET/Socket"),
        (DATA / "all_reduce_perf.p2p.c1.txt", None),  # NCCL_DEBUG unset: no INFO line
    ],
)
def test_the_transport_tap_reads_real_gpu_logs(log: Path, transport: str | None) -> None:
    tap = TransportTap()
    tap.read(log)
    assert tap.transport == transport


# ---- environment values from a run folder never take the tables down --------------------------


@pytest.mark.parametrize(
    "value", ["5000", "9" * 5001, "-1", "inf", "nan", "1e308", "\u00b9", "\u0661\u0662", ""]
)
def test_a_hostile_ib_timeout_in_a_run_s_environment_never_kills_the_report(
    small_sweep: Path, tmp_path: Path, value: str
) -> None:
    # `import` ends in the same rebuild as `report`: one test covers both.
    sweep = copy_sweep(small_sweep, tmp_path / "s")
    for run in st.RunStore.at(sweep).run_dirs():
        for name in (runformat.SPEC, runformat.PROVENANCE):
            doc = json.loads((run / name).read_text())
            doc.setdefault("env", {}).update(NCCL_IB_TIMEOUT=value, NCCL_IB_RETRY_CNT=value)
            (run / name).write_text(json.dumps(doc))
    result = invoke_wide("report", str(sweep))
    assert result.exit_code == 0, result.output
    assert len(rebuild(sweep).runs) == len(list(st.RunStore.at(sweep).run_dirs()))


def test_of_run_gives_a_runs_rows_in_order_and_follows_a_replaced_table() -> None:
    """`Tables.of_run` splits a per-run table once; it gives what filtering would, an empty
    frame with the columns for a run without rows, and a table assigned anew is split anew."""
    events = pd.DataFrame(
        {"run_id": ["b", "a", "b", "c"], "time": [1.0, 2.0, 3.0, 4.0], "kind": list("wxyz")}
    )
    tables = tb.Tables(results=pd.DataFrame(), events=events)
    pd.testing.assert_frame_equal(tables.of_run("events", "b"), events[events["run_id"] == "b"])
    missing = tables.of_run("events", "nope")
    assert missing.empty and list(missing.columns) == ["run_id", "time", "kind"]
    tables.events = events[events["run_id"] != "b"]
    assert tables.of_run("events", "b").empty and len(tables.of_run("events", "c")) == 1
    assert tables.of_run("traffic", "a").empty  # an empty table, no run_id rows at all
