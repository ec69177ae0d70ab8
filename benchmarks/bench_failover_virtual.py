"""Failover figures of an experiment on the virtual testbed, through the real chain (root; Linux).

    python benchmarks/bench_failover_virtual.py [EXPERIMENT] [--nics 4] [--rate 250mbit]
        [--repeats N] [--json FILE]

Brings up a 2-node virtual testbed (default 4 data NICs, each capped with tbf at --rate both
ways), plans EXPERIMENT (default experiments/quickstart.yaml) with r2bench's planner, runs
r2bench's setup (it copies this r2bench to the nodes: the runs use its emulator), and runs
every planned run by hand: the plan's own mpirun line on the launch node over ssh, each fault's
`injectors/link.sh` inject on its node `after_s` after the job's first result line (or after
launch) and its revert `duration_s` later (or when the job ends). Each run is classified by
r2bench.analysis; the per-iteration times of the largest size, placed on the controller's clock
from the first result line, give the stall (slowest iteration) and busbw before the fault,
during it (after the stall iteration) and after the heal, as ratios of the before value. The
testbed is removed at the end. Last lines: one per library/mode and scenario with the medians.

Target: none (it reports figures; `docs/virtual-testbed.md` shows them). Exit code 0 once every
run has been measured, whatever its outcome.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

from rich.console import Console

from r2bench.analysis.outcome import classify
from r2bench.config.load import load_testbed
from r2bench.parse.events import parse_events
from r2bench.parse.nccltests.text import parse_text
from r2bench.plan.build import load_inputs, make_plan
from r2bench.plan.model import PlannedRun
from r2bench.setup.builder import Builder, SetupOptions
from r2bench.testbeds.virtual.layout import VirtualSpec, default_state_dir
from r2bench.testbeds.virtual.lifecycle import up
from r2bench.testbeds.virtual.teardown import teardown

REPO = Path(__file__).resolve().parents[1]
ROW = re.compile(r"^\s+\d+\s+\d+\s+float\s")


@dataclass
class Figures:
    """One run: outcome, wall time and the busbw timeline of the largest size."""

    run_id: str
    mode: str
    scenario: str
    outcome: str
    seconds: float
    stall_ms: float | None = None
    before: float | None = None
    during: float | None = None
    after: float | None = None
    iter_ms: list[float] | None = None
    phases: list[str] | None = None

    def ratio(self, value: float | None) -> float | None:
        """`value` over the pre-fault busbw."""
        return value / self.before if value and self.before else None


def ssh(config: str, node: str, command: str) -> list[str]:
    """argv of one command on a node through the testbed's ssh_config."""
    return ["ssh", "-F", config, node, command]


class Job:
    """The launch line running on its node; stdout lines are time-stamped as they arrive."""

    def __init__(self, argv: list[str]) -> None:
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        self.lines: list[str] = []
        self.first_row: float | None = None
        self.err = ""
        threading.Thread(target=self._read_out, daemon=True).start()
        self.err_reader = threading.Thread(target=self._read_err, daemon=True)
        self.err_reader.start()

    def _read_out(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if self.first_row is None and ROW.match(line):
                self.first_row = time.monotonic()
            self.lines.append(line)

    def _read_err(self) -> None:
        assert self.proc.stderr is not None
        self.err = self.proc.stderr.read()

    def wait_until(self, moment: float) -> bool:
        """Sleep until `moment` (monotonic); False if the job ended first."""
        while time.monotonic() < moment:
            if self.proc.poll() is not None:
                return False
            time.sleep(0.005)
        return True

    def anchor(self, since: str, timeout: float) -> float | None:
        """The moment a trigger counts from: launch, or the first result line."""
        if since != "first_result":
            return self.started
        deadline = time.monotonic() + timeout
        while self.first_row is None and self.proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)
        return self.first_row


