"""Training run folders for the tests: a real run folder of results/examples/gpu-netns-link-fault
(its spec, fault events and NIC counters: node1's nic3 taken down mid-run, a real cut) with its
output replaced by a training workload's, written with `train_format`'s own dataclasses.

`TrainingText` describes the log (updates, their times and losses, what differs from the
baseline's); `training_folder` writes it into a copy of a real run folder, whose spec names the
library, scenario, repeat and `training:` options. The updates are timed on rank 0's clock
(the controller clock plus the run's measured offset), so a log can place an update around the
real fault.
"""

from __future__ import annotations

import json
import math
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from r2bench.runfolder import runmodel
from r2bench.workloads.train_format import TrainEnd, TrainStart, UpdateLine
from tests.support import paths

SWEEP = paths.REPO / "results" / "examples" / "gpu-netns-link-fault"
HIT = SWEEP / "all_reduce-stock-nic3-down-3s-r1-8b9875860e"
"""node1/nic3 link_down for 3 s while an AllReduce ran: its counters show the cut."""
FAULT_FREE = SWEEP / "all_reduce-stock-none-r0-4695f1b7bc"
OPTIONS = {"model": "tiny", "updates": 100, "seed": 42, "digest_every": 10, "baseline": "nccl"}
STEP_S = 0.05
TOKENS = 512
"""Tokens of one update (the tokens/s logged are these over the step time)."""
NCCL_LINES = (
    "node0:20271:20271 [0] NCCL INFO NCCL version 2.28.9+cuda13.0",
    "node1:20272:20272 [0] NCCL INFO NCCL version 2.28.9+cuda13.0",
)


def base_loss(update: int) -> float:
    """The baseline's loss at an update (a float32 value, as the workloads log it)."""
    value = 5.0 * math.exp(-update / 40) + 1.0 + 0.01 * math.sin(update)
    return float(json.loads(json.dumps(value)))


def base_norm(update: int) -> float:
    return 2.0 / math.sqrt(update)


def digest_at(update: int, salt: str = "") -> str:
    return f"{update:08x}{salt}".ljust(64, "0")[:64]


@dataclass
class TrainingText:
    """A training log to write (see the module docstring)."""

    updates: int = 100
    first_start: float = 1795614000.0
    """Rank 0's wall clock when update 1 started."""
    step_s: dict[int, float] = field(default_factory=dict)
    """Step times other than STEP_S."""
    idle_before: dict[int, float] = field(default_factory=dict)
    """Seconds rank 0 spent between the previous update and these."""
    loss_delta: dict[int, float] = field(default_factory=dict)
    """Added to the baseline's loss at these updates."""
    loss_bits: dict[int, int] = field(default_factory=dict)
    """The baseline's loss moved by this many ulps at these updates."""
    logged: int | None = None
    """Updates printed (fewer: the job died); None: all of them, and the end line."""
    half_line: bool = False
    """The last printed line cut short (a job killed mid-print)."""
    disagree_at: int | None = None
    final_delta: float = 0.0
    eval_delta: float = 0.0
    workload: str = "train_emulated"
    prefix: str = "[1,0]<stdout>:"
    repeat_update: int | None = None
    """Print this update a second time, later, with another loss (a repeated line)."""

    def lines(self) -> list[str]:
        out = [TrainStart(
            workload=self.workload, model="tiny", parameters=1000, ranks=2, seed=42,
            updates=self.updates, batch=8, seq_len=64, allreduce_bytes=4000,
            library="nccl", digest_every=10,
        ).text(), *NCCL_LINES]  # fmt: skip
        t = self.first_start
        count = self.updates if self.logged is None else self.logged
        for n in range(1, count + 1):
            step = self.step_s.get(n, STEP_S)
            t += self.idle_before.get(n, 0.0)
            loss = base_loss(n) + self.loss_delta.get(n, 0.0)
            for _ in range(self.loss_bits.get(n, 0)):
                loss = math.nextafter(loss, math.inf)
            digest = digest_at(n) if n % 10 == 0 else None
            agree = None if digest is None else n != self.disagree_at
            line = UpdateLine(
                n, t, t + step, step, loss, TOKENS / step, base_norm(n), 4000, digest, agree
            )
            out.append(line.text())
            if n == self.repeat_update:
                again = line
            t += step
        if self.repeat_update is not None:  # printed again, later, with another loss
            out.append(UpdateLine(**{**again.__dict__, "loss": 99.0}).text())
        if self.logged is None:
            final = sum(base_loss(n) for n in range(self.updates - 9, self.updates + 1)) / 10
            out.append(
                TrainEnd(self.updates, final + self.final_delta, 2.5 + self.eval_delta).text()
            )
        out = [f"{self.prefix}{line}" if line.startswith("#") else line for line in out]
        if self.half_line:
            out[-1] = out[-1][: len(out[-1]) // 2]
        return out


def fault_applied(run_dir: Path = HIT) -> float:
    """When the real fault was applied (controller clock)."""
    inject = next(f for f in runmodel.load_run(run_dir).faults if f.action == "inject")
    assert inject.applied_at is not None and inject.clock_offset_s is not None
    return inject.applied_at - inject.clock_offset_s


def launch_offset(run_dir: Path = HIT) -> float:
    inject = next(f for f in runmodel.load_run(run_dir).faults if f.action == "inject")
    return inject.clock_offset_s or 0.0


def training_folder(
    sweep: Path,
    name: str,
    text: TrainingText,
    *,
    library: str = "r2ccl",
    faulted: bool = False,
    repeat: int = 0,
    stderr: str = "",
    options: dict[str, object] | None = None,
    complete: bool = True,
) -> Path:
    """A training run folder `sweep/name`, a copy of the real run folder with the fault
    (`faulted`) or without, its output `text`'s lines."""
    src = HIT if faulted else FAULT_FREE
    dst = sweep / name
    shutil.copytree(src, dst)
    for extra in ("result.json", "events.jsonl", "stdout.times", "stderr.times", "outcome.json"):
        (dst / extra).unlink(missing_ok=True)
    if not complete:
        (dst / "COMPLETE").unlink()
    spec = json.loads((dst / "spec.json").read_text())
    spec.update(
        run_id=name, library_label=library, repeat=repeat, collective="train",
        scenario="nic3-down-3s" if faulted else "none",
        training=dict(OPTIONS if options is None else options),
    )  # fmt: skip
    (dst / "spec.json").write_text(json.dumps(spec, indent=2))
    (dst / "stdout.txt").write_text("\n".join(text.lines()) + ("" if text.half_line else "\n"))
    (dst / "stderr.txt").write_text(stderr)
    return dst


def around_the_fault(hit: int, **kwargs: object) -> TrainingText:
    """A log whose update `hit` starts 0.02 s before the real fault was applied."""
    start = fault_applied() + launch_offset() - 0.02 - (hit - 1) * STEP_S
    return TrainingText(first_start=start, **kwargs)  # type: ignore[arg-type]
