"""A training run judged from its folder, and R-2CCL's artifact checks (test 09) against its
baseline: bit identity fault free, and under a real NIC cut the update it hit, the loss up to
it, the drift after it and the step times.

The folders are real run folders of results/examples/gpu-netns-link-fault (spec, fault events,
NIC counters showing node1's nic3 cut) with a training log written in place of their output
(tests/support/training_runs.py).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from r2bench.analysis.decision import JobFacts
from r2bench.analysis.evidence import Verdict
from r2bench.analysis.parsedrun import ParsedRun, iteration_windows, parse_run
from r2bench.analysis.training import (
    TrainingRun,
    baseline_for,
    check,
    check_all,
    identical,
)
from r2bench.parse.models import OutcomeStatus
from r2bench.runfolder import runmodel
from r2bench.tables.training import summary, training_runs
from tests.support.training_runs import (
    OPTIONS,
    STEP_S,
    TOKENS,
    TrainingText,
    around_the_fault,
    base_loss,
    training_folder,
)

HIT_UPDATE = 37


def _parse(run_dir: Path, job: JobFacts | None = None) -> ParsedRun:
    return parse_run(runmodel.load_run(run_dir), job=job)


def _run(parsed: ParsedRun) -> TrainingRun:
    """The run as the tables hand it to the checks (through its kept summary)."""
    about = summary(parsed)
    assert about is not None
    from r2bench.tables.rows import RunRows

    rows = RunRows(parsed.record.path.parent)
    rows.add(parsed)
    (run,) = training_runs(rows.training.data, rows.training_runs)
    return run


@pytest.fixture
def baseline(tmp_path: Path) -> ParsedRun:
    return _parse(training_folder(tmp_path, "base", TrainingText(), library="nccl"))


# --------------------------------------------------------------------------- the outcome


def test_a_complete_training_run_is_ok_with_its_updates(baseline: ParsedRun) -> None:
    assert baseline.outcome is not None and baseline.outcome.status is OutcomeStatus.OK
    assert baseline.outcome.reason.startswith("100 of 100 updates, to the end of training")
    assert "final loss" in baseline.outcome.reason
    assert baseline.training is not None and len(baseline.training.updates) == 100


def test_the_sweeps_decision_with_the_exit_code(tmp_path: Path) -> None:
    run_dir = training_folder(tmp_path, "r", TrainingText(), complete=False)
    run = _parse(run_dir, JobFacts(ended_at=1795614010.0, exit_code=0))
    assert run.outcome is not None and run.outcome.status is OutcomeStatus.OK
    assert run.outcome.reason.startswith("100 of 100 updates, to the end of training")


def test_a_log_cut_short_without_failure_is_incomplete(tmp_path: Path) -> None:
    run_dir = training_folder(tmp_path, "r", TrainingText(logged=40), complete=False)
    run = _parse(run_dir, JobFacts(ended_at=1795614010.0, exit_code=0))
    assert run.outcome is not None and run.outcome.status is OutcomeStatus.INCOMPLETE
    assert "ends after update 40 (40 of 100 updates)" in run.outcome.reason


def test_a_called_stub_fails_the_run_naming_the_function(tmp_path: Path) -> None:
    stderr = (
        "[1,1]<stderr>:r2bench-nccl-stub: ncclCommShrink called: the NCCL under test "
        "(/opt/nccl/lib/libnccl.so.2) lacks it\n"
    )
    text = TrainingText(workload="train_torch")
    run = _parse(training_folder(tmp_path, "r", text, stderr=stderr))
    assert run.outcome is not None and run.outcome.status is OutcomeStatus.CRASHED
    assert run.outcome.reason == "the NCCL under test lacks ncclCommShrink; PyTorch called it"


def test_ranks_whose_parameters_differ_are_wrong_results(tmp_path: Path) -> None:
    run = _parse(training_folder(tmp_path, "r", TrainingText(disagree_at=30)))
    assert run.outcome is not None and run.outcome.status is OutcomeStatus.WRONG_RESULTS
    assert run.outcome.reason == "ranks' parameters differ after update 30"


def test_a_job_that_died_under_the_fault_is_crashed(tmp_path: Path) -> None:
    """Judged as a collective job is: the launcher's exit code; its reason counts updates."""
    text = around_the_fault(HIT_UPDATE, logged=HIT_UPDATE - 1)
    run_dir = training_folder(tmp_path, "r", text, faulted=True, complete=False)
    run = _parse(run_dir, JobFacts(ended_at=1795614149.45, exit_code=1))
    assert run.outcome is not None and run.outcome.status is OutcomeStatus.CRASHED
    assert run.outcome.reason == "launcher exited with code 1 after 36 training update(s)"
    (ev,) = run.evidence
    assert ev.verdict is Verdict.HIT and ev.iteration is None
    assert "in iteration 37, which never completed" in ev.line
    assert run.training_hit is not None and run.training_hit.update == HIT_UPDATE