def run_once(run: PlannedRun, config: str, logs: Path | None = None) -> Figures:
    """One planned run; `config` is the testbed's ssh_config."""
    work = str(Path(run.run_dir).parents[1])
    prepare = (
        f"rm -rf {shlex.quote(run.run_dir)} && mkdir -p {shlex.quote(run.run_dir)} && "
        f"cp -r {shlex.quote(str(REPO / 'injectors'))} {shlex.quote(work)}/"
    )
    subprocess.run(ssh(config, "node0", prepare), check=True)
    # from the checkout, so that every rank imports this tree's r2bench (mpirun keeps the cwd)
    launch = f"cd {shlex.quote(str(REPO))} && {run.launch.command}"
    job = Job(ssh(config, run.launch.node, launch))
    inject_at = heal_at = None
    fault = run.faults[0] if run.faults else None
    try:
        anchor = job.anchor(fault.since, run.spec.deadline_s) if fault else None
        if fault and anchor is not None and job.wait_until(anchor + fault.inject_after_s):
            subprocess.run(ssh(config, fault.node, fault.inject.command), check=True)
            inject_at = time.monotonic()
            if fault.heal_after_s is not None:
                job.wait_until(anchor + fault.heal_after_s)
                subprocess.run(ssh(config, fault.node, fault.revert.command), check=True)
                heal_at = time.monotonic()
        job.proc.wait(timeout=run.spec.deadline_s)
    finally:
        if fault and inject_at is not None and heal_at is None:
            subprocess.run(ssh(config, fault.node, fault.revert.command), check=True)
        if job.proc.poll() is None:
            job.proc.kill()
            job.proc.wait()
    seconds = time.monotonic() - job.started
    job.err_reader.join(timeout=10)
    out = "".join(job.lines)
    if logs is not None:
        logs.mkdir(parents=True, exist_ok=True)
        (logs / f"{run.spec.run_id}.out").write_text(out)
        (logs / f"{run.spec.run_id}.err").write_text(job.err)
    outcome = classify(
        job.proc.returncode, parsed=parse_text(out), events=parse_events(out + job.err)
    )
    # library/mode: the emulated stock NCCL and R-2CCL's mode 0 share R2CC_MODE=0
    mode = f"{run.spec.library_label}/{run.spec.env.get('R2CC_MODE', '-')}"
    figures = Figures(run.spec.run_id, mode, run.spec.scenario, outcome.status.value, seconds)
    _timeline(figures, Path(run.run_dir) / "result.json", job.first_row, inject_at, heal_at)
    return figures


def _timeline(
    fig: Figures, result: Path, start: float | None, inject: float | None, heal: float | None
) -> None:
    """Busbw per phase of the largest size's iterations (out-of-place then in-place)."""
    if not result.is_file() or start is None:
        return
    rows = json.loads(result.read_text()).get("results") or []
    if len(rows) < 2 or "in_place_per_iter" not in rows[-1]:
        return
    row = rows[-1]
    times = [
        t / 1e6 for k in ("out_of_place", "in_place") for t in row[f"{k}_per_iter"]["times_us"]
    ]
    busbw = [row["size"] / t / 1e9 for t in times]  # 2 ranks: busbw = algbw
    ends = [start + sum(times[: i + 1]) for i in range(len(times))]
    stall = max(range(len(times)), key=times.__getitem__)
    phases = []
    for i, end in enumerate(ends):
        begin = end - times[i]
        if inject is None or end < inject:
            phases.append("before")
        elif i == stall or begin < inject:
            phases.append("stall")
        elif heal is None or end < heal:
            phases.append("during")
        elif begin > heal:
            phases.append("after")
        else:
            phases.append("heal")

    def median(phase: str) -> float | None:
        values = [b for b, p in zip(busbw, phases, strict=True) if p == phase]
        return statistics.median(values) if values else None

    fig.iter_ms = [round(t * 1e3, 1) for t in times]
    fig.phases = phases
    fig.stall_ms = times[stall] * 1e3 if inject is not None else None
    fig.before, fig.during, fig.after = median("before"), median("during"), median("after")


def _fmt(value: float | None, digits: int = 2) -> str:
    return f"{value:.{digits}f}" if value is not None else "-"


