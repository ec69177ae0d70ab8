"""NIC counters: the node-side sampler (on a fake sysfs), the `counters` table, the NIC figure."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from r2bench.figures.registry import draw_nic_traffic
from r2bench.report.charts import run_windows
from r2bench.report.html import build_report
from r2bench.report.nics import nic_figures, phase_means
from r2bench.runfolder.runmodel import FaultEvent
from r2bench.runfolder.store import RunStore
from r2bench.sweep import counters as sweep_counters
from r2bench.tables.build import build_tables
from r2bench.tables.counters import read_counters_file

SAMPLER = Path(__file__).resolve().parents[1] / "injectors" / "sampler.sh"


def _fake_sysfs(root: Path) -> None:
    net = root / "class/net/eth1"
    (net / "statistics").mkdir(parents=True)
    (net / "statistics/tx_bytes").write_text("1000\n")
    (net / "statistics/rx_bytes").write_text("2000\n")
    (net / "operstate").write_text("up\n")
    port = root / "class/infiniband/mlx5_1/ports/1"
    (port / "counters").mkdir(parents=True)
    (port / "counters/port_xmit_data").write_text("250\n")
    (port / "counters/port_rcv_data").write_text("500\n")
    (port / "state").write_text("4: ACTIVE\n")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "Z" not in Path(f"/proc/{pid}/stat").read_text()


def _wait_for_samples(out: Path, nic: str, count: int, limit_s: float = 10.0) -> None:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        text = out.read_text() if out.exists() else ""
        if sum(1 for line in text.splitlines() if f"\t{nic}\t" in line) >= count:
            return
        time.sleep(0.02)
    raise AssertionError(f"fewer than {count} samples of {nic} after {limit_s} s")


def test_sampler_daemonizes_samples_and_stops(tmp_path: Path) -> None:
    _fake_sysfs(tmp_path / "sys")
    out, pidfile = tmp_path / "run/counters.node0.tsv", tmp_path / "run/.sampler.pid"
    env = {**os.environ, "R2B_SYSFS": str(tmp_path / "sys"), "R2B_RUN": "run-x"}
    nics = ["eth1:eth1::1", "ib1::mlx5_1:1", "gone:nosuch::1"]
    started = time.monotonic()
    subprocess.run(
        ["bash", str(SAMPLER), "start", str(out), str(pidfile), "10", *nics],
        env=env, check=True, timeout=10,
    )  # fmt: skip
    assert time.monotonic() - started < 2, "start must return at once"
    pid = int(pidfile.read_text())
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        assert b"R2B_RUN=run-x" in environ  # the run's kill-by-run finds it
        # Wait for samples rather than a fixed time: a busy machine starts the loop late.
        _wait_for_samples(out, "eth1", 10)
        (tmp_path / "sys/class/net/eth1/statistics/tx_bytes").write_text("126000\n")
        (tmp_path / "sys/class/infiniband/mlx5_1/ports/1/state").write_text("1: DOWN\n")
        _wait_for_samples(out, "eth1", 20)
    finally:
        stopping = time.monotonic()
        subprocess.run(["bash", str(SAMPLER), "stop", str(pidfile)], check=True, timeout=10)
    # TERM ends the loop within one interval; the KILL fallback only comes after 0.5 s of
    # polling. Under an init that does not reap (containers), the ended loop stays a zombie:
    # stop must count that as gone, not poll it until the fallback.
    assert time.monotonic() - stopping < 0.45
    time.sleep(0.1)
    assert not _pid_alive(pid) and not pidfile.exists()
    lines = out.read_text().splitlines()
    assert lines[0].startswith("# r2bench counters v1") and lines[1].startswith("time\tnic")
    rows = [ln.split("\t") for ln in lines[2:]]
    assert len(rows) >= 3 * 10  # >= 10 samples of 3 NICs in 0.6 s at 10 ms
    ib = [r for r in rows if r[1] == "ib1"]
    assert ib[0][2:5] == ["ib", "1000", "2000"]  # port counters are 4-byte words
    assert ib[0][5] == "ACTIVE" and ib[-1][5] == "DOWN"
    assert {r[3] for r in rows if r[1] == "gone"} == {"-"}
    frame = read_counters_file(out, "run-x", "node0")
    eth = frame[frame["nic"] == "eth1"]
    assert eth["tx_gbit_s"].max() > 0 and np.isnan(eth["tx_gbit_s"].iloc[0])
    total = np.nansum(eth["tx_gbit_s"].to_numpy() * eth["time"].diff().to_numpy()) * 1e9 / 8
    assert total == pytest.approx(125_000, rel=1e-6)


def test_sampler_stop_leaves_foreign_pids_alone(tmp_path: Path) -> None:
    other = subprocess.Popen(["sleep", "30"])
    try:
        pidfile = tmp_path / "pid"
        pidfile.write_text(f"{other.pid}\n")
        subprocess.run(["bash", str(SAMPLER), "stop", str(pidfile)], check=True, timeout=10)
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()


def test_interval_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(sweep_counters.ENV, raising=False)
    assert sweep_counters.interval_ms() == 50
    for raw, want in (("0", 0), ("5", 10), ("500", 100), ("20", 20), ("x", 50)):
        monkeypatch.setenv(sweep_counters.ENV, raw)
        assert sweep_counters.interval_ms() == want


def _counters_text(t0: float, fault: tuple[float, float], others_during: float = 0.4) -> str:
    """4 NICs at 0.3 Gbit/s; nic1 silent during the fault, the others at `others_during`."""
    lines = [
        "# r2bench counters v1 host=n interval_ms=50",
        "time\tnic\tsource\ttx_bytes\trx_bytes\tstate",
    ]
    totals = dict.fromkeys(("nic0", "nic1", "nic2", "nic3"), 0.0)
    for k in range(100):
        t = t0 + k * 0.05
        down = fault[0] <= t < fault[1]
        for nic in totals:
            rate = (0.0 if nic == "nic1" else others_during) if down else 0.3
            totals[nic] += rate * 1e9 / 8 * 0.05
            state = "down" if down and nic == "nic1" else "up"
            lines.append(f"{t:.6f}\t{nic}\tnet\t{int(totals[nic])}\t0\t{state}")
    return "\n".join(lines) + "\n"


def _nic_sweep(
    tmp_path: Path, others_during: float = 0.4, modes: tuple[str, ...] = ("2",)
) -> tuple[RunStore, str]:
    """A faulted sample sweep (one run per mode) with counters on node1 in every run; nic1
    fails for 1 s. Returns the store and the first run's id."""
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from sample_sweep import SampleConfig, write_sample_sweep

    store = write_sample_sweep(
        tmp_path, Path(__file__).parent / "data/nccl-tests",
        SampleConfig(modes=modes, scenarios=("nic_down",), repeats=1, sizes=6, iterations=4),
    )  # fmt: skip
    records = sorted(store.records(), key=lambda r: r.run_id)
    for record in records:
        inject = next(f for f in record.faults if f.action == "inject")
        fault = (inject.time, inject.time + 1.0)
        node_dir = record.path / "node" / "node1"
        node_dir.mkdir(parents=True)
        text = _counters_text(inject.time - 2.0, fault, others_during)
        (node_dir / "counters.tsv").write_text(text)
        # The fault names the NIC as the counters do (the testbed's NIC name).
        faults = [
            f.model_copy(update={"nic": "nic1"}) for f in record.faults if f.action != "revert"
        ]
        faults.append(
            FaultEvent(action="revert", time=fault[1], fault=0, kind="ib_port_down", node="node1",
                       nic="nic1", tag=inject.tag)
        )  # fmt: skip
        (record.path / "faults.jsonl").write_text(
            "".join(f.model_dump_json() + "\n" for f in faults)
        )
    return store, records[0].run_id


