"""`r2bench sweep` for real on the virtual testbed: end to end, resume, the lock, and chaos.

The sweep runs as the CLI (a subprocess), on a 2-node x 2-NIC virtual testbed this module
brings up, with the emulated collective under the real mpirun and real link faults. The chaos
test interrupts it with SIGINT and with SIGKILL at random points and resumes each time; at the
end every planned run is recorded exactly once and complete, and no node keeps a fault record,
a link down, an r2bench nft table or qdisc, or a process of a run. A controller SIGKILLed while
its fault is active leaves the link down no longer than the node-side lease (+2 s).
"""

from __future__ import annotations

import json
import random
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest

from r2bench.analysis.windows import fault_windows
from r2bench.config.load import load_testbed
from r2bench.plan.build import LEASE_GRACE_S, load_inputs, make_plan
from r2bench.runfolder.runformat import COMPLETE
from r2bench.runfolder.runmodel import FaultEvent, RunEnd
from r2bench.runfolder.store import RunStore
from r2bench.tables.build import TABLE_NAMES, build_tables
from r2bench.testbeds.virtual.layout import netns_name
from r2bench.testbeds.virtual.lifecycle import UpResult

pytestmark = [
    pytest.mark.root,
    pytest.mark.slow,
    pytest.mark.needs_mpirun,
    pytest.mark.needs_mpi4py,
]

CLI = [sys.executable, "-c", "from r2bench.cli import main; main()"]

EXPERIMENT = """name: {name}
libraries: {{emulated: {{recipe: emulated-lib}}}}
benchmark: {{recipe: emulated}}
sizes: {{begin: 1M, end: 4M, factor: 2}}
options: {{iterations: {iterations}, warmup: 1, timeout_s: 30}}
env: {{NCCL_R2CC_FAILOVER_TIMEOUT_MS: 300, R2CC_MODE: 1}}
scenarios:
  - name: nic1-blip
    faults: [{{kind: link_down, node: node1, nic: nic1, trigger: {{after_s: 0.2, since: first_result}}, duration_s: 0.4}}]
repeats: {repeats}
deadline_s: 30
"""

HELD_FAULT = """name: held
libraries: {emulated: {recipe: emulated-lib}}
benchmark: {recipe: emulated}
sizes: [1M]
options: {iterations: 200000, warmup: 1}
env: {NCCL_R2CC_FAILOVER_TIMEOUT_MS: 300, R2CC_MODE: 1}
scenarios:
  - name: down-to-the-end
    faults: [{kind: link_down, node: node1, nic: nic1, trigger: {after_s: 0.5}}]
sweep: {matrix: {scenario: [down-to-the-end]}}
deadline_s: 4
"""


@dataclass(frozen=True)
class Bed:
    name: str
    testbed_file: Path


@pytest.fixture(scope="module")
def bed(virtual_testbed: UpResult) -> Bed:
    return Bed(virtual_testbed.testbed.name, virtual_testbed.testbed_yaml)


