"""The HTML report: figure data equals the tables, hostile strings are escaped, bad inputs pass."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pandas as pd
import pytest

from r2bench.commands.report import report_command
from r2bench.report import export
from r2bench.report.charts import series_rows, size_stats, with_mode
from r2bench.report.html import build_report
from r2bench.report.series import series_info
from r2bench.runfolder import runformat
from r2bench.runfolder import store as st
from r2bench.tables.build import Tables, rebuild
from tests.support import paths
from tests.support.sample_sweep import SampleConfig, write_sample_sweep

DATA = paths.DATA / "nccl-tests"
FIGURE_RE = re.compile(
    r"<script type='application/json' class='r2-figure' id='figure-([^']*)'>(.*?)</script>", re.S
)
HOSTILE_HOST = "<script>alert(1)</script>"
HOSTILE_IMG = "<img src=x onerror=alert(2)>"


def figures_of(page: str) -> dict[str, dict]:
    """Figure specs embedded in a report page, by figure id."""
    return {m[1]: json.loads(m[2]) for m in FIGURE_RE.finditer(page)}


def without_plotly_js(page: str) -> str:
    """The page minus the inline plotly.js bundle (the first script of the head)."""
    start = page.index("<script type='text/javascript'>")
    end = page.index("</script>", start)
    return page[:start] + page[end:]


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Tables, str]:
    results = tmp_path_factory.mktemp("results")
    cfg = SampleConfig(repeats=3, sizes=16, iterations=6)
    store = write_sample_sweep(results, DATA, cfg)
    tables = rebuild(store.sweep_dir)
    out = store.sweep_dir / "report.html"
    build_report(store.sweep_dir, tables, out)
    return store.sweep_dir, tables, out.read_text()


def test_busbw_figure_equals_the_tables(report: tuple[Path, Tables, str]) -> None:
    _, tables, page = report
    fig = figures_of(page)["busbw"]
    info = series_info(tables.runs)
    rows = series_rows(tables, info)
    assert len(fig["data"]) == size_stats(rows, "busbw_gbps")["series"].nunique()
    rows = rows[rows["placement"] == "out_of_place"]
    for trace in fig["data"]:
        name = html.unescape(trace["name"])
        mine = rows[rows["series"] == name]
        assert set(mine["outcome"]) == {"ok"}  # only runs that ended ok
        grouped = mine.groupby("size_bytes")["busbw_gbps"]
        assert trace["x"] == grouped.median().index.tolist()
        assert trace["y"] == pytest.approx(grouped.median().tolist())
        assert [m + e for m, e in zip(trace["y"], trace["error_y"]["array"], strict=True)] == (
            pytest.approx(grouped.max().tolist())
        )
        assert [m - e for m, e in zip(trace["y"], trace["error_y"]["arrayminus"], strict=True)] == (
            pytest.approx(grouped.min().tolist())
        )
        assert [c[2] for c in trace["customdata"]] == grouped.count().tolist()  # 3 repeats
    assert fig["layout"]["showlegend"] is True


def test_overhead_figure_equals_the_tables(report: tuple[Path, Tables, str]) -> None:
    _, tables, page = report
    fig = figures_of(page)["overhead"]
    res = with_mode(tables.results)
    res = res[(res["placement"] == "out_of_place") & (res["outcome"] == "ok")]
    base = res[(res["library"] == "nccl") & (res["scenario"] == "none")]
    base_t = base.groupby("size_bytes")["time_us"].median()
    [trace] = [
        t
        for t in fig["data"]
        if html.unescape(t["name"]).startswith("all_reduce · r2ccl · mode 1 · nic_down  vs ")
    ]
    assert html.unescape(trace["name"]).endswith("vs  all_reduce · nccl · none")
    mine = res[(res["mode"] == "1") & (res["scenario"] == "nic_down")]
    t = mine.groupby("size_bytes")["time_us"].median()
    expect = ((t / base_t - 1) * 100).tolist()
    assert trace["y"] == pytest.approx(expect)
    assert max(trace["y"]) > 20  # the fault shows up as overhead at the sizes it hit
    names = [html.unescape(t["name"]) for t in fig["data"]]
    assert not any(n.startswith("all_reduce · nccl · none ") for n in names)  # not vs itself
    assert not any("nccl · nic_down  vs" in n for n in names)  # crashed runs are left out
    assert fig["layout"]["showlegend"] is True
    assert "all_reduce · nccl · none" in html.unescape(fig["layout"]["title"]["text"])


def test_timelines_equal_the_tables_and_shade_the_fault(report: tuple[Path, Tables, str]) -> None:
    _, tables, page = report
    figs = figures_of(page)
    timelines = [f for k, f in figs.items() if k.startswith("timeline-")]
    assert len(timelines) == int((tables.runs["n_faults"] > 0).sum())  # 12 runs with a fault
    for fig in timelines:
        run_id = html.unescape(fig["layout"]["title"]["text"]).split(":")[0]
        run = tables.runs[tables.runs["run_id"] == run_id].iloc[0]
        t0 = run["started_at"]
        ev = tables.events[tables.events["run_id"] == run_id]
        inject = ev[ev["kind"] == "fault_inject"]["time"].iloc[0]
        revert = ev[ev["kind"] == "fault_revert"]["time"].iloc[0]
        [shape] = fig["layout"]["shapes"]
        assert (shape["x0"], shape["x1"]) == pytest.approx((inject - t0, revert - t0))
        it = tables.iterations[tables.iterations["run_id"] == run_id]
        [oop] = [t for t in fig["data"] if t["name"] == "out_of_place iteration"]
        mine = it[it["placement"] == "out_of_place"]
        mine = mine[mine["size_bytes"] == it["size_bytes"].max()]  # the run's largest size only
        mine = mine.sort_values("timestamp")
        assert min(oop["x"]) >= 0  # nothing before the launch
        assert oop["x"] == pytest.approx((mine["timestamp"] - t0).tolist())
        assert oop["y"] == pytest.approx(mine["busbw_gbps"].tolist())
        marks = {t["name"] for t in fig["data"]} - {"out_of_place iteration", "in_place iteration"}
        if run["outcome"] == "ok":  # R2CC failed over: its events are marked
            assert {"r2cc_backup_switch", "r2cc_hot_repair_broadcast"} <= marks


def test_outcome_matrix_counts(report: tuple[Path, Tables, str]) -> None:
    _, tables, page = report
    [trace] = figures_of(page)["outcomes"]["data"]
    cells = {
        (y, x): text
        for y, row in zip(trace["y"], trace["text"], strict=True)
        for x, text in zip(trace["x"], row, strict=True)
    }
    assert cells[("nic_down", "nccl")] == "crashed 3"
    assert cells[("nic_down", "r2ccl mode 0")] == "crashed 3"
    assert cells[("nic_down", "r2ccl mode 1")] == "ok 3"
    assert cells[("none", "r2ccl mode 2")] == "ok 3"
    assert sum(int(t.split()[-1]) for t in cells.values()) == len(tables.runs)


def test_page_is_self_contained(report: tuple[Path, Tables, str]) -> None:
    _, _, page = report
    outside = without_plotly_js(page)
    assert "cdn.plot.ly" not in outside and "https://" not in outside
    assert "<script src" not in page and "<link" not in page
    assert page.count("Plotly.newPlot") >= 1
    assert "Provenance" in page and "Open MPI 4.1.6" in page and "mpirun -np 2" in page


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    results = tmp_path_factory.mktemp("results")
    cfg = SampleConfig(modes=(None, "1"), repeats=1, sizes=14, iterations=4, hostname=HOSTILE_HOST)
    store = write_sample_sweep(results, DATA, cfg)
    run_id = next(store.complete_runs())
    folder = st.RunFolder(store.run_dir(run_id))
    rec = store.load(run_id)
    prov = json.loads((folder.path / runformat.PROVENANCE).read_text())
    prov["env"]["EVIL"] = HOSTILE_IMG
    prov["hostnames"].append(HOSTILE_IMG)
    (folder.path / runformat.PROVENANCE).write_text(json.dumps(prov))
    line = f"{HOSTILE_HOST}:1:2 [0] NCCL WARN NET/Socket : {HOSTILE_IMG} Connection reset by peer"
    folder.write_stderr(line + "\n")
    (folder.path / runformat.EVENTS).unlink()  # events are parsed again from stdout and stderr
    assert rec.complete
    out = results / "hostile.html"
    assert report_command(store.sweep_dir, out, None) == 0
    return store.sweep_dir, out.read_text()


def test_hostile_strings_are_escaped(hostile: tuple[Path, str]) -> None:
    _, page = hostile
    outside = without_plotly_js(page)
    assert HOSTILE_HOST not in outside and HOSTILE_IMG not in outside
    assert "<img" not in outside.lower()
    assert html.escape(HOSTILE_IMG) in outside  # shown, as text
    assert html.escape(HOSTILE_HOST) in outside
    n_figures = len(figures_of(page))
    assert outside.count("<script") == 1 + n_figures  # figure data blocks and the loader
    for spec in figures_of(page).values():
        assert HOSTILE_HOST not in json.dumps(spec) and "<img" not in json.dumps(spec)


def test_hostile_log_line_reaches_the_report_as_text(hostile: tuple[Path, str]) -> None:
    sweep_dir, page = hostile
    events = pd.read_parquet(sweep_dir / "tables" / "events.parquet")
    assert events["message"].str.contains(HOSTILE_IMG, regex=False).any()  # the data is kept
    assert (events["host"] == HOSTILE_HOST).any()
    assert html.escape(HOSTILE_IMG) in page


def write_run(store: st.RunStore, run_id: str, stdout: bytes | None, result: bytes | None) -> None:
    folder = store.create(run_id)
    (folder.path / runformat.SPEC).write_text(
        json.dumps({"collective": "all_reduce", "scenario": "x"})
    )
    if stdout is not None:
        folder.write_stdout(stdout)
    if result is not None:
        folder.write_result_json(result)
    folder.mark_complete()


def test_bad_run_folders_never_crash_the_report(tmp_path: Path) -> None:
    store = st.RunStore(tmp_path, "bad")
    text = (DATA / "all_reduce_perf.socket.S1.txt").read_bytes()
    write_run(store, "truncated", text[: len(text) * 3 // 4], None)
    write_run(store, "binary", bytes(range(256)) * 400, b"\x00\xff{")
    write_run(store, "empty", b"", b"")
    write_run(store, "nothing", None, None)
    write_run(
        store, "json-cut", None, (DATA / "all_reduce_perf.socket.I1.json").read_bytes()[:5000]
    )
    (store.run_dir("nothing") / runformat.SPEC).write_bytes(b"\x89PNG not json")
    (store.run_dir("empty") / runformat.OUTCOME).write_text('{"outcome": {"status": "exploded"}}')
    store.create("no-complete-marker").write_stdout(text)
    assert report_command(store.sweep_dir, None, None) == 0
    page = (store.sweep_dir / "report.html").read_text()
    assert "no-complete-marker" in page and "incomplete" in page
    runs = pd.read_parquet(store.sweep_dir / "tables" / "runs.parquet").set_index("run_id")
    assert runs.loc["truncated", "n_rows"] > 0
    assert runs.loc["json-cut", "n_rows"] > 0  # results salvaged from the cut JSON


def test_huge_output_in_a_run_folder(tmp_path: Path) -> None:
    store = st.RunStore(tmp_path, "huge")
    folder = store.create("huge-run")
    (folder.path / runformat.SPEC).write_text(
        json.dumps({"collective": "all_reduce", "scenario": "x"})
    )
    noise = b"vm:2537:2554 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via NET/Socket/0\n" * 16384
    with (folder.path / runformat.STDOUT).open("wb") as out:
        out.write((DATA / "all_reduce_perf.socket.c1.txt").read_bytes())
        while out.tell() < 100 << 20:
            out.write(noise)
    folder.mark_complete()
    assert report_command(store.sweep_dir, None, None) == 0
    runs = pd.read_parquet(store.sweep_dir / "tables" / "runs.parquet")
    assert runs["n_rows"].tolist() == [24]


def test_report_command_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert report_command(tmp_path / "missing", None, None) == 2
    assert report_command(tmp_path, None, "gif") == 2
    err = capsys.readouterr().err
    assert "not a folder" in err and "unknown format" in err


def test_read_only_sweep_and_unwritable_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = SampleConfig(modes=("1",), scenarios=("none",), repeats=1, sizes=4, iterations=2)
    store = write_sample_sweep(tmp_path, DATA, cfg)
    (store.sweep_dir / "tables").write_text("a file where the tables folder should be")
    assert report_command(store.sweep_dir, tmp_path / "r.html", None) == 0
    assert "tables not written" in capsys.readouterr().err
    assert (tmp_path / "r.html").is_file()
    assert report_command(store.sweep_dir, tmp_path / "r.html" / "x.html", None) == 2
    said = capsys.readouterr().err
    assert "r.html/x.html: could not write it" in said and "Traceback" not in said


def test_static_export_failure_is_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = SampleConfig(modes=("1",), scenarios=("none",), repeats=1, sizes=4, iterations=2)
    store = write_sample_sweep(tmp_path, DATA, cfg)

    def no_engine(*args: object, **kwargs: object) -> export.ExportResult:
        return export.ExportResult(error="static export needs the kaleido package (test)")

    monkeypatch.setattr(export, "export_figures", no_engine)
    assert report_command(store.sweep_dir, None, "png") == 0
    assert "warning: no static figures written" in capsys.readouterr().err
    assert (store.sweep_dir / "report.html").is_file()


def test_static_export_with_kaleido(tmp_path: Path) -> None:
    pytest.importorskip("kaleido")
    cfg = SampleConfig(modes=("1",), scenarios=("none",), repeats=1, sizes=4, iterations=2)
    store = write_sample_sweep(tmp_path, DATA, cfg)
    tables = rebuild(store.sweep_dir)
    figures = build_report(store.sweep_dir, tables, tmp_path / "r.html")
    result = export.export_figures(figures, tmp_path / "static", "svg", "r")
    if result.error:
        pytest.skip(f"kaleido cannot export here: {result.error}")
    assert [p.name for p in result.paths] == ["r-busbw.svg", "r-outcomes.svg"]
    assert all(p.read_text().lstrip().startswith("<svg") for p in result.paths)
