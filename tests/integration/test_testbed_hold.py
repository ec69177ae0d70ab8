"""One holder per virtual testbed (r2bench.testbeds.virtual.hold): a live holder is refused with its pid
and results folder, a dead one is taken over, and doctor and `testbed down` name the holder
instead of telling anyone to kill its runs or remove its testbed.

This module holds those with real processes; the same subject's other tests:
tests/unit/test_testbed_hold.py (its pure tests).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from r2bench.config.load import load_testbed
from r2bench.doctor.checks import CheckResult, Status
from r2bench.doctor.holder import HOLDER_CHECK, attribute_to_holder
from r2bench.testbeds.virtual.hold import (
    HeldError,
    TestbedHold,
    hold_path,
    live_holder,
    read_holder,
)
from tests.support import paths
from tests.support.cli_runner import invoke_as_main

ROOT = paths.REPO
VIRTUAL = ROOT / "experiments" / "testbeds" / "virtual-example.yaml"

HOLDER_SCRIPT = """
import os, sys, time
from pathlib import Path
from r2bench.testbeds.virtual.hold import TestbedHold
hold = TestbedHold("bed", Path(sys.argv[1]), results="results/first", command="r2bench sweep a.yaml")
hold.acquire()
print("held", flush=True)
if sys.argv[2] == "die":
    os._exit(0)  # dies holding it: the kernel drops the flock, the file still names it
time.sleep(float(sys.argv[2]))
hold.release()
"""


def _holder(state: Path, then: str) -> subprocess.Popen[str]:
    """A process that takes the hold of `state`, says `held`, then sleeps `then` seconds and
    lets go, or (`die`) exits at once without letting go."""
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(HOLDER_SCRIPT), str(state), then],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


@pytest.fixture
def held(tmp_path: Path) -> Iterator[tuple[Path, subprocess.Popen[str]]]:
    state = tmp_path / "bed"
    proc = _holder(state, "60")
    try:
        yield state, proc
    finally:
        proc.kill()
        proc.wait()


def _stray_and_fault(node: str) -> list[CheckResult]:
    return [
        CheckResult(
            node, "stray processes", Status.FAIL, "4242 python -m r2bench.workloads", "kill 4242"
        ),
        CheckResult(node, "active faults", Status.FAIL, "r2b-x-f0 (kind link_down)", "heal"),
    ]


def test_a_live_holder_is_refused_with_its_pid_and_results_folder(
    held: tuple[Path, subprocess.Popen[str]],
) -> None:
    state, proc = held
    with pytest.raises(HeldError) as refused:
        TestbedHold("bed", state, results="results/second").acquire()
    message = str(refused.value)
    assert f"pid {proc.pid}" in message and "results folder results/first" in message
    assert "r2bench sweep a.yaml" in message and "--wait-testbed" in message
    assert live_holder(state) is not None and live_holder(state).pid == proc.pid  # type: ignore[union-attr]


def test_a_waiting_taker_says_so_once_then_refuses_after_its_wait(
    held: tuple[Path, subprocess.Popen[str]],
) -> None:
    state, proc = held
    said: list[str] = []
    with pytest.raises(HeldError, match="after waiting 1 s"):
        TestbedHold("bed", state).acquire(wait_s=1.0, notify=said.append)
    assert (
        len(said) == 1 and f"held by pid {proc.pid}" in said[0] and "waiting up to 1 s" in said[0]
    )


def test_a_waiting_taker_gets_the_testbed_when_its_holder_lets_go(tmp_path: Path) -> None:
    state = tmp_path / "bed"
    proc = _holder(state, "1")
    said: list[str] = []
    with TestbedHold("bed", state, results="results/second").acquire(10, said.append):
        holder = read_holder(state)
        assert holder is not None and holder.results == "results/second" and holder.is_me()
    proc.wait()
    assert any("waiting up to 10 s" in line for line in said)
    assert not any("taking over" in line for line in said)  # it let go: nothing stale
    assert read_holder(state) is None  # released: the file names nobody


def test_a_dead_holder_is_taken_over_with_a_message(tmp_path: Path) -> None:
    state = tmp_path / "bed"
    proc = _holder(state, "die")
    proc.wait()
    stale = read_holder(state)
    assert stale is not None and stale.pid == proc.pid and not stale.alive()
    assert live_holder(state) is None
    said: list[str] = []
    hold = TestbedHold("bed", state).acquire(notify=said.append)
    try:
        assert said == [
            f"testbed bed: taking over from {stale.describe()}: it is no longer running"
        ]
    finally:
        hold.release()
    assert hold_path(state) == tmp_path / "bed.hold"


def test_doctor_names_the_live_holder_of_strays_and_faults_never_kill(
    held: tuple[Path, subprocess.Popen[str]],
) -> None:
    state, proc = held
    testbed = load_testbed(VIRTUAL).model_copy(update={"state_dir": str(state)})
    results = attribute_to_holder(testbed, _stray_and_fault("node1"))
    row = next(r for r in results if r.check == HOLDER_CHECK)
    assert row.status is Status.FAIL and f"pid {proc.pid}" in row.fix and "results/first" in row.fix
    attributed = [r for r in results if r is not row]
    assert [r.check for r in attributed] == ["stray processes", "active faults"]
    for result in attributed:
        assert result.fix.startswith(f"these belong to sweep pid {proc.pid}"), result.fix
        assert "do not kill them" in result.fix and "kill 4242" not in result.fix
    # Free testbed: the advice is left as it was (kill a stray that belongs to no live sweep).
    proc.kill()
    proc.wait()
    assert attribute_to_holder(testbed, _stray_and_fault("node1")) == _stray_and_fault("node1")


def test_testbed_down_refuses_a_held_testbed_naming_its_holder(
    held: tuple[Path, subprocess.Popen[str]],
) -> None:
    state, proc = held
    result = invoke_as_main("testbed", "down", "bed", "--state-dir", str(state))
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    assert f"pid {proc.pid}" in text and "results folder results/first" in text
    assert "--force" in text