def sweep(experiment: Path, bed: Bed, results: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            *CLI,
            "sweep",
            str(experiment),
            "-t",
            str(bed.testbed_file),
            "--results",
            str(results),
            "-q",
            *extra,
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def write_experiment(tmp: Path, name: str, repeats: int, iterations: int = 8) -> Path:
    path = tmp / f"{name}.yaml"
    path.write_text(EXPERIMENT.format(name=name, repeats=repeats, iterations=iterations))
    return path


def in_node(bed: Bed, node: str, command: str) -> str:
    netns = netns_name(bed.name, node)
    out = subprocess.run(
        ["ip", "netns", "exec", netns, "bash", "-c", command], capture_output=True, text=True
    )
    return out.stdout


def leftovers(bed: Bed) -> list[str]:
    """Everything a sweep must not leave behind, on every node."""
    testbed = load_testbed(bed.testbed_file)
    found = []
    active = Path(testbed.paths.work_dir) / "faults" / "active"
    records = (
        [p for p in active.rglob("*") if p.is_file() and not p.name.startswith(".")]
        if active.exists()
        else []
    )
    found += [f"fault record {p}" for p in records]
    for node in testbed.nodes:
        for nic in node.data_nics:
            state = in_node(bed, node.name, f"cat /sys/class/net/{nic.netdev}/operstate").strip()
            if state != "up":
                found.append(f"{node.name}/{nic.name} is {state}")
        tables = in_node(bed, node.name, "nft list tables 2>/dev/null")
        found += [f"{node.name}: nft {t}" for t in tables.splitlines() if "r2b_" in t]
        qdiscs = in_node(bed, node.name, "tc qdisc show")
        found += [
            f"{node.name}: qdisc {q}"
            for q in qdiscs.splitlines()
            if " tbf " in q and "f2b0:" not in q
        ]
    environ = subprocess.run(
        ["bash", "-c", "grep -lz '^R2B_RUN=' /proc/[0-9]*/environ 2>/dev/null"],
        capture_output=True,
        text=True,
    )
    found += [f"process {f}" for f in environ.stdout.split()]
    return found


def test_sweep_end_to_end_then_resume_skips_everything(bed: Bed, tmp_path: Path) -> None:
    # 20 iterations a size: the job outlasts its fault (0.2 s after the first result, for 0.4 s)
    # on a quiet machine too; with 8 the last collective could end before the fault came.
    experiment = write_experiment(tmp_path, "e2e", repeats=1, iterations=20)
    results = tmp_path / "results"
    proc = sweep(experiment, bed, results)
    out, _ = proc.communicate(timeout=240)
    assert proc.returncode == 0, out
    plan = make_plan(load_inputs(experiment, bed.testbed_file))
    store = RunStore(results, "e2e")
    assert sorted(store.complete_runs()) == sorted(r.spec.run_id for r in plan.runs)
    for run in plan.runs:
        end = RunEnd.model_validate_json(
            (store.run_dir(run.spec.run_id) / "outcome.json").read_text()
        )
        assert end.outcome.status.value == "ok", end.outcome.reason
        if run.faults:
            events = [
                FaultEvent.model_validate_json(line)
                for line in (store.run_dir(run.spec.run_id) / "faults.jsonl")
                .read_text()
                .splitlines()
            ]
            assert [e.action for e in events] == ["inject", "revert", "verify"]
            inject = events[0]
            assert inject.planned_at is not None and inject.applied_at is not None
            assert inject.clock_offset_s is not None
            [window] = fault_windows(events, None)  # applied, on the controller's clock
            assert abs(window.applied - inject.planned_at) < 0.05
    assert (results / "e2e" / "report.html").stat().st_size > 10_000
    assert "outcomes" in out and "report:" in out
    assert leftovers(bed) == []
    # The sweep kept each run's rows from the outputs it read to classify the run, and built
    # its tables from them: they are what parsing every run folder afresh gives.
    swept = build_tables(results / "e2e")
    assert swept.stored_iterations is not None  # the sweep's own tables, read back
    tables = {name: getattr(swept, name) for name in TABLE_NAMES}
    shutil.rmtree(results / "e2e" / "tables")
    fresh = build_tables(results / "e2e")
    for name in TABLE_NAMES:
        pd.testing.assert_frame_equal(tables[name], getattr(fresh, name))

    again = sweep(experiment, bed, results)
    out, _ = again.communicate(timeout=120)
    assert again.returncode == 0, out
    assert f"{len(plan.runs)} runs, 0 to do" in out

    # Ctrl-C at any moment of a sweep, its ending included (final heal, tables, report, exit),
    # is handled by the sweep: exit 0 or 130, never a death by SIGINT or click's "Aborted!".
    barraged = sweep(experiment, bed, results)
    assert barraged.stdout is not None
    first_line = barraged.stdout.readline()
    while barraged.poll() is None:
        barraged.send_signal(signal.SIGINT)
        time.sleep(0.02)
    out = first_line + barraged.stdout.read()
    assert barraged.returncode in (0, 130), out
    assert "Aborted" not in out and "Traceback" not in out, out
    assert leftovers(bed) == []


MASKED = """name: masked
libraries: {emulated: {recipe: emulated-lib}}
benchmark: {recipe: emulated}
sizes: {begin: 4M, end: 4M, factor: 2}
options: {iterations: 10, warmup: 1, cycles: 40, timeout_s: 30}
env: {NCCL_R2CC_FAILOVER_TIMEOUT_MS: 300, R2CC_MODE: 2}
scenarios:
  - name: last-nic-down
    faults: [{kind: link_down, node: node1, nic: nic1, trigger: {after_s: 0.5, since: first_result}, duration_s: 1}]
sweep: {matrix: {scenario: [last-nic-down]}}
deadline_s: 30
"""


def test_a_fault_on_the_nic_mode_2_masks_is_without_effect(bed: Bed, tmp_path: Path) -> None:
    """R2CC_MODE 2 masks the last NIC from the start: taking it down touches no traffic, so the
    run that finished ok measured no fault. The sweep records `fault_without_effect` with the
    NIC's byte counts, and the report shows the evidence line."""
    experiment = tmp_path / "masked.yaml"
    experiment.write_text(MASKED)
    results = tmp_path / "results"
    proc = sweep(experiment, bed, results)
    out, _ = proc.communicate(timeout=240)
    assert proc.returncode in (0, 1), out
    runs = [p for p in (results / "masked").glob("*") if (p / COMPLETE).exists()]
    assert len(runs) == 1, out
    run_dir = runs[0]
    end = RunEnd.model_validate_json((run_dir / "outcome.json").read_text())
    assert end.outcome.status.value == "fault_without_effect", end.outcome.reason
    reason = end.outcome.reason
    assert "node1/nic1 link_down: touched no traffic" in reason, reason
    assert "moved in the 2.0 s before it" in reason or "moved in the" in reason
    report = (results / "masked" / "report.html").read_text()
    assert "Failure evidence: did each fault hit live traffic" in report
    assert "node1/nic1 link_down: touched no traffic" in report
    assert leftovers(bed) == []


def test_a_second_sweep_on_the_same_results_is_refused(bed: Bed, tmp_path: Path) -> None:
    experiment = write_experiment(tmp_path, "locked", repeats=2)
    results = tmp_path / "results"
    first = sweep(experiment, bed, results)
    try:
        lock = results / "locked" / ".lock"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (lock.exists() and lock.read_text().strip()):
            time.sleep(0.1)
        second = sweep(experiment, bed, results)
        out, _ = second.communicate(timeout=60)
        assert second.returncode == 2, out
        assert f"pid {first.pid}" in out and "in use by another sweep" in out
    finally:
        first.send_signal(signal.SIGINT)
        first.communicate(timeout=120)
    assert leftovers(bed) == []


def test_chaos_interrupts_and_kills_then_resume_records_each_run_once(
    bed: Bed, tmp_path: Path
) -> None:
    experiment = write_experiment(tmp_path, "chaos", repeats=6)
    results = tmp_path / "results"
    rng = random.Random(20261123)
    for sig in [signal.SIGINT] * 10 + [signal.SIGKILL] * 10:
        proc = sweep(experiment, bed, results)
        time.sleep(rng.uniform(0.5, 6.0))
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=180)
        if sig == signal.SIGINT:
            assert proc.returncode in (0, 130), out
            assert leftovers(bed) == [], out
    final = sweep(experiment, bed, results)
    out, _ = final.communicate(timeout=600)
    assert final.returncode == 0, out
    plan = make_plan(load_inputs(experiment, bed.testbed_file))
    store = RunStore(results, "chaos")
    planned = sorted(r.spec.run_id for r in plan.runs)
    complete = [p.name for p in store.run_dirs() if (p / COMPLETE).is_file()]
    assert sorted(complete) == planned, "every planned run complete, exactly once"
    for run_id in planned:
        json.loads((store.run_dir(run_id) / "outcome.json").read_text())
    assert leftovers(bed) == []


