"""The runs table's trial columns (analysis/trial.py): verdict, failover armed, pre-told or
blind, detection predicted under both IB models, a degraded run against its lines, and a
campaign trial's draw; on the quickstart sweep as it ran (tests/data/quickstart-sweep)."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.support.paths import DATA

pd = pytest.importorskip("pandas")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory):
    from r2bench.tables.build import build_tables

    sweep = tmp_path_factory.mktemp("sweeps") / "quickstart"
    shutil.copytree(DATA / "quickstart-sweep", sweep, ignore=shutil.ignore_patterns("*.md"))
    campaign = {
        "trial": 1,
        "trials": 3,
        "seed": 7,
        "draws": [{"fault": 0, "after_s": 3.0, "drawn_from": "uniform [0.5, 3.5] s"}],
    }
    spec_path = next(sweep.glob("all_reduce-r2ccl-m0-nic1-down-*")) / "spec.json"
    spec = json.loads(spec_path.read_text())
    spec["campaign"] = campaign  # as a campaign trial records it
    spec_path.write_text(json.dumps(spec))
    table = build_tables(sweep).runs
    return table.set_index(table["library"] + "/" + table["scenario"])


def test_verdicts_and_results_carry_them(runs) -> None:
    assert runs.loc["nccl-emulated/nic1-down", "verdict"] == "DECLINED"
    for mode in (0, 1, 2):
        assert runs.loc[f"r2ccl-m{mode}/nic1-down", "verdict"] == "TRANSPARENT"
    assert set(runs[runs["scenario"] == "none"]["verdict"]) == {"NO_FAULT"}


def test_armed_and_told(runs) -> None:
    r2ccl = runs.loc["r2ccl-m0/nic1-down"]
    assert (r2ccl["failover"], r2ccl["armed"]) == ("r2ccl", "armed")
    assert "backup" in r2ccl["armed_reason"]
    assert runs.loc["nccl-emulated/nic1-down", "armed"] == "not_claimed"
    assert pd.isna(runs.loc["r2ccl-m0/none", "armed"])  # no fault: nothing to arm
    assert set(runs[runs["scenario"] == "nic1-down"]["told"]) == {"blind"}


def test_detection_predicted_beside_measured(runs) -> None:
    stock = runs.loc["nccl-emulated/nic1-down"]
    # NCCL_IB_TIMEOUT=14, RETRY_CNT=3: textbook 0.268 s (the emulator's), ConnectX 1.61 s.
    assert stock["detect_textbook_s"] == pytest.approx(0.268, abs=1e-3)
    assert stock["detect_floor_s"] == pytest.approx(1.611, abs=1e-3)
    assert stock["detect_bound_textbook"] == "retry-bound"
    assert stock["detect_s"] == pytest.approx(stock["detect_textbook_s"], rel=0.1)
    r2ccl = runs.loc["r2ccl-m0/nic1-down"]
    assert r2ccl["detect_textbook_s"] == 0.5 and r2ccl["detect_bound_textbook"] == "timer-bound"
    assert r2ccl["detect_s"] < 0.5 + 0.1


def test_a_degraded_run_against_its_lines(runs) -> None:
    """2 nodes x 4 NICs, one lost: bound = Balance = 4/3; R-2CCL mode 0 goes on as Balance.
    Modes 1 and 2 start degraded (simulated), the crashed run has no after: no lines."""
    m0 = runs.loc["r2ccl-m0/nic1-down"]
    assert m0["lost_share"] == pytest.approx(0.25)
    assert m0["bound_ratio"] == pytest.approx(4 / 3) and m0["balance_ratio"] == pytest.approx(4 / 3)
    assert m0["model_schedule"] == "R2CC-Balance"
    assert m0["bound_efficiency"] == pytest.approx(m0["bound_ratio"] / m0["measured_ratio"])
    for key in ("r2ccl-m1/nic1-down", "r2ccl-m2/nic1-down", "nccl-emulated/nic1-down"):
        assert pd.isna(runs.loc[key, "bound_ratio"])


def test_a_campaign_trial_records_its_draw(runs) -> None:
    m0 = runs.loc["r2ccl-m0/nic1-down"]
    assert (m0["trial"], m0["trials"], m0["seed"], m0["drawn_s"]) == (1, 3, 7, 3.0)
    assert m0["drawn_from"] == "uniform [0.5, 3.5] s"
    assert pd.isna(runs.loc["r2ccl-m1/nic1-down", "trial"])
