"""The report compares like with like: series, baselines, left-out runs, env, axes, run table."""

from __future__ import annotations

import html
import json
import re
import shutil
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

from r2bench.analysis.importer import import_dir
from r2bench.analysis.parsedrun import TransportTap, log_events, parse_outputs
from r2bench.analysis.windows import fault_windows as run_fault_windows
from r2bench.report.charts import (
    NO_BASELINE,
    all_figures,
    binary_size,
    fault_windows,
    series_rows,
    size_axis,
)
from r2bench.report.html import ProvenanceSummary, build_report, provenance_html, runs_html
from r2bench.report.inline import prose_html
from r2bench.report.series import baselines, series_info
from r2bench.runfolder import runformat, runmodel
from r2bench.runfolder.runmodel import FaultEvent
from r2bench.tables.build import WINDOW_COLUMNS, Tables, build_tables, rebuild
from tests.support import paths

DATA = paths.DATA / "nccl-tests"
FIGURE_RE = re.compile(
    r"<script type='application/json' class='r2-figure' id='figure-([^']*)'>(.*?)</script>", re.S
)


def figures_of(page: str) -> dict[str, dict]:
    return {m[1]: json.loads(m[2]) for m in FIGURE_RE.finditer(page)}


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Tables, str]:
    """Every capture imported as one sweep: NVLink/P2P, NET/Socket, crashes, three releases."""
    results = tmp_path_factory.mktemp("results")
    import_dir(DATA, results, "mixed")
    sweep = results / "mixed"
    tables = rebuild(sweep)
    build_report(sweep, tables, sweep / "report.html")
    return sweep, tables, (sweep / "report.html").read_text()


def _transport(log: Path) -> str | None:
    tap = TransportTap()
    tap.read(log)
    return tap.transport


@pytest.mark.parametrize(
    ("log", "transport"),
    [
        ("all_reduce_perf.socket.info.txt", "NET/Socket"),
        ("v2.13.13/all_reduce_perf.np2.info.txt", "P2P"),
        ("v2.18.5/all_reduce_perf.g2.c1.txt", None),  # not logged
    ],
)
def test_transport_is_read_from_nccl_info_lines(log: str, transport: str | None) -> None:
    assert _transport(DATA / log) == transport


def test_the_parsers_gather_the_transport_on_their_own_pass() -> None:
    log = DATA / "all_reduce_perf.socket.info.txt"
    by_results, by_events = TransportTap(), TransportTap()
    assert parse_outputs(log, None, "all_reduce", by_results).rows
    assert log_events([log], by_events)
    assert by_results.transport == by_events.transport == _transport(log) == "NET/Socket"


def test_no_series_mixes_transports_or_outcomes(mixed: tuple[Path, Tables, str]) -> None:
    _, tables, page = mixed
    info = series_info(tables.runs)
    runs = info.runs
    assert {"NET/Socket", "P2P"} <= set(runs["transport"])
    for _, group in runs.groupby("series"):
        assert group["transport"].nunique() == 1
        assert group["ranks"].nunique() == 1 and group["gpus_per_rank"].nunique() == 1
        assert group["library_version"].nunique() == 1
        assert group["nccl_tests_version"].nunique() == 1
    figs = figures_of(page)
    busbw = [f for k, f in figs.items() if k.startswith("busbw")]
    assert len(busbw) == 6  # one figure per collective
    ok_series = set(info.ok_runs()["series"])
    drawn = {html.unescape(t["name"]) for f in busbw for t in f["data"]}
    assert drawn <= ok_series  # no series of a crashed, hung or wrong run
    for name in drawn:
        assert set(runs[runs["series"] == name]["outcome"]) == {"ok"}
    rows = series_rows(tables, info)
    assert set(tables.runs[tables.runs["run_id"].isin(rows["run_id"])]["outcome"]) == {"ok"}


def test_runs_that_did_not_end_ok_are_counted_beside_the_figures(
    mixed: tuple[Path, Tables, str],
) -> None:
    _, tables, page = mixed
    bad = Counter(tables.runs[tables.runs["outcome"] != "ok"]["outcome"])
    total = sum(bad.values())
    assert total >= 10 and {"crashed", "timeout", "wrong_results"} <= set(bad)
    text = f"{total} runs left out (did not end ok): " + ", ".join(
        f"{n} {k}" for k, n in sorted(bad.items())
    )
    assert html.escape(text) in page


def test_no_valid_baseline_is_said_not_drawn(mixed: tuple[Path, Tables, str]) -> None:
    _, _, page = mixed
    assert "overhead" not in figures_of(page)  # nothing drawn
    assert prose_html(NO_BASELINE) in page  # `none` shown as code, not in backticks