def test_controller_killed_with_a_fault_active_leaves_it_no_longer_than_the_lease(
    bed: Bed, tmp_path: Path
) -> None:
    experiment = tmp_path / "held.yaml"
    experiment.write_text(HELD_FAULT)
    lease = make_plan(load_inputs(experiment, bed.testbed_file)).runs[0].faults[0].lease_s
    assert lease == 4 + LEASE_GRACE_S
    for attempt in range(10):
        proc = sweep(experiment, bed, tmp_path / f"results-{attempt}", "--skip-setup")
        deadline = time.monotonic() + 60
        while in_node(bed, "node1", "cat /sys/class/net/nic1/operstate").strip() != "down":
            assert time.monotonic() < deadline and proc.poll() is None, "the fault never came"
            time.sleep(0.02)
        down_at = time.monotonic()
        proc.kill()
        proc.communicate(timeout=30)
        while in_node(bed, "node1", "cat /sys/class/net/nic1/operstate").strip() != "up":
            assert time.monotonic() - down_at <= lease + 2, f"attempt {attempt}: link still down"
            time.sleep(0.1)
    # The next sweep finds the processes and records of the killed ones and cleans them.
    proc = sweep(experiment, bed, tmp_path / "results-final", "--skip-setup")
    proc.communicate(timeout=120)
    assert leftovers(bed) == []
