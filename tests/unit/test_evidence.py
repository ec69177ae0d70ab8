"""Failure evidence: a fault counts only where the counters show it hit live traffic.

Captured data: results/examples/gpu-netns-link-fault (a real sweep on a lent H100: 2 namespace
nodes x 4 veth NICs at 4 Gbit/s, node1's nic3 taken down mid-run; its README says how it was
made). Variants of its runs are made here by rewriting the node's counters the way a masked
NIC (R2CC_MODE 2 masks the last NIC: 0 bytes the whole run) or an uncut one (IPoIB taken down
while RDMA traffic flows on) shows in them.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from r2bench.analysis.decision import JobFacts
from r2bench.analysis.evidence import IDLE_BYTES, Verdict
from r2bench.analysis.metrics import lossless
from r2bench.analysis.parsedrun import parse_run
from r2bench.analysis.recovery import run_recovery
from r2bench.parse.models import Outcome, OutcomeStatus
from r2bench.parse.nictraffic import parse_counter_line, read_series
from r2bench.runfolder import runmodel
from tests.support import paths

SWEEP = paths.REPO / "results" / "examples" / "gpu-netns-link-fault"
HIT = SWEEP / "all_reduce-stock-nic3-down-3s-r1-8b9875860e"
FOR_GOOD = SWEEP / "all_reduce-stock-nic3-down-r0-de53f56754"
FAULT_FREE = SWEEP / "all_reduce-stock-none-r0-4695f1b7bc"


def _copy(src: Path, tmp_path: Path) -> Path:
    dst = tmp_path / src.name
    shutil.copytree(src, dst)
    return dst


def _rewrite_nic(run_dir: Path, node: str, nic: str, fn) -> None:  # type: ignore[no-untyped-def]
    """Rewrite one NIC's counter lines of a run: fn(time, tx, rx) -> (tx, rx)."""
    path = run_dir / "node" / node / "counters.tsv"
    out = []
    for line in path.read_text().splitlines():
        sample = parse_counter_line(line)
        if sample is not None and sample[1] == nic:
            t, _, source, tx, rx, state = sample
            tx, rx = fn(t, tx, rx)
            line = f"{t:.6f}\t{nic}\t{source}\t{tx:.0f}\t{rx:.0f}\t{state}"
        out.append(line)
    path.write_text("\n".join(out) + "\n")


def _applied(run_dir: Path) -> float:
    inject = next(f for f in runmodel.load_run(run_dir).faults if f.action == "inject")
    assert inject.applied_at is not None
    return inject.applied_at


def test_a_real_cut_is_a_hit_with_its_numbers() -> None:
    run = parse_run(runmodel.load_run(HIT))
    (ev,) = run.evidence
    assert ev.verdict is Verdict.HIT
    assert ev.target == "node1/nic3"
    assert ev.before_bytes is not None and ev.before_bytes > 1e9  # 4 Gbit/s for 2 s, both ways
    assert ev.live_bytes is not None and ev.live_bytes > 1e8
    assert ev.after_bytes is not None and ev.after_bytes < 1e3  # a link down moves nothing
    assert ev.iteration is not None and ev.iteration.size == 64 << 20
    assert ev.line.startswith("node1/nic3 link_down: hit live traffic during iteration ~")
    assert "moved in the 2.0 s before it" in ev.line and "until it came back" in ev.line
    assert run.outcome is not None and run.outcome.status is OutcomeStatus.OK


def test_a_hung_run_cut_for_good_is_still_a_hit() -> None:
    """The collective the cut landed in never completed: no sample spans it, yet the NIC was
    busy up to the cut, and moved 0 bytes after it."""
    (ev,) = parse_run(runmodel.load_run(FOR_GOOD)).evidence
    assert ev.verdict is Verdict.HIT
    assert ev.after_bytes is not None and ev.after_bytes < 1e3 and ev.after_s > 10