BASE_RUN = {
    "outcome": "ok",
    "collective": "all_reduce",
    "library": "nccl",
    "library_basis": "NCCL version 2.28.9 printed",
    "library_version": "2.28.9",
    "scenario": "none",
    "ranks": 2,
    "gpus_per_rank": 1,
    "n_nodes": 2,
    "transport": "NET/IB",
    "nccl_tests_version": "2.19.6",
}
"""The runs-table columns a series is keyed on, as one ordinary run has them."""


def _runs(*rows: dict[str, object]) -> pd.DataFrame:
    return pd.DataFrame([{**BASE_RUN, "run_id": f"r{i}", **row} for i, row in enumerate(rows)])


def test_baseline_shares_transport_and_scale_never_itself() -> None:
    runs = _runs(
        {},  # r0: stock, IB, no fault
        {"transport": "NET/Socket"},  # r1: stock, socket, no fault
        {"library": "r2ccl", "R2CC_MODE": "1", "scenario": "nic_down"},  # r2: IB
        {"library": "r2ccl", "R2CC_MODE": "1", "scenario": "nic_down", "transport": "NET/Socket"},
        {"scenario": "nic_down", "ranks": 16},  # r4: no baseline at 16 ranks
        {"library": "r2ccl", "R2CC_MODE": "1", "scenario": "nic_down", "outcome": "crashed"},
    )
    info = series_info(runs)
    label = dict(zip(info.runs["run_id"], info.runs["series"], strict=True))
    assert len(set(label.values())) == 5  # r5 (crashed) shares r2's series key
    pairs = baselines(info)
    assert pairs[label["r2"]] == label["r0"]
    assert pairs[label["r3"]] == label["r1"]
    assert label["r4"] not in pairs
    assert label["r0"] not in pairs and label["r1"] not in pairs  # never compared with itself
    assert "NET/IB" in label["r2"] and "NET/Socket" in label["r3"]


def test_differing_nccl_variables_split_series() -> None:
    runs = _runs({"NCCL_ALGO": "Ring"}, {"NCCL_ALGO": "Tree"}, {"NCCL_ALGO": "Tree", "repeat": 1})
    info = series_info(runs)
    assert info.runs["series"].nunique() == 2
    assert any("NCCL_ALGO=Ring" in s for s in info.runs["series"])
    same = series_info(_runs({"NCCL_ALGO": "Ring"}, {"NCCL_ALGO": "Ring"}))
    assert same.runs["series"].nunique() == 1 and "NCCL_ALGO" not in same.runs["series"][0]


def test_guessed_library_is_its_own_series_and_says_so() -> None:
    info = series_info(_runs({}, {"library_basis": "guess: no library version"}))
    assert info.runs["series"].nunique() == 2
    assert any("nccl (guessed)" in s for s in info.runs["series"])


