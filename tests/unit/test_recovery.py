"""Recovery metrics (analysis/recovery.py), the report's recovery section and the RAS observer."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from r2bench.analysis import recovery as rc
from r2bench.parse.ras import ras_verdict
from r2bench.report.recovery import recovery_section, recovery_table, run_metrics
from r2bench.sweep.observers import ras_start_command
from r2bench.tables.build import build_tables
from tests.support import paths

SWEEP = paths.DATA / "sweeps" / "quickstart"
M0 = SWEEP / "all_reduce-emulated-m0-nic1-down-r0-c067cbf7ca"
M1 = SWEEP / "all_reduce-emulated-m1-nic1-down-r0-3c89a48a2d"
M2 = SWEEP / "all_reduce-emulated-m2-nic1-down-r0-6622e625dd"
NONE = SWEEP / "all_reduce-emulated-m2-none-r0-1e98aa428b"


def _copy(src: Path, tmp: Path) -> Path:
    return Path(shutil.copytree(src, tmp / src.name))


@pytest.mark.parametrize("run", [M1, M2])
def test_detect_matches_failover_timeout(run: Path) -> None:
    rec = rc.run_recovery(run)
    detect = rec.metrics["detect_s"]
    assert detect.value is not None
    assert abs(detect.value - 0.5) < 0.15  # NCCL_R2CC_FAILOVER_TIMEOUT_MS=500
    assert "own stamp" in detect.basis and "1e-06" in detect.basis
    assert rec.reaction is not None and "stalled" in rec.reaction.text


def test_surviving_run_has_every_metric_or_a_reason() -> None:
    cols = rc.run_recovery(M1).columns()
    assert cols["stall_s"] > 0.5
    assert cols["recover_s"] >= cols["detect_s"]
    # nccl-tests' -c (which the emulator's text mimics) checks no collective the fault hit.
    assert cols["lossless"] is None
    assert (
        "not checked" in cols["lossless_reason"] and "timed iterations" in cols["lossless_reason"]
    )
    assert cols["fault_node"] == "node1" and cols["fault_nic"] == "nic1"
    for name in rc.METRICS:
        assert cols[name] is not None or cols[f"{name}_reason"]


def test_crash_during_the_fault() -> None:
    cols = rc.run_recovery(M0).columns()
    assert cols["detect_s"] == pytest.approx(0.5, abs=0.15)  # the WARN before the crash
    for name in ("stall_s", "recover_s", "degraded_ratio", "failback_ratio"):
        assert cols[name] is None
        assert cols[f"{name}_reason"] == "crashed"
    assert cols["lossless"] is None and "crashed" in cols["lossless_reason"]


def test_fault_free_run_is_undefined_not_zero() -> None:
    cols = rc.run_recovery(NONE).columns()
    for name in rc.METRICS[:-1]:
        assert cols[name] is None and cols[f"{name}_reason"] == "no fault injected"
    assert cols["lossless"] is True


def test_thin_baseline_is_a_reason_and_the_sweep_fills_it(tmp_path: Path) -> None:
    cols = rc.run_recovery(M2).columns()
    assert cols["degraded_ratio"] is None
    assert "too few measurements" in cols["degraded_ratio_reason"]
    sweep = tmp_path / "qs"
    shutil.copytree(SWEEP, sweep)
    frame = build_tables(sweep).runs.set_index("run_id")
    ratio = frame.loc[M2.name, "degraded_ratio"]
    assert 0.5 < ratio < 1.0
    assert "fault-free runs" in frame.loc[M2.name, "degraded_ratio_basis"]


def test_no_per_iteration_times(tmp_path: Path) -> None:
    run = _copy(M1, tmp_path)
    (run / "result.json").unlink()
    cols = rc.run_recovery(run).columns()
    assert "per result row" in cols["stall_s_basis"]
    assert cols["stall_s"] is not None and cols["stall_s"] > 1.0
    assert cols["detect_s"] == pytest.approx(0.5, abs=0.15)


def test_fault_before_the_first_result(tmp_path: Path) -> None:
    run = _copy(M1, tmp_path)
    first_row = float((run / "stdout.times").read_text().split()[13])  # the 1 MiB row
    lines = []
    for line in (run / "faults.jsonl").read_text().splitlines():
        doc = json.loads(line)
        if doc["action"] == "inject":
            doc["applied_at"] = doc["time"] = first_row - 1.0
        lines.append(json.dumps(doc))
    (run / "faults.jsonl").write_text("\n".join(lines) + "\n")
    cols = rc.run_recovery(run).columns()
    assert cols["stall_s"] is None
    assert "fault before the first result" in cols["stall_s_reason"]
    assert cols["degraded_ratio"] is None and cols["degraded_ratio_reason"]


def test_no_reaction_logged(tmp_path: Path) -> None:
    run = _copy(M1, tmp_path)
    kept = [x for x in (run / "stderr.txt").read_text().splitlines() if "OOB: Socket" in x]
    (run / "stderr.txt").write_text("\n".join(kept) + "\n")
    (run / "stderr.times").write_text("\n".join(["1795404802.3"] * len(kept)) + "\n")
    cols = rc.run_recovery(run).columns()
    assert cols["detect_s"] is None
    assert cols["detect_s_reason"].startswith("no reaction logged")


def test_untimed_reaction_lines(tmp_path: Path) -> None:
    run = _copy(M1, tmp_path)
    text = (run / "stderr.txt").read_text()
    (run / "stderr.txt").write_text("\n".join(x.split("] ", 1)[-1] for x in text.splitlines()))
    (run / "stderr.times").unlink()
    cols = rc.run_recovery(run).columns()
    assert cols["detect_s"] is None and "carry no time" in cols["detect_s_reason"]


def test_runs_table_and_report(tmp_path: Path) -> None:
    sweep = tmp_path / "qs"
    shutil.copytree(SWEEP, sweep)
    tables = build_tables(sweep)
    assert {"detect_s", "detect_s_reason", "detect_s_basis", "lossless"} <= set(tables.runs)
    metrics = run_metrics(tables)
    assert len(metrics) == 3
    table = recovery_table(metrics)
    assert set(table["mode"]) == {"0", "1", "2"}
    html = recovery_section(tables)
    assert "recovery-distributions" in html and "crashed" in html


def test_parse_json_carries_the_run_folders_metrics() -> None:
    doc = rc.recovery_doc(M1 / "stdout.txt")
    assert doc["detect_s"] == pytest.approx(0.5, abs=0.15)
    assert "undefined" in rc.recovery_doc(Path(__file__))


# NCCL RAS: written from NCCL's documentation (RAS JSON output, `-m` live monitoring); no
# real capture exists here (no NCCL RAS on the development machines).
RAS_OK = """{"nccl_version": "2.30.3", "timestamp": "2026-11-23T03:33:22Z",
 "communicators": [{"hash": "0x1", "ranks": [{"rank": 0, "host": "node0", "status": "RUNNING",
  "async_error": "ncclSuccess"}, {"rank": 1, "host": "node1", "status": "RUNNING",
  "async_error": "ncclSuccess"}]}], "errors": [], "warnings": []}