def test_a_fault_on_an_idle_nic_is_without_effect(tmp_path: Path) -> None:
    """R2CC_MODE 2 masks the last NIC from the start: its counters never move. The run is ok,
    but it measured no fault: fault_without_effect, with the byte counts."""
    run_dir = _copy(HIT, tmp_path)
    frozen: dict[str, float] = {}
    _rewrite_nic(
        run_dir,
        "node1",
        "nic3",
        lambda t, tx, rx: (frozen.setdefault("tx", tx), frozen.setdefault("rx", rx)),
    )
    run = parse_run(runmodel.load_run(run_dir))
    (ev,) = run.evidence
    assert ev.verdict is Verdict.NO_TRAFFIC and ev.before_bytes == 0
    assert run.outcome is not None
    assert run.outcome.status is OutcomeStatus.FAULT_WITHOUT_EFFECT
    assert (
        "touched no traffic" in run.outcome.reason
        and "0 B moved in the 2.0 s" in run.outcome.reason
    )
    assert any(e.source == "counters" for e in run.outcome.evidence)
    # Nothing to recover from: no recovery metric claims a value.
    cols = run_recovery(run_dir).columns()
    assert cols["stall_s"] is None and "touched no traffic" in cols["stall_s_reason"]


def test_a_fault_that_did_not_cut_is_without_effect(tmp_path: Path) -> None:
    """Traffic going on after a link_down at the rate before it (an IB port whose IPoIB
    interface was taken down keeps its RDMA traffic): not cut."""
    run_dir = _copy(HIT, tmp_path)
    applied = _applied(run_dir)
    rate = 3e8  # bytes/s each way, as before the fault
    _rewrite_nic(
        run_dir,
        "node1",
        "nic3",
        lambda t, tx, rx: (rate * (t - applied + 100), rate * (t - applied + 100)),
    )
    run = parse_run(runmodel.load_run(run_dir))
    (ev,) = run.evidence
    assert ev.verdict is Verdict.NOT_CUT
    assert "went on at" in ev.line
    assert run.outcome is not None and run.outcome.status is OutcomeStatus.FAULT_WITHOUT_EFFECT


def test_a_late_sample_does_not_carry_bytes_from_before_the_fault(tmp_path: Path) -> None:
    """A busy sampler skipped the samples from 0.09 s before the cut to 0.4 s after it: the
    bytes of that interval all moved before the cut, and none counts as traffic after it (an
    interpolation would put ~20 MB there, and on a short blip judge the cut as not cut)."""
    run_dir = _copy(HIT, tmp_path)
    applied = _applied(run_dir)
    path = run_dir / "node" / "node1" / "counters.tsv"
    kept = []
    for line in path.read_text().splitlines():
        sample = parse_counter_line(line)
        late = sample is not None and sample[1] == "nic3" and -0.09 < sample[0] - applied < 0.4
        if not late:
            kept.append(line)
    path.write_text("\n".join(kept) + "\n")
    (ev,) = parse_run(runmodel.load_run(run_dir)).evidence
    assert ev.verdict is Verdict.HIT
    assert ev.after_bytes is not None and ev.after_bytes < 1e3, ev.line
    assert ev.after_s > 2 and "until it came back" in ev.line


def test_no_counters_is_unknown_and_changes_nothing(tmp_path: Path) -> None:
    run_dir = _copy(HIT, tmp_path)
    for path in run_dir.glob("node/*/counters.tsv"):
        path.unlink()
    run = parse_run(runmodel.load_run(run_dir))
    (ev,) = run.evidence
    assert ev.verdict is Verdict.UNKNOWN and "no counter samples" in ev.line
    assert run.outcome is not None and run.outcome.status is OutcomeStatus.OK