# --------------------------------------------------------------------------- the fault's update


def test_the_evidence_names_the_update_the_cut_hit(tmp_path: Path) -> None:
    text = around_the_fault(HIT_UPDATE, step_s={HIT_UPDATE: 1.4})
    run = _parse(training_folder(tmp_path, "r", text, faulted=True))
    (ev,) = run.evidence
    assert ev.verdict is Verdict.HIT
    assert ev.iteration is not None and ev.iteration.number == HIT_UPDATE and ev.iteration.exact
    assert "hit live traffic during iteration 37 " in ev.line
    hit = run.training_hit
    assert hit is not None and hit.update == HIT_UPDATE and hit.in_flight
    assert hit.sentence() == "node1/nic3 link_down hit update 37 (running when it was applied)"
    windows = iteration_windows(run)
    assert len(windows) == 100 and windows[0].number == 1 and windows[-1].number == 100
    assert run.outcome is not None and run.outcome.status is OutcomeStatus.OK


def test_a_fault_between_updates_hits_the_next(tmp_path: Path) -> None:
    """Update 36 ended 0.02 s before the cut, update 37 started 0.03 s after it."""
    text = around_the_fault(HIT_UPDATE, idle_before={HIT_UPDATE: 0.05})
    run = _parse(training_folder(tmp_path, "gap", text, faulted=True))
    (ev,) = run.evidence
    assert ev.verdict is Verdict.BETWEEN and ev.iteration is None
    assert "0.020 s after iteration 36 ended, 0.030 s before iteration 37" in ev.line
    hit = run.training_hit
    assert hit is not None and hit.update == HIT_UPDATE and not hit.in_flight
    assert hit.sentence().endswith("hit update 37 (the first after it)")


# --------------------------------------------------------------------------- the checks


def test_an_identical_run_is_bit_identical(tmp_path: Path, baseline: ParsedRun) -> None:
    run = _parse(training_folder(tmp_path, "same", TrainingText()))
    runs = [_run(baseline), _run(run)]
    assert baseline_for(runs[1], runs) is runs[0]
    assert baseline_for(runs[0], runs) is None  # never itself
    checked = check(runs[1], runs[0])
    assert checked.identity is not None and checked.identity.identical
    assert checked.identity.compared == 100 and checked.identity.digests == 10
    assert checked.sentence.startswith("against base (nccl, fault free); bit-identical at every")
    assert "(100: loss and grad norm, 10 parameter digest(s)) and the eval loss" in checked.sentence
    assert checked.speed.overhead_pct == 0.0
    assert checked.speed.tokens_per_s == pytest.approx(TOKENS / STEP_S, rel=1e-5)  # times: µs
    assert checked.row()["identical"] is True and checked.row()["first_difference"] is None
    assert check_all(runs)[0].sentence.startswith("the baseline run")


def test_one_bit_of_one_loss_is_found_and_named(tmp_path: Path, baseline: ParsedRun) -> None:
    run = _parse(training_folder(tmp_path, "bit", TrainingText(loss_bits={57: 1})))
    base = _run(baseline)
    result = check(_run(run), base)
    ident = result.identity
    assert ident is not None and not ident.identical
    assert ident.first_update == 57 and ident.compared == 56
    a = base_loss(57)
    assert ident.first == f"loss at update 57 differs: {math.nextafter(a, math.inf)!r} vs {a!r}"
    assert result.row()["first_difference_update"] == 57