def test_counters_table_and_nic_figure(tmp_path: Path) -> None:
    store, run_id = _nic_sweep(tmp_path)
    tables = build_tables(store.sweep_dir)
    c = tables.counters
    assert set(c.columns) >= {"run_id", "node", "nic", "time", "tx_gbit_s", "state"}
    assert len(c) == 400 and set(c["node"]) == {"node1"}
    figures = nic_figures(tables)
    assert len(figures) == 1
    spec = figures[0].spec
    assert len(spec["data"]) == 4 and len(spec["layout"]["shapes"]) == 1
    windows = run_windows(tables, run_id, 0.0)
    means = phase_means(c, windows[0]).set_index("nic")
    assert means.loc["nic1", "during"] == pytest.approx(0.0, abs=0.01)
    assert means.loc["nic0", "during"] == pytest.approx(0.4, rel=0.05)
    assert means.loc["nic1", "before"] == pytest.approx(0.3, rel=0.05)
    assert "node1/nic1" in figures[0].caption
    out = tmp_path / "report.html"
    build_report(store.sweep_dir, tables, out)
    assert "Traffic per NIC around faults" in out.read_text()
    drawn = draw_nic_traffic(tables)
    assert drawn.claim.verdict == "holds", drawn.claim.numbers
    assert any("node1/nic1: 0.300 -> 0.000 Gbit/s" in n for n in drawn.claim.numbers)
    assert any("+0.300 Gbit/s together" in n for n in drawn.claim.numbers)


@pytest.mark.parametrize(
    ("others_during", "verdict"),
    [
        # Capped NICs and a failover stall inside the window: each survivor carries a bit less
        # than before on average, yet all the traffic now crosses them (the quickstart's shape).
        (0.25, "holds"),
        # The job died with the NIC: everything went quiet, nothing was carried on.
        (0.01, "does not hold"),
    ],
)
def test_nic_claim_is_about_traffic_carried_on(
    tmp_path: Path, others_during: float, verdict: str
) -> None:
    store, _ = _nic_sweep(tmp_path, others_during)
    drawn = draw_nic_traffic(build_tables(store.sweep_dir))
    assert drawn.claim.verdict == verdict, drawn.claim.numbers
    assert any("share of node1's tx" in n for n in drawn.claim.numbers), drawn.claim.numbers


def test_runs_without_counters_have_an_empty_table(tmp_path: Path) -> None:
    store = RunStore(tmp_path, "empty")
    store.sweep_dir.mkdir(parents=True)
    tables = build_tables(store.sweep_dir)
    assert isinstance(tables.counters, pd.DataFrame) and tables.counters.empty
    assert nic_figures(tables) == []


def test_nic_figure_draws_a_run_that_survived(tmp_path: Path) -> None:
    """A crashed mode 0 run comes first in the runs table; the figure draws the mode 2 run."""
    store, _ = _nic_sweep(tmp_path, modes=("0", "2"))
    tables = build_tables(store.sweep_dir)
    assert list(tables.runs.sort_values("run_id")["outcome"]) == ["crashed", "ok"]
    drawn = draw_nic_traffic(tables)
    survivor = tables.runs[tables.runs["outcome"] == "ok"]["run_id"].iloc[0]
    assert any(f"(run {survivor})" in n for n in drawn.claim.numbers), drawn.claim.numbers