def _med(values: list[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return statistics.median(kept) if kept else None


def report(rows: list[Figures]) -> None:
    """Per run, then medians per (library/mode, scenario); ratios are over the same run's pre-fault
    busbw (`during`, `after`) and over the same mode's fault-free runs (`/ff`)."""
    base = {
        m: _med([r.before for r in rows if r.mode == m and r.stall_ms is None and r.before])
        for m in {r.mode for r in rows}
    }

    def over(value: float | None, mode: str) -> float | None:
        ref = base.get(mode)
        return value / ref if value and ref else None

    print(f"{'library/mode':>18} {'scenario':>10} {'outcome':>9} {'run s':>6} {'stall ms':>9} "
          f"{'busbw GB/s':>10} {'during':>7} {'after':>6} {'during/ff':>9} {'after/ff':>8}  "
          "iteration ms (phase)")  # fmt: skip
    for r in rows:
        timeline = " ".join(
            f"{t:.0f}{p[0] if p != 'before' else ''}"
            for t, p in zip(r.iter_ms or [], r.phases or [], strict=True)
        )
        print(
            f"{r.mode:>18} {r.scenario:>10} {r.outcome:>9} {r.seconds:6.1f} {_fmt(r.stall_ms, 0):>9} "
            f"{_fmt(r.before, 3):>10} {_fmt(r.ratio(r.during)):>7} {_fmt(r.ratio(r.after)):>6} "
            f"{_fmt(over(r.during, r.mode)):>9} {_fmt(over(r.after, r.mode)):>8}  {timeline}"
        )
    print(f"total run time {sum(r.seconds for r in rows):.1f} s over {len(rows)} runs")
    for key in sorted({(r.mode, r.scenario) for r in rows}):
        group = [r for r in rows if (r.mode, r.scenario) == key]
        outcomes = ",".join(
            f"{o}x{sum(r.outcome == o for r in group)}" for o in sorted({r.outcome for r in group})
        )
        print(
            f"mode={key[0]} scenario={key[1]} outcome={outcomes} "
            f"run_s={_fmt(_med([r.seconds for r in group]), 1)} "
            f"stall_ms={_fmt(_med([r.stall_ms for r in group]), 0)} "
            f"busbw_gbps={_fmt(_med([r.before for r in group]), 3)} "
            f"during={_fmt(_med([r.ratio(r.during) for r in group]))} "
            f"after_heal={_fmt(_med([r.ratio(r.after) for r in group]))} "
            f"during_ff={_fmt(_med([over(r.during, r.mode) for r in group]))} "
            f"after_heal_ff={_fmt(_med([over(r.after, r.mode) for r in group]))}"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("experiment", nargs="?", default=str(REPO / "experiments/quickstart.yaml"))
    parser.add_argument("--nics", type=int, default=4)
    parser.add_argument("--rate", default="250mbit", help="per-NIC cap; 'none' for no cap")
    parser.add_argument("--name", default=f"bf{uuid.uuid4().hex[:6]}")
    parser.add_argument("--only", default="", help="run only runs whose id contains this")
    parser.add_argument("--json", default=None, help="write every run's figures here")
    parser.add_argument("--logs", default=None, help="keep every run's stdout/stderr here")
    args = parser.parse_args()
    rate = None if args.rate == "none" else args.rate
    state = default_state_dir(args.name)
    try:
        up(VirtualSpec(name=args.name, nics=args.nics, rate=rate, state_dir=state))
        testbed_file = state / "testbed.yaml"
        inputs = load_inputs(Path(args.experiment), testbed_file)
        plan = make_plan(inputs)
        Builder(inputs, SetupOptions(log_dir=state / "setup"), Console(stderr=True)).run()
        config = load_testbed(testbed_file).nodes[0].ssh.config_file or ""
        logs = Path(args.logs) if args.logs else None
        runs = [run for run in plan.runs if args.only in run.spec.run_id]
        rows = [run_once(run, config, logs) for run in runs]
    finally:
        teardown(args.name, state, lambda _: None)
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(r) for r in rows], indent=1) + "\n")
    report(rows)
    print("target: none (figures only)")
    return 0


if __name__ == "__main__":
    if shutil.which("mpirun") is None:
        sys.exit("mpirun not found: install openmpi-bin (scripts/install-deps.sh)")
    sys.exit(main())