def test_a_counter_reset_is_never_a_delta(tmp_path: Path) -> None:
    path = tmp_path / "node" / "n0" / "counters.tsv"
    path.parent.mkdir(parents=True)
    path.write_text(
        "time\tnic\tsource\ttx_bytes\trx_bytes\tstate\n"
        "10.0\tnic0\tnet\t1000\t1000\tup\n"
        "11.0\tnic0\tnet\t5000000\t5000000\tup\n"
        "12.0\tnic0\tnet\t10\t10\tup\n"  # reset
        "13.0\tnic0\tnet\t20\t20\tup\n"
    )
    series = read_series([path], lambda node: 0.0)[("n0", "nic0")]
    assert series.bytes_between(10.0, 11.0) == pytest.approx(2 * 4999000)
    assert series.bytes_between(10.5, 12.5) is None  # spans the reset
    assert series.bytes_between(12.0, 13.0) == 20


def _as_the_sweep_decides(run_dir: Path) -> Outcome:
    """The outcome the sweep records for a run it just finished: the folder without its
    outcome.json and COMPLETE, parsed with what the sweep saw of the job."""
    record = runmodel.load_run(run_dir)
    assert record.end is not None
    (run_dir / "outcome.json").unlink()
    (run_dir / "COMPLETE").unlink()
    facts = JobFacts(ended_at=record.end.ended_at or 0.0, exit_code=record.end.exit_code)
    outcome = parse_run(runmodel.load_run(run_dir), job=facts).outcome
    assert outcome is not None
    return outcome


def test_the_sweep_records_the_same_outcome(tmp_path: Path) -> None:
    """What the sweep decides from the counters it collected agrees with what the records
    decide from the folder later (one `decide`, reached through `parse_run` by both)."""
    run_dir = _copy(HIT, tmp_path)
    _rewrite_nic(run_dir, "node1", "nic3", lambda t, tx, rx: (7.0, 7.0))
    outcome = _as_the_sweep_decides(run_dir)
    assert outcome.status is OutcomeStatus.FAULT_WITHOUT_EFFECT
    (run_dir / "COMPLETE").write_text("")
    again = parse_run(runmodel.load_run(run_dir)).outcome  # complete, no outcome.json
    assert again is not None and again.status is outcome.status
    prefix = "the fault touched no traffic: node1/nic3 link_down: touched no traffic"
    assert outcome.reason.startswith(prefix) and again.reason.startswith(prefix)
    assert "14 B moved in the 2.0 s before it" not in outcome.reason  # a flat counter moves 0
    assert "0 B moved in the 2.0 s before it" in outcome.reason


def test_lossless_is_unknown_for_nccl_tests_under_a_fault() -> None:
    """nccl-tests -c checks one extra collective per size, outside the timed iterations: the
    collectives a fault lands in are never checked, so `lossless` cannot be true."""
    faulted = run_recovery(HIT).columns()
    assert faulted["lossless"] is None
    assert "outside the timed iterations" in faulted["lossless_reason"]
    clean = run_recovery(FAULT_FREE).columns()
    assert clean["lossless"] is True
    assert "outside the timed iterations" in clean["lossless_basis"]


def test_lossless_rests_on_the_verification_when_there_is_one() -> None:
    from r2bench.analysis.metrics import Inputs
    from r2bench.parse.verify import Verification

    def checked(**kw: object) -> Verification:
        base = dict(program="r2b_verify", ranks=2, iterations=20, elements=1 << 24, wrong=0,
                    wrong_iterations=(), complete=True, samples=())  # fmt: skip
        return Verification(**{**base, **kw})  # type: ignore[arg-type]

    run = parse_run(runmodel.load_run(HIT))
    run.verification = checked()
    ok = lossless(Inputs(run, "ok", run.windows))
    assert ok.value is True and "every element of every iteration on every rank" in ok.basis
    run.verification = checked(wrong=1, wrong_iterations=(3,))
    bad = lossless(Inputs(run, "wrong_results", run.windows))
    assert bad.value is False and "iterations 3" in bad.basis
    run.verification = checked(iterations=7, complete=False)
    cut = lossless(Inputs(run, "timeout", run.windows))
    assert cut.value is None and "7 iterations checked" in cut.reason
    run.verification = checked(checked=False)  # -c 0: the workload verified nothing
    off = lossless(Inputs(run, "ok", run.windows))
    assert off.value is None


