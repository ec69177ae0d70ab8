"""A sample sweep made from captured nccl-tests outputs, for demos, tests and benchmarks.

`write_sample_sweep(store, captured_dir, SampleConfig(...))` writes complete run folders that
look like a real fault sweep: stock NCCL and R2CCL modes x scenarios (`none`, `nic_down`) x
repeats. The header (nccl-tests version, devices) and the crash tail of each run are copied
from the captured outputs in `captured_dir` (tests/data/nccl-tests); result rows are printed in
nccl-tests' exact format (`r2bench.workloads.nccl_format`) with times modelled on the captured
NVLink run, per-iteration times (-I 1) in result.json, -S 1 timestamps, fault events with
node-side times, and R2CC failover log lines. Everything is seeded, hence reproducible.
In a `nic_down` run stock NCCL and R2CC_MODE=0 crash at the fault, modes 1/2 slow down.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from r2bench.analysis.outcome import classify
from r2bench.config.experiment import FaultSpec, NcclTestsOptions, Trigger
from r2bench.parse.events import parse_events
from r2bench.parse.models import LaunchInfo
from r2bench.parse.nccltests.text import parse_text
from r2bench.plan.runspec import ComponentRef, RunSpec
from r2bench.runfolder import runmodel
from r2bench.runfolder import store as st
from r2bench.runfolder.provenance import BuildInfo, Provenance
from r2bench.workloads.nccl_format import Measure, Row, column_header, footer_lines

HEADER_SOURCE = "all_reduce_perf.p2p.c1.txt"
CRASH_SOURCE = "all_reduce_perf.killed.warn.txt"
TIME_FORMAT = "%Y-%m-%d %H:%M:%S"
CRASH_STAMP = "[2026-11-22 03:55:00]"  # when the captured crash happened
BASE_EPOCH = 1795319000.0
START_DELAY_S = 0.5  # launch to first collective
FAULT_AT = 0.4  # fault window, as fractions of the run's fault-free duration
FAULT_FOR = 0.35
LATENCY_US = 12.0
BANDWIDTH_GBPS = 44.0
MODE_SLOWDOWN = {"1": 2.0, "2": 1.4}


@dataclass(frozen=True)
class SampleConfig:
    """Shape of the sample sweep."""

    modes: tuple[str | None, ...] = (None, "0", "1", "2")  # None: stock NCCL
    scenarios: tuple[str, ...] = ("none", "nic_down")
    repeats: int = 2
    sizes: int = 30
    iterations: int = 20
    hostname: str = "vm"
    seed: int = 1
    sweep: str = "sample"
    counters: bool = False
    """Write each node's NIC counters (every 50 ms, the faulted NIC flat while it is down)."""


@dataclass(frozen=True)
class _Captured:
    header: list[str]
    crash_tail: list[str]


def _read_captured(captured_dir: Path, hostname: str) -> _Captured:
    lines = (captured_dir / HEADER_SOURCE).read_text().splitlines()
    header = lines[1 : lines.index("#", 4) + 1 + 3]
    header = [ln for ln in header if ln.startswith("# ") or ln == "#"][:-1]
    crash = (captured_dir / CRASH_SOURCE).read_text().splitlines()
    last_row = max(i for i, ln in enumerate(crash) if ln.startswith("    67108864"))
    swap = [ln.replace(" vm ", f" {hostname} ").replace("vm:", f"{hostname}:") for ln in header]
    tail = [
        ln.replace("vm:", f"{hostname}:").replace("node vm", f"node {hostname}") for ln in crash
    ]
    return _Captured(swap, tail[last_row + 1 :])


def _base_us(size: int) -> float:
    return LATENCY_US + size / (BANDWIDTH_GBPS * 1e3)


def fault_window(cfg: SampleConfig) -> tuple[float, float]:
    """(inject, revert) in seconds after launch: inside the run, whatever its size range."""
    duration = 2 * cfg.iterations * sum(_base_us(8 << k) for k in range(cfg.sizes)) / 1e6
    at = START_DELAY_S + FAULT_AT * duration
    return at, at + FAULT_FOR * duration


def _spec(cfg: SampleConfig, mode: str | None, scenario: str, repeat: int) -> RunSpec:
    faults: tuple[FaultSpec, ...] = ()
    if scenario != "none":
        at, until = fault_window(cfg)
        trigger = Trigger(after_s=round(at, 6))
        fault = FaultSpec(kind="ib_port_down", node="node1", nic="mlx5_0", trigger=trigger)
        faults = (fault.model_copy(update={"duration_s": round(until - at, 6)}),)
    lib = "nccl" if mode is None else "r2ccl"
    return RunSpec(
        experiment=cfg.sweep,
        testbed="sample",
        library_label=lib,
        library=ComponentRef(recipe=lib, ref="v2.23.4" if mode else "v2.28.3-1"),
        benchmark=ComponentRef(recipe="nccl-tests", ref="v2.19.6"),
        collective="all_reduce",
        size_begin=8,
        size_end=8 << (cfg.sizes - 1),
        size_factor=2,
        nodes=("node0", "node1"),
        ranks_per_node=1,
        env={"R2CC_MODE": mode} if mode is not None else {},
        scenario=scenario,
        faults=faults,
        options=NcclTestsOptions(iterations=cfg.iterations, warmup=1),
        deadline_s=600.0,
        repeat=repeat,
    )


