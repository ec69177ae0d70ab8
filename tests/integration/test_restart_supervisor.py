"""The sweep's restart supervisor with real processes (no root, no testbed): a restart run's
job that fails by itself is launched again with the same command, its outputs follow one
another in the same files, attempts.jsonl holds each launch and end; a run of another strategy
is launched once."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from r2bench.nodes import LocalNode
from r2bench.plan.model import NodeCommand, PlannedRun
from r2bench.runfolder.attempts import read_attempts
from r2bench.sweep.run import RunExecutor, _Job
from tests.support import paths
from tests.support.cli_runner import invoke_as_main

RECOVERY = paths.REPO / "experiments" / "recovery.yaml"


def _planned(strategy: str) -> PlannedRun:
    ran = invoke_as_main("plan", str(RECOVERY), "--json")
    assert ran.exit_code == 0, ran.output
    runs = [PlannedRun.model_validate(r) for r in json.loads(ran.output)["runs"]]
    return next(r for r in runs if r.spec.recovery and r.spec.recovery.strategy.value == strategy)


def _executor(node: str) -> RunExecutor:
    """An executor with just what supervising needs: the launch node and the Ctrl-C flag."""
    executor = RunExecutor.__new__(RunExecutor)
    executor.pool = {node: LocalNode(node, sudo=False)}  # type: ignore[assignment]
    executor.interrupted = threading.Event()
    return executor


def _job(folder: Path) -> _Job:
    def opened(name: str) -> Any:
        return (folder / name).open("w", encoding="utf-8")

    return _Job(
        stdout=opened("stdout.txt"), stderr=opened("stderr.txt"),
        stdout_times=opened("stdout.times"), stderr_times=opened("stderr.times"),
        on_first_result=lambda at: None, on_update=lambda n, at: None,
    )  # fmt: skip


def _supervise(tmp_path: Path, strategy: str, script: str) -> tuple[list[Any], _Job]:
    planned = _planned(strategy)
    assert planned.spec.recovery is not None
    quick = planned.spec.recovery.model_copy(update={"restart_delay_s": 0.2})
    spec = planned.spec.model_copy(update={"recovery": quick})
    launch = NodeCommand(node=planned.launch.node, command=script)
    run = planned.model_copy(update={"launch": launch, "spec": spec})
    executor = _executor(run.launch.node)
    job = _job(tmp_path)
    folder = SimpleNamespace(path=tmp_path)
    started = executor._start_attempt(run, job, run.spec.deadline_s)
    attempts = executor.supervise(run, folder, job, started)  # type: ignore[arg-type]
    job.close()
    return attempts, job


def test_a_failed_restart_job_runs_again_until_it_completes(tmp_path: Path) -> None:
    counter = tmp_path / "starts"
    script = (
        f"n=$(cat {counter} 2>/dev/null || echo 0); n=$((n+1)); echo $n > {counter}; "
        'echo "start $n"; echo "err $n" >&2; [ $n -ge 3 ] || exit 4'
    )
    attempts, job = _supervise(tmp_path, "restart", script)
    assert [a.exit_code for a in attempts] == [4, 4, 0]
    assert job.result is not None and job.result.exit_code == 0
    assert (tmp_path / "stdout.txt").read_text().splitlines() == ["start 1", "start 2", "start 3"]
    assert (tmp_path / "stderr.txt").read_text().splitlines() == ["err 1", "err 2", "err 3"]
    events = read_attempts(tmp_path / "attempts.jsonl")
    assert [(e.attempt, e.event, e.exit_code) for e in events] == [
        (1, "launch", None), (1, "end", 4), (2, "launch", None), (2, "end", 4),
        (3, "launch", None), (3, "end", 0),
    ]  # fmt: skip
    times = [e.at for e in events]
    assert times == sorted(times) and times[-1] <= time.time()
    assert times[2] - times[1] >= 0.2  # the supervisor's delay before a restart


def test_restarts_stop_at_the_limit(tmp_path: Path) -> None:
    attempts, _ = _supervise(tmp_path, "restart", "echo once; exit 4")
    assert len(attempts) == 4  # the first start and restart_limit (3) restarts
    assert (tmp_path / "stdout.txt").read_text().count("once") == 4


def test_a_shrink_job_that_fails_is_not_restarted(tmp_path: Path) -> None:
    attempts, _ = _supervise(tmp_path, "shrink", "echo once; exit 4")
    assert [a.exit_code for a in attempts] == [4]
    events = read_attempts(tmp_path / "attempts.jsonl")
    assert [e.event for e in events] == ["launch", "end"]


def test_a_restart_the_job_refuses_is_not_tried_again(tmp_path: Path) -> None:
    counter = tmp_path / "starts"
    script = (
        f"n=$(cat {counter} 2>/dev/null || echo 0); n=$((n+1)); echo $n > {counter}; "
        '[ $n -ge 2 ] && { echo "checkpoint gone" >&2; exit 6; }; exit 4'
    )
    attempts, _ = _supervise(tmp_path, "restart", script)
    assert [a.exit_code for a in attempts] == [4, 6]  # not the 3 restarts of the limit