def test_tables_and_report_carry_the_evidence(tmp_path: Path) -> None:
    pytest.importorskip("pandas")
    from r2bench.report.html import build_report
    from r2bench.tables.build import build_tables

    sweep = tmp_path / "sweep"
    sweep.mkdir()
    for run in (HIT, FAULT_FREE):
        shutil.copytree(run, sweep / run.name)
    tables = build_tables(sweep)
    windows = tables.windows
    assert list(windows["verdict"]) == ["hit"]
    assert windows["before_bytes"].iloc[0] > IDLE_BYTES
    runs = tables.runs.set_index("run_id")
    assert runs.loc[HIT.name, "evidence"].startswith("node1/nic3 link_down: hit live traffic")
    traffic = tables.traffic
    assert set(traffic["run_id"]) == {HIT.name}  # the faulted run only
    # Stock NCCL stalls through the 3 s outage: one iteration spans it, and before the fault
    # node1's nic3 carried its share of every iteration.
    applied = float(windows["applied_at"].iloc[0])
    nic3 = traffic[(traffic["node"] == "node1") & (traffic["nic"] == "nic3")]
    stalled = nic3[(nic3["start"] < applied + 0.5) & (nic3["end"] > applied + 2.5)]
    assert len(stalled) == 1
    before = nic3[nic3["end"] < applied - 0.1]
    assert len(before) >= 2 and (before["tx_bytes"] + before["rx_bytes"]).min() > 1e6
    html_path = tmp_path / "report.html"
    build_report(sweep, tables, html_path)
    html = html_path.read_text()
    assert "Failure evidence: did each fault hit live traffic" in html
    assert "node1/nic3 link_down: hit live traffic" in html
    assert "MB moved per NIC (tx+rx) per iteration" in html and "node1/nic3 (faulted)" in html


def test_the_failover_timer_follows_the_r2ccl_revision(tmp_path: Path) -> None:
    """At f45cbcb an unset NCCL_R2CC_FAILOVER_TIMEOUT_MS is derived from the IB retry settings
    (32 s at their defaults); at upstream's main it is 5000 ms."""
    import json

    run_dir = _copy(SWEEP / "all_reduce-r2ccl-m0-nic3-down-3s-r0-a9173da0fa", tmp_path)
    spec_path = run_dir / "spec.json"
    spec = json.loads(spec_path.read_text())
    spec["env"].pop("NCCL_R2CC_FAILOVER_TIMEOUT_MS", None)
    spec_path.write_text(json.dumps(spec))
    pinned = run_recovery(run_dir)
    assert pinned.failover_timeout_from == "derived" and pinned.failover_timeout_ms == 32000
    spec["library"]["ref"] = "main"
    spec_path.write_text(json.dumps(spec))
    newer = run_recovery(run_dir)
    assert newer.failover_timeout_ms == 5000


PROOF = paths.REPO / "results" / "examples" / "gpu-netns-proof"
PROOF_NT = paths.REPO / "results" / "examples" / "gpu-netns-proof-nccl-tests"


def _proof_run(sweep: Path, prefix: str) -> Path:
    (path,) = [p for p in sweep.iterdir() if p.name.startswith(prefix)]
    return path


def test_the_verification_workload_on_a_gpu_under_a_real_cut() -> None:
    """Real runs on 2 H100s (namespace testbed): the workload times every iteration itself, so
    the evidence names the iteration the cut landed in, exactly."""
    stock = parse_run(runmodel.load_run(_proof_run(PROOF, "all_reduce-stock-nic2-down-3s")))
    (ev,) = stock.evidence
    assert ev.verdict is Verdict.HIT and ev.iteration is not None and ev.iteration.exact
    assert ev.iteration.size == 256 << 20
    assert "hit live traffic during iteration 29 (256 MiB)" in ev.line
    assert stock.outcome is not None and stock.outcome.status is OutcomeStatus.OK
    cols = run_recovery(stock.record).columns()
    assert cols["lossless"] is True
    assert "every element of every iteration on every rank" in cols["lossless_basis"]
    # R-2CCL hung in the collective the cut landed in: it never completed, nothing is claimed.
    hung = parse_run(runmodel.load_run(_proof_run(PROOF, "all_reduce-r2ccl-m0-nic2-down-3s")))
    (ev,) = hung.evidence
    assert ev.verdict is Verdict.HIT and "which never completed" in ev.line
    cols = run_recovery(hung.record).columns()
    assert cols["lossless"] is None and "the rest never were" in cols["lossless_reason"]