@dataclass
class _Clock:
    """Simulated time of one run, and whether (and how) the fault hits it."""

    now: float
    fault: tuple[float, float] | None
    mode: str | None
    crashed_at: float | None = None

    def factor(self) -> float | None:
        """Slowdown at `now`; None when the run dies here."""
        if self.fault is None or not self.fault[0] <= self.now < self.fault[1]:
            return 1.0
        if self.mode not in MODE_SLOWDOWN:
            return None
        return MODE_SLOWDOWN[self.mode]


def _measure(size: int, clock: _Clock, rng: random.Random, iters: int) -> Measure | None:
    base = _base_us(size)
    times = []
    for _ in range(iters):
        factor = clock.factor()
        if factor is None:
            clock.crashed_at = clock.now
            return None
        t_us = base * factor * rng.uniform(0.93, 1.12)
        times.append(t_us * 1e-6)
        clock.now += t_us * 1e-6
    mean_s = sum(times) / len(times)
    algbw = size / 1e9 / mean_s
    return Measure(mean_s * 1e6, algbw, algbw, 0, iter_times=times)


def _stamp(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).strftime(TIME_FORMAT)


def _rows(cfg: SampleConfig, clock: _Clock, rng: random.Random) -> tuple[list[str], list[Row]]:
    lines, rows = [], []
    for k in range(cfg.sizes):
        size = 8 << k
        oop = _measure(size, clock, rng, cfg.iterations)
        inp = _measure(size, clock, rng, cfg.iterations) if oop else None
        if oop is None or inp is None:
            lines.append(f"{size:12d}  {size // 4:12d}     float     sum      -1")
            break
        row = Row(size, size // 4, oop, inp)
        rows.append(row)
        lines.append(row.text(timestamps=False) + f"{_stamp(clock.now):>21s}")
    return lines, rows


def _r2cc_log(cfg: SampleConfig, clock: _Clock) -> list[str]:
    if clock.fault is None or clock.mode not in MODE_SLOWDOWN:
        return []
    host = cfg.hostname
    span = clock.fault[1] - clock.fault[0]
    at = clock.fault[0] + 0.16 * span  # detection, then failover to the backup NIC

    def line(dt: float, msg: str) -> str:
        stamp = datetime.fromtimestamp(at + dt, timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")
        return f"[{stamp}] {host}:2095:2110 [0] NCCL INFO {msg}"

    return [
        line(0.0 * span, "OOB: Broadcast HOT_REPAIR signal from rank 0 to 1 peers"),
        line(
            0.02 * span,
            f"R2CC_MODE={clock.mode} (SEND): Channel 0 will simulate disable of device 0 (mlx5_0)"
            " and use backup device 1 (mlx5_1)",
        ),
        line(0.08 * span, "Connect COMPLETED rank=1 channel=0 type=BACKUP dev=1"),
    ]


def _json(cfg: SampleConfig, spec: RunSpec, rows: list[Row], start: float) -> str:
    doc = {
        "version": 3,
        "start_time": _stamp(start),
        "args": ["all_reduce_perf", "-b", "8", "-e", str(spec.size_end), "-f", "2", "-I", "1"],
        "env": [f"{k}={v}" for k, v in spec.env.items()],
        "nccl_version": 22803,
        "config": {"minimum_bytes": 8, "maximum_bytes": spec.size_end, "step_factor": 2},
        "results": [r.as_json(cfg.iterations) for r in rows],
    }
    return json.dumps(doc)


def _provenance(cfg: SampleConfig, spec: RunSpec) -> Provenance:
    return Provenance(
        library=BuildInfo(label=spec.library_label, ref=spec.library.ref, flags=["-O3"]),
        benchmark=BuildInfo(label="nccl-tests", ref="v2.19.6", flags=["MPI=1"]),
        cuda_version="13.0.2",
        driver_version="580.159.04",
        nccl_version="2.28.3",
        mpi_version="Open MPI 4.1.6",
        hostnames=[cfg.hostname],
        env={"NCCL_DEBUG": "WARN", **spec.env},
        launch_command=f"mpirun -np 2 all_reduce_perf -b 8 -e {spec.size_end} -f 2 -S 1 -I 1",
        rerun_command=f"r2bench sweep sample.yaml --only {spec.run_id}",
    )


def _write_outputs(folder: st.RunFolder, stdout: str, stderr: str) -> None:
    folder.write_stdout(stdout)
    folder.write_stderr(stderr)


def _fault_events(
    spec: RunSpec, window: tuple[float, float] | None, clock: _Clock
) -> list[runmodel.FaultEvent]:
    if window is None:
        return []
    common = {"fault": 0, "kind": "ib_port_down", "node": "node1", "nic": "mlx5_0"}
    common["tag"] = f"r2b-{spec.run_id[-10:]}-0"
    return [
        runmodel.FaultEvent(
            action="inject", time=window[0], controller_time=window[0] + 0.01, **common
        ),
        runmodel.FaultEvent(
            action="verify", time=window[0] + 0.05, detail="phys_state 3: Disabled", **common
        ),
        runmodel.FaultEvent(
            action="revert", time=window[1], controller_time=window[1] + 0.01, **common
        ),
    ]


COUNTER_NICS = ("mlx5_0", "mlx5_1")
COUNTER_RATE = 20e9  # bytes/s per NIC and direction while the job runs


def _counters(start: float, end: float, window: tuple[float, float] | None, node: str) -> str:
    """A node's counters.tsv as the sampler writes it: a line per NIC per 50 ms."""
    lines = [
        "# r2bench counters v1 host=sample interval_ms=50",
        "time\tnic\tsource\ttx_bytes\trx_bytes\tstate",
    ]
    totals = dict.fromkeys(COUNTER_NICS, 1e9)
    t = start
    while t <= end:
        for nic in COUNTER_NICS:
            down = (
                window is not None
                and node == "node1"
                and nic == "mlx5_0"
                and window[0] <= t < window[1]
            )
            if not down:
                totals[nic] += COUNTER_RATE * 0.05
            state = "DOWN" if down else "ACTIVE"
            lines.append(f"{t:.6f}\t{nic}\tib\t{totals[nic]:.0f}\t{totals[nic]:.0f}\t{state}")
        t += 0.05
    return "\n".join(lines) + "\n"


def _finish(
    folder: st.RunFolder,
    spec: RunSpec,
    stdout: list[str],
    stderr: list[str],
    start: float,
    clock: _Clock,
) -> None:
    events = parse_events([*stdout, *stderr])
    parsed = parse_text("\n".join(stdout) + "\n")
    exit_code = 137 if clock.crashed_at is not None else 0
    launch = LaunchInfo(expected_ranks=2, hosts=tuple(spec.nodes))
    outcome = classify(exit_code, launch=launch, parsed=parsed, events=events)
    folder.write_events(events)
    end = runmodel.RunEnd(
        outcome=outcome, exit_code=exit_code, started_at=start, ended_at=clock.now + 0.3
    )
    folder.write_outcome(end)
    folder.mark_complete()


def write_run(
    store: st.RunStore, cfg: SampleConfig, captured: _Captured, spec: RunSpec, index: int
) -> str:
    """Write one complete sample run folder; returns its run id."""
    rng = random.Random(f"{cfg.seed}-{spec.run_id}")
    start = BASE_EPOCH + index * 60.0
    at, until = fault_window(cfg)
    window = (start + at, start + until) if spec.faults else None
    clock = _Clock(start + START_DELAY_S, window, spec.env.get("R2CC_MODE"))
    lines, rows = _rows(cfg, clock, rng)
    stdout = [*captured.header, *column_header(True, True), *lines]
    if clock.crashed_at is None:
        avg = sum(r.out_of_place.busbw for r in rows) / max(1, len(rows))
        stdout += footer_lines(0, avg, "all_reduce_perf")
    else:
        stamp = f"[{_stamp(clock.crashed_at)}]"
        stdout += [ln.replace(CRASH_STAMP, stamp) for ln in captured.crash_tail]
    stderr = _r2cc_log(cfg, clock)
    folder = store.start(spec, _provenance(cfg, spec))
    _write_outputs(folder, "\n".join(stdout) + "\n", "\n".join(stderr) + "\n" if stderr else "")
    folder.write_result_json(_json(cfg, spec, rows, start))
    folder.write_faults(_fault_events(spec, window, clock))
    if cfg.counters:
        for node in spec.nodes:
            folder.write_node_file(node, "counters.tsv", _counters(start, clock.now, window, node))
    _finish(folder, spec, stdout, stderr, start, clock)
    return spec.run_id


def sample_specs(cfg: SampleConfig) -> list[RunSpec]:
    """Every run of the sample sweep: modes x scenarios x repeats."""
    return [
        _spec(cfg, mode, scenario, repeat)
        for mode in cfg.modes
        for scenario in cfg.scenarios
        for repeat in range(cfg.repeats)
    ]


def write_sample_sweep(results: Path, captured_dir: Path, cfg: SampleConfig) -> st.RunStore:
    """Write the whole sample sweep under `results/<cfg.sweep>/` (complete runs are kept)."""
    store = st.RunStore(results, cfg.sweep)
    captured = _read_captured(captured_dir, cfg.hostname)
    for index, spec in enumerate(sample_specs(cfg)):
        if not store.is_complete(spec.run_id):
            write_run(store, cfg, captured, spec, index)
    return store
