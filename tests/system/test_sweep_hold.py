"""Two sweeps at once on one host's embedded testbed: the second refuses at once, naming the
first (pid, results folder), and touches nothing of it; doctor on the held testbed names the
holder instead of telling anyone to kill its runs; the first sweep completes ok and takes its
testbed down. Both sweeps run as the CLI (subprocesses) with no -t, on an embedded testbed of
a name of their own (the experiment's `virtual_testbed.name`), so no other test's is touched."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from r2bench.runfolder.store import RunStore
from r2bench.testbeds.virtual.hold import Holder, hold_path, live_holder, read_holder
from r2bench.testbeds.virtual.layout import default_state_dir
from r2bench.testbeds.virtual.statedir import Manifest, StatePaths

pytestmark = [
    pytest.mark.root,
    pytest.mark.slow,
    pytest.mark.needs_mpirun,
    pytest.mark.needs_mpi4py,
]

CLI = [sys.executable, "-c", "from r2bench.cli import main; main()"]
ENV = {**os.environ, "COLUMNS": "250"}

# One run of a few seconds: 32 MiB over 2 NICs capped at 250 Mbit/s is ~0.5 s an iteration.
EXPERIMENT = """name: held
virtual_testbed: {{name: {bed}, nics: 2, rate: 250mbit}}
libraries: {{m0: {{recipe: emulated-lib, env: {{R2CC_MODE: 0}}}}}}
benchmark: {{recipe: emulated}}
sizes: [32M]
options: {{iterations: 8, warmup: 1, timeout_s: 60}}
deadline_s: 60
"""


def _sweep(experiment: Path, results: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*CLI, "sweep", str(experiment), "--results", str(results), "-q"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=ENV,
    )


def _wait_for_holder(state: Path, pid: int, timeout_s: float = 60) -> Holder:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        holder = live_holder(state)
        if holder is not None and holder.pid == pid:
            return holder
        time.sleep(0.05)
    raise AssertionError(f"sweep pid {pid} never held {state}")


def _one_line(text: str) -> str:
    return " ".join(text.split())


def test_a_second_sweep_refuses_the_held_embedded_testbed_and_the_first_completes(
    tmp_path: Path,
) -> None:
    bed = f"th{uuid.uuid4().hex[:6]}"
    state = default_state_dir(bed)
    experiment = tmp_path / "held.yaml"
    experiment.write_text(EXPERIMENT.format(bed=bed))
    first = _sweep(experiment, tmp_path / "first")
    try:
        holder = _wait_for_holder(state, first.pid)
        assert holder.results == str(tmp_path / "first" / "held")

        second = _sweep(experiment, tmp_path / "second")
        said, _ = second.communicate(timeout=60)
        assert first.poll() is None, "the first sweep ended before the second was refused"
        assert second.returncode == 2, said
        refusal = _one_line(said)
        assert f"testbed {bed} is held by pid {first.pid}" in refusal
        assert f"results folder {tmp_path / 'first' / 'held'}" in refusal
        assert "already up" not in refusal and "brought up" not in refusal
        assert not (tmp_path / "second" / "held").exists()

        # Doctor on the held testbed names the holder; it never says to kill its runs.
        testbed_file = StatePaths(state).testbed_yaml
        deadline = time.monotonic() + 60
        while not testbed_file.is_file() and time.monotonic() < deadline:
            time.sleep(0.05)
        doctor = subprocess.run(
            [*CLI, "doctor", "-t", str(testbed_file)],
            capture_output=True,
            text=True,
            timeout=120,
            env=ENV,
        )
        assert first.poll() is None, "the first sweep ended before doctor asked"
        report = _one_line(doctor.stdout)
        assert doctor.returncode == 1, report
        assert "held by" in report and f"sweep pid {first.pid}" in report
        assert "wait for it to end" in report and "kill " not in report.replace("do not kill", "")

        out, _ = first.communicate(timeout=300)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
        hold_path(state).unlink(missing_ok=True)  # the empty file of this test's own testbed
    assert first.returncode == 0, out
    lines = _one_line(out)
    assert f"testbed: embedded virtual testbed {bed} (brought up for this sweep" in lines
    assert f"testbed {bed} taken down" in lines
    store = RunStore(tmp_path / "first", "held")
    (run_id,) = [path.name for path in store.run_dirs()]
    end = store.end(run_id)
    assert end is not None and end.outcome.status.value == "ok", end
    assert Manifest.load(state) is None  # taken down by the sweep that brought it up
    assert read_holder(state) is None  # and let go