"""
RAS_BAD = (
    RAS_OK
    + """{"timestamp": "2026-11-23T03:33:40Z", "communicators": [{"hash": "0x1", "ranks": [
 {"rank": 1, "host": "node1", "status": "RUNNING", "async_error": "ncclRemoteError"}]}],
 "errors": [], "warnings": []}
connection to localhost:28028 closed
"""
)


def test_ras_verdicts() -> None:
    ok = ras_verdict(RAS_OK)
    assert ok.ok is True and ok.reports == 1
    bad = ras_verdict(RAS_BAD)
    assert bad.ok is False and "ncclRemoteError" in (bad.first_problem or "")
    assert bad.first_problem_at == pytest.approx(1795404820.0)
    none = ras_verdict("ncclras: cannot connect to localhost:28028\n")
    assert none.ok is None and "cannot connect" in none.summary


def test_ras_start_command_is_tagged_and_optional() -> None:
    cmd = ras_start_command("run-1", "/w/runs/run-1", "node0", 60)
    assert cmd.startswith("command -v ncclras >/dev/null 2>&1 || exit 0;")
    assert "R2B_RUN=run-1 nohup timeout 65" in cmd and "ncclras -m -f json" in cmd


def test_incomplete_run_keeps_the_fault_it_was_dealt(tmp_path: Path) -> None:
    """A run cut short (no COMPLETE marker) after its fault was applied and reverted: the runs
    table still says which NIC went down, when, and for how long (only its metrics are
    undefined), as the tables said before the run's model was split."""
    run = _copy(M0, tmp_path / "sweep")
    (run / "COMPLETE").unlink()
    row = build_tables(tmp_path / "sweep").runs.iloc[0]
    assert (row["fault_node"], row["fault_nic"]) == ("node1", "nic1")
    assert row["fault_cycles"] == 1
    assert row["fault_applied_at"] < row["fault_back_at"]
    assert row["detect_s_reason"] == "incomplete run (no COMPLETE marker)"
