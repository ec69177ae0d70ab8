"""What the tiers of test_store.py share (tests/unit, tests/integration, tests/system)."""

from __future__ import annotations

from r2bench.config.experiment import NcclTestsOptions
from r2bench.parse.models import Outcome, OutcomeStatus
from r2bench.plan.runspec import ComponentRef, RunSpec
from r2bench.runfolder import runmodel


def spec(repeat: int = 0) -> RunSpec:
    return RunSpec(
        experiment="exp",
        testbed="tb",
        library_label="r2ccl",
        library=ComponentRef(recipe="r2ccl", ref="main"),
        benchmark=ComponentRef(recipe="nccl-tests", ref="v2.19.6"),
        collective="all_reduce",
        size_begin=8,
        size_end=1024,
        size_factor=2,
        nodes=("node0", "node1"),
        ranks_per_node=1,
        env={"R2CC_MODE": "1"},
        scenario="none",
        faults=(),
        options=NcclTestsOptions(),
        deadline_s=60.0,
        repeat=repeat,
    )


def ok_end() -> runmodel.RunEnd:
    return runmodel.RunEnd(
        outcome=Outcome(status=OutcomeStatus.OK, reason="fine"),
        exit_code=0,
        started_at=10.0,
        ended_at=12.5,
    )
