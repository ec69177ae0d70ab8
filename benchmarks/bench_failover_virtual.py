"""Failover figures on the virtual testbed, through the real chain (root; Linux).

    python benchmarks/bench_failover_virtual.py [--repeats 5] [--size 8M] [--iters 60]

Brings up a 2-node x 2-NIC virtual testbed, plans a one-size all_reduce of the emulated
collective with `r2bench plan` machinery, and for R2CC_MODE 0, 1 and 2 runs the plan's own mpirun
line on node0 over ssh while node1's nic1 is taken down with `injectors/link.sh` once the timed
loop has started (and healed 3 s later). Each run is classified by r2bench.records, and the
per-iteration times give the stall (slowest iteration) and busbw before vs after the fault.
The testbed is removed at the end.
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from r2bench.config.load import load_testbed
from r2bench.plan.build import load_inputs, make_plan
from r2bench.plan.model import PlannedRun
from r2bench.records.events import parse_events
from r2bench.records.nccltests import parse_text
from r2bench.records.outcome import classify
from r2bench.virtual.lifecycle import up
from r2bench.virtual.plan import VirtualSpec, default_state_dir
from r2bench.virtual.teardown import teardown

REPO = Path(__file__).resolve().parents[1]
HEADER = "#       size"
EXPERIMENT = """name: failover-figures
libraries: {{emulated: {{recipe: emulated-lib}}}}
benchmark: {{recipe: emulated}}
sizes: [{size}]
options: {{iterations: {iters}, warmup: 1, timestamps: false, timeout_s: 60}}
env: {{NCCL_DEBUG: INFO, R2CC_FAILOVER_TIMEOUT_MS: 500}}
scenarios:
  - name: nic1-down
    faults: [{{kind: link_down, node: node1, nic: nic1, trigger: {{after_s: 0.3, since: first_result}}, duration_s: 3}}]
sweep:
  matrix: {{R2CC_MODE: [0, 1, 2], scenario: [nic1-down]}}
repeats: {repeats}
deadline_s: 120
"""


@dataclass(frozen=True)
class Figures:
    mode: str
    outcome: str
    seconds: float
    stall_ms: float | None
    busbw_before: float | None
    busbw_after: float | None


def ssh(config: str, node: str, command: str) -> list[str]:
    return ["ssh", "-F", config, node, command]


def run_once(run: PlannedRun, config: str) -> Figures:
    """One planned run; `config` is the testbed's ssh_config."""
    work = str(Path(run.run_dir).parents[1])
    prepare = f"rm -rf {shlex.quote(run.run_dir)} && mkdir -p {shlex.quote(run.run_dir)} && cp -r {shlex.quote(str(REPO / 'injectors'))} {shlex.quote(work)}/"
    subprocess.run(ssh(config, "node0", prepare), check=True)
    fault = run.faults[0]
    started = time.monotonic()
    proc = subprocess.Popen(
        ssh(config, run.launch.node, run.launch.command),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if line.startswith(HEADER):
            break
    time.sleep(fault.inject_after_s)
    subprocess.run(ssh(config, fault.node, fault.inject.command), check=True, capture_output=True)
    try:
        out, err = proc.communicate(timeout=90)
    finally:
        subprocess.run(
            ssh(config, fault.node, fault.revert.command), check=True, capture_output=True
        )
    seconds = time.monotonic() - started
    parsed = parse_text("".join(lines) + out)
    events = parse_events(out + err)
    outcome = classify(proc.returncode, parsed=parsed, events=events)
    return Figures(run.spec.env["R2CC_MODE"], outcome.status.value, seconds, *_timeline(run))


def _timeline(run: PlannedRun) -> tuple[float | None, float | None, float | None]:
    result = Path(run.run_dir) / "result.json"
    if not result.is_file():
        return None, None, None
    results = json.loads(result.read_text()).get("results") or []
    if not results or "out_of_place_per_iter" not in results[0]:
        return None, None, None  # the job failed before finishing its first size
    row = results[0]
    times = row["out_of_place_per_iter"]["times_us"]
    slowest = max(range(len(times)), key=times.__getitem__)
    size, ranks = row["size"], len(run.spec.nodes)

    def busbw(window: list[float]) -> float | None:
        if not window:
            return None
        return size / statistics.median(window) / 1e3 * 2 * (ranks - 1) / ranks

    return times[slowest] / 1e3, busbw(times[:slowest]), busbw(times[slowest + 1 :])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--size", default="8M")
    parser.add_argument("--iters", type=int, default=300)
    args = parser.parse_args()
    name = f"bf{uuid.uuid4().hex[:6]}"
    state = default_state_dir(name)
    with tempfile.TemporaryDirectory() as tmp:
        experiment = Path(tmp) / "exp.yaml"
        experiment.write_text(
            EXPERIMENT.format(size=args.size, iters=args.iters, repeats=args.repeats)
        )
        try:
            up(VirtualSpec(name=name, state_dir=state))
            testbed_file = state / "testbed.yaml"
            plan = make_plan(load_inputs(experiment, testbed_file))
            config = load_testbed(testbed_file).nodes[0].ssh.config_file or ""
            rows = [run_once(run, config) for run in plan.runs]
        finally:
            teardown(name, state, lambda _: None)
    print(
        f"{'mode':>4} {'outcome':>9} {'run s':>6} {'stall ms':>9} {'busbw before':>13} {'after':>7} {'after/before':>12}"
    )
    for r in rows:
        ratio = f"{r.busbw_after / r.busbw_before:.2f}" if r.busbw_after and r.busbw_before else "-"
        fmt = lambda v: f"{v:.3f}" if v is not None else "-"  # noqa: E731
        print(
            f"{r.mode:>4} {r.outcome:>9} {r.seconds:6.1f} {fmt(r.stall_ms):>9} {fmt(r.busbw_before):>13} {fmt(r.busbw_after):>7} {ratio:>12}"
        )
    return 0


if __name__ == "__main__":
    if shutil.which("mpirun") is None:
        sys.exit("mpirun not found: install openmpi-bin (scripts/install-deps.sh)")
    sys.exit(main())
