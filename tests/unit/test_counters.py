"""NIC counters: the node-side sampler (on a fake sysfs), the `counters` table, the NIC figure.

This module holds its pure tests; the same subject's other tests:
tests/integration/test_counters.py (those with real processes).
"""

from __future__ import annotations

from pathlib import Path

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
from tests.support import paths
from tests.support.sample_sweep import SampleConfig, write_sample_sweep


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
    store = write_sample_sweep(
        tmp_path, paths.DATA / "nccl-tests",
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


def test_interval_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(sweep_counters.ENV, raising=False)
    assert sweep_counters.interval_ms() == 50
    for raw, want in (("0", 0), ("5", 10), ("500", 100), ("20", 20), ("x", 50)):
        monkeypatch.setenv(sweep_counters.ENV, raw)
        assert sweep_counters.interval_ms() == want


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