def test_a_copy_of_the_baseline_is_not_compared(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    src = DATA / "v2.19.6" / "all_reduce_perf.g2.c1.txt"
    shutil.copy(src, logs / "all_reduce_perf.none.txt")
    shutil.copy(src, logs / "all_reduce_perf.nic_down.txt")
    import_dir(logs, tmp_path / "results", "copies")
    tables = build_tables(tmp_path / "results" / "copies")
    assert len(tables.runs) == 2
    figs = {f.id: f for f in all_figures(tables)}
    assert not figs["overhead"].spec["data"]
    assert figs["overhead"].note == NO_BASELINE


def test_overhead_names_its_baseline_and_shows_a_legend(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    text = (DATA / "v2.19.6" / "all_reduce_perf.g2.c1.txt").read_text()
    shutil.copy(DATA / "v2.19.6" / "all_reduce_perf.g2.c1.txt", logs / "all_reduce_perf.none.txt")
    slower = re.sub(r"(\s+)(\d+\.\d+)(\s+\d+\.\d+\s+\d+\.\d+\s+0\s)", _double_first_time, text)
    assert slower != text
    (logs / "all_reduce_perf.nic_down.txt").write_text(slower)
    import_dir(logs, tmp_path / "results", "pair")
    figs = {f.id: f for f in all_figures(build_tables(tmp_path / "results" / "pair"))}
    fig = figs["overhead"]
    [trace] = fig.spec["data"]
    assert (
        html.unescape(trace["name"]) == "all_reduce · nccl · nic_down  vs  all_reduce · nccl · none"
    )
    assert "all_reduce · nccl · none" in html.unescape(fig.spec["layout"]["title"]["text"])
    assert fig.spec["layout"]["showlegend"] is True
    assert max(trace["y"]) == pytest.approx(100.0, abs=1.0)
    assert fig.meta["baselines"] == ["all_reduce · nccl · none"]


def _double_first_time(m: re.Match[str]) -> str:
    return f"{m[1]}{float(m[2]) * 2:.2f}{m[3]}"


def test_size_axis_is_log2_with_binary_ticks() -> None:
    axis = size_axis([8, 1024, 1 << 20, 1 << 30])
    assert axis["type"] == "log"
    assert all(v & (v - 1) == 0 for v in axis["tickvals"])  # powers of two
    assert {"1K", "1M", "1G"} <= set(axis["ticktext"])
    assert size_axis([8, 256])["ticktext"][0] == "8"
    assert len(axis["tickvals"]) <= 12
    assert binary_size(512) == "512" and binary_size(64 << 10) == "64K"
    assert size_axis([])["type"] == "log"


def test_env_shows_only_differing_communication_variables() -> None:
    summary = ProvenanceSummary(runs=3)
    summary.env = {
        "NCCL_IB_HCA": Counter({"mlx5_0": 2, "mlx5_1": 1}),
        "UCX_TLS": Counter({"rc": 2}),  # unset in one run: differs
        "NCCL_DEBUG": Counter({"INFO": 3}),  # same everywhere: folded
        "PATH": Counter({"/usr/bin": 2, "/bin": 1}),  # differs but not ours: folded
        "HOSTNAME": Counter({"<b>x</b>": 3}),
    }
    page = provenance_html(summary)
    shown, folded = page.split("<details>")
    assert "NCCL_IB_HCA" in shown and "UCX_TLS" in shown
    assert "NCCL_DEBUG" not in shown and "PATH" not in shown
    assert "NCCL_DEBUG" in folded and "PATH" in folded
    assert "&lt;b&gt;x&lt;/b&gt;" in folded and "<b>x</b>" not in page


def test_run_table_lists_every_run_with_source_and_log_link(
    mixed: tuple[Path, Tables, str],
) -> None:
    sweep, tables, page = mixed
    start = page.index("<table class='runs' id='run-table'>")
    table = page[start : page.index("</table>", start)]
    assert table.count("<tr") == len(tables.runs) + 1
    assert "v2.18.5/multi.loop.txt (run2)" in table
    assert "<i>(guessed)</i>" in table  # 2.13 prints no library version
    assert "crashed" in table and "Segmentation fault" in table
    for href in re.findall(r"href='([^']*)'", table):
        assert (sweep / href).is_file()


def test_run_table_escapes_hostile_sources(tmp_path: Path) -> None:
    runs = pd.DataFrame(
        [
            {
                "run_id": "r0",
                "path": "<img src=x onerror=alert(1)>",
                "imported_from": "/x/<script>alert(1)</script>.txt",
                "collective": "<b>c</b>",
                "ranks": 2,
                "transport": "<i>t</i>",
                "library": "<u>l</u>",
                "library_version": None,
                "library_basis": "guess: <x>",
                "outcome": "crashed",
                "reason": "<script>alert(2)</script>",
                "avg_busbw_gbps": None,
            }
        ]
    )
    results = pd.DataFrame(columns=["run_id", "placement", "busbw_gbps"])
    tables = Tables(results=results, iterations=pd.DataFrame(), events=pd.DataFrame(), runs=runs)
    text = runs_html(tmp_path, tables, tmp_path)
    for bad in ("<script>", "<img", "<b>c", "<i>t", "<u>l", "<x>"):
        assert bad not in text


def _window_rows(faults: list[FaultEvent]) -> pd.DataFrame:
    """The windows table rows of one run's fault events (as the tables build them)."""
    return pd.DataFrame(
        [
            ("r", w.fault, w.cycle, w.kind, w.node, w.nic, w.applied, w.back)
            + (None,) * (len(WINDOW_COLUMNS) - 8)  # no failure evidence: no counters here
            for w in run_fault_windows(faults, None)
        ],
        columns=list(WINDOW_COLUMNS),
    )


def test_fault_windows_per_flap_cycle() -> None:
    events = []
    for cycle, (start, end) in enumerate([(10.0, 11.0), (12.0, 13.5)]):
        for action, t in (("inject", start), ("revert", end)):
            events.append(
                FaultEvent(
                    action=action,
                    fault=0,
                    kind="link_down",
                    node="n0",
                    nic="eth1",
                    time=t,
                    cycle=cycle,
                )
            )
    windows = fault_windows(_window_rows(events), 20.0)
    assert [(w.start, w.end) for w in windows] == [(10.0, 11.0), (12.0, 13.5)]
    assert [w.label for w in windows] == ["link_down on n0/eth1", "link_down on n0/eth1 (cycle 1)"]
    # With the last revert missing: the link never came back, the window stays open.
    windows = fault_windows(_window_rows(events[:-1]), 20.0)
    assert [(w.start, w.end) for w in windows] == [(10.0, 11.0), (12.0, 20.0)]
    # Labels are plain text (escaped once, where drawn): a caption must not show `&amp;`.
    odd_host = [e.model_copy(update={"node": "n&0"}) for e in events]
    assert fault_windows(_window_rows(odd_host), 20.0)[0].label == "link_down on n&0/eth1"


def test_new_fault_fields_reach_the_events_table(tmp_path: Path) -> None:
    from tests.support.sample_sweep import SampleConfig, write_sample_sweep

    store = write_sample_sweep(tmp_path, DATA, SampleConfig(modes=("1",), repeats=1, sizes=8))
    run = next(r for r in store.records() if r.faults)
    extra = runmodel.FaultEvent(
        action="inject",
        fault=0,
        kind="link_down",
        node="n0",
        nic="eth1",
        time=5.0,
        cycle=2,
        planned_at=4.0,
        requested_at=4.5,
        applied_at=5.0,
        verified_at=5.1,
        clock_offset_s=0.01,
    )
    (run.path / runformat.FAULTS).write_text(
        "".join(f.model_dump_json() + "\n" for f in [*run.faults, extra])
    )
    tables = build_tables(store.sweep_dir)
    ev = tables.events[(tables.events["run_id"] == run.run_id) & (tables.events["cycle"] == 2)]
    [row] = ev.to_dict("records")
    details = json.loads(row["details"])
    assert details["applied_at"] == 5.0 and details["clock_offset_s"] == 0.01
    assert row["kind"] == "fault_inject"
    figs = all_figures(tables)
    assert any(f.id.startswith("timeline") and f.spec["layout"]["shapes"] for f in figs)


def test_library_family_gpu_and_hosts_split_series() -> None:
    # RCCL on MI300X, NCCL on A100 and NCCL on H100 are three configurations, not repeats.
    runs = _runs(
        {"library": "rccl", "library_recipe": "rccl", "gpu": "AMD Instinct MI300X"},
        {"library_recipe": "nccl", "gpu": "NVIDIA A100-SXM4-80GB"},
        {"library_recipe": "nccl", "gpu": "NVIDIA H100 80GB HBM3"},
        {"library_recipe": "nccl", "gpu": "NVIDIA H100 80GB HBM3", "nodes": "h100-2,h100-4"},
    )
    info = series_info(runs)
    assert info.runs["series"].nunique() == 4
    assert any("MI300X" in s for s in info.runs["series"])


def test_unknown_versions_of_two_files_are_not_one_library() -> None:
    unknown = {"library_version": None, "library_basis": "guess: no version"}
    runs = _runs(
        {**unknown, "imported_from": "/logs/a.txt"},
        {**unknown, "imported_from": "/logs/b.txt"},
        {**unknown, "imported_from": "/logs/b.txt", "repeat": 1},
    )
    info = series_info(runs)
    label = dict(zip(info.runs["run_id"], info.runs["series"], strict=True))
    assert label["r0"] != label["r1"] and label["r1"] == label["r2"]
    assert "unknown (/logs/a.txt)" in label["r0"]


def test_runs_of_different_files_that_nothing_tells_apart_are_not_averaged() -> None:
    # The same system with and without a network hook: the logs print the same facts.
    runs = _runs({"imported_from": "/logs/plain.txt"}, {"imported_from": "/logs/hooked.txt"})
    info = series_info(runs)
    assert info.runs["series"].nunique() == 2
    assert "nothing in the logs tells apart" in info.shared and "not averaged" in info.shared
    # runs r2bench ran itself are repeats as before
    assert series_info(_runs({}, {"repeat": 1})).runs["series"].nunique() == 1


def test_one_process_driving_eight_gpus_is_one_rank(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    shutil.copy(paths.DATA / "public" / "nccl-1530.txt", logs / "g8.txt")
    import_dir(logs, tmp_path, "g8")
    runs = rebuild(tmp_path / "g8").runs
    assert (runs["ranks"].iloc[0], runs["gpus_per_rank"].iloc[0]) == (1, 8)
    assert runs["gpu"].iloc[0] == "NVIDIA GeForce RTX 4090"