def test_faults_that_hit_nothing_on_a_gpu_are_without_effect() -> None:
    """The NIC mode 2 masks carried 0 bytes; and a cut that came after the workload's last
    collective hit nothing either: both runs finished 0-wrong, neither counts as survived."""
    masked = parse_run(runmodel.load_run(_proof_run(PROOF, "all_reduce-r2ccl-m2-nic3-down-3s")))
    (ev,) = masked.evidence
    assert ev.verdict is Verdict.NO_TRAFFIC and ev.before_bytes == 0 and ev.live_bytes == 0
    assert masked.outcome is not None
    assert masked.outcome.status is OutcomeStatus.FAULT_WITHOUT_EFFECT
    late = parse_run(runmodel.load_run(_proof_run(PROOF, "all_reduce-vanilla-nic2-down-3s")))
    (ev,) = late.evidence
    assert ev.verdict is Verdict.AFTER_LAST and "until the run ended" in ev.line
    assert late.outcome is not None
    assert late.outcome.status is OutcomeStatus.FAULT_WITHOUT_EFFECT


def test_the_checker_self_test_on_a_gpu_names_the_iteration() -> None:
    corrupted = [
        parse_run(runmodel.load_run(p))
        for p in PROOF.iterdir()
        if p.is_dir() and '"R2B_VERIFY_CORRUPT": "3"' in (p / "spec.json").read_text()
    ]
    assert len(corrupted) == 2  # stock NCCL and R-2CCL mode 0
    for run in corrupted:
        assert run.outcome is not None and run.outcome.status is OutcomeStatus.WRONG_RESULTS
        assert "iteration(s) 3" in run.outcome.reason
        assert run.verification is not None and run.verification.wrong_iterations == (3,)


def test_nccl_tests_under_the_same_cut_claim_no_lossless() -> None:
    run = _proof_run(PROOF_NT, "all_reduce-stock-nic2-down-3s")
    cols = run_recovery(run).columns()
    assert cols["lossless"] is None and "were not checked" in cols["lossless_reason"]
    (ev,) = parse_run(runmodel.load_run(run)).evidence
    assert ev.verdict is Verdict.HIT and ev.iteration is not None and not ev.iteration.exact


def test_the_sweep_sees_a_cut_after_the_last_collective(tmp_path: Path) -> None:
    """What the sweep records from the workload's own iteration times agrees with the records."""
    path = _copy(_proof_run(PROOF, "all_reduce-vanilla-nic2-down-3s"), tmp_path)
    outcome = _as_the_sweep_decides(path)
    assert outcome.status is OutcomeStatus.FAULT_WITHOUT_EFFECT
    assert "applied after the last collective" in outcome.reason


def test_the_collective_a_cut_left_hanging_is_in_the_traffic_table() -> None:
    """R-2CCL hung in the iteration the cut landed in: the table shows it, cut short, with the
    faulted NIC's share up to the cut and the other NICs' going on."""
    run = parse_run(runmodel.load_run(_proof_run(PROOF, "all_reduce-r2ccl-m2-nic2-down-3s")))
    cut = [t for t in run.traffic if not t.completed]
    assert cut and {t.iteration for t in cut} == {26}  # after the 26 completed ones (0-25)
    nic2 = next(t for t in cut if (t.node, t.nic) == ("node1", "nic2"))
    assert nic2.tx_bytes is not None and nic2.rx_bytes is not None
    completed = [t for t in run.traffic if t.completed and (t.node, t.nic) == ("node1", "nic2")]
    assert completed and all(t.iteration < 26 for t in completed)