def test_a_missing_update_and_an_eval_loss_are_differences(baseline: ParsedRun) -> None:
    base = _run(baseline).log
    short = TrainingText(logged=90).lines()
    from r2bench.parse.training import parse_training

    log = parse_training("\n".join(short))
    assert log is not None
    result = identical(log, base)
    assert (
        result.first_update == 91
        and result.first == "update 91 missing (this run logged 90 update(s))"
    )
    other = parse_training("\n".join(TrainingText(eval_delta=1e-9).lines()))
    assert other is not None
    result = identical(other, base)
    assert result.first_update is None and result.first is not None
    assert result.first.startswith("eval loss differs: 2.500000001 vs 2.5")


def test_options_repeat_and_faults_choose_the_baseline(tmp_path: Path, baseline: ParsedRun) -> None:
    other_seed = {**OPTIONS, "seed": 7}
    runs = [
        _run(_parse(training_folder(tmp_path, "seed7", TrainingText(), options=other_seed))),
        _run(_parse(training_folder(tmp_path, "r1", TrainingText(), repeat=1))),
        _run(
            _parse(training_folder(tmp_path, "nccl-r1", TrainingText(), library="nccl", repeat=1))
        ),
        _run(baseline),
    ]
    assert baseline_for(runs[0], runs) is None  # no nccl run with seed 7
    assert baseline_for(runs[1], runs) is runs[2]  # the same repeat
    assert "no fault-free nccl run" in check_all(runs)[0].sentence


def test_the_faults_cost_against_the_baseline(tmp_path: Path, baseline: ParsedRun) -> None:
    """The artifact's numbers: hit update 37 took 1.4 s against 0.05 s, the loss identical up
    to update 36, off by at most 1e-3 after it, final loss +1e-3, eval perplexity +0.02 %."""
    after = {n: 1e-3 * (n - HIT_UPDATE) / (100 - HIT_UPDATE) for n in range(HIT_UPDATE + 1, 101)}
    text = around_the_fault(
        HIT_UPDATE, step_s={HIT_UPDATE: 1.4, **{n: 0.06 for n in range(38, 101)}},
        loss_delta=after, final_delta=1e-3, eval_delta=2e-4,
    )  # fmt: skip
    run = _run(_parse(training_folder(tmp_path, "cut", text, faulted=True)))
    base = _run(baseline)
    assert baseline_for(run, [base, run]) is base
    result = check(run, base)
    fault = result.fault
    assert fault is not None and fault.hit.update == HIT_UPDATE
    assert fault.hit_step_s == 1.4 and fault.step_s_median_before == STEP_S
    assert fault.equal_before is not None and fault.equal_before.identical
    assert fault.equal_before.compared == HIT_UPDATE - 1
    worst = max(abs(base_loss(n) + d - base_loss(n)) for n, d in after.items())
    assert fault.max_abs_dloss_after == worst and worst == pytest.approx(1e-3)
    assert fault.final_loss_delta == pytest.approx(1e-3, rel=1e-9)
    assert fault.eval_ppl_delta_pct == pytest.approx(math.expm1(2e-4) * 100, rel=1e-9)
    assert result.speed.step_s_median == 0.06
    assert result.speed.overhead_pct == pytest.approx(20.0)
    tokens = TOKENS * 100
    span = 36 * STEP_S + 1.4 + 63 * 0.06
    assert result.speed.tokens_per_s == pytest.approx(tokens / span, rel=1e-6)
    row = result.row()
    assert row["identical"] is True and row["hit_update"] == 37 and row["hit_step_s"] == 1.4
    assert (
        "node1/nic3 link_down hit update 37 (running when it was applied); "
        "bit-identical to the baseline up to update 36; "
        "update 37 took 1.4 s against a median of 0.05 s before it; "
        "after it the loss differs from the baseline's by at most 0.001; "
        "final loss +0.001; eval perplexity +0.02 %"
    ) in result.sentence
    assert "median step 0.06 s, +20 % against the baseline's 0.05 s" in result.sentence


def test_a_loss_that_differs_before_the_fault_is_named(tmp_path: Path, baseline: ParsedRun) -> None:
    text = around_the_fault(HIT_UPDATE, loss_bits={12: 2})
    run = _run(_parse(training_folder(tmp_path, "early", text, faulted=True)))
    result = check(run, _run(baseline))
    assert result.identity is not None and not result.identity.identical
    assert result.identity.first_update == 12
    assert "before it, loss at update 12 differs" in result.sentence
