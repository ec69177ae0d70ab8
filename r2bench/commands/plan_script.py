"""`r2bench plan --script DIR`: one bash script per node with everything the plan runs there.

Each script holds, in order and with comments: the setup (fetch and build lines of every
component built on that node), then one section per run with the launch line (on the launch
node) and the fault commands (on the faulted node) at their planned times.

Scripts of different nodes keep in step by time alone: every run section lasts exactly the
run's deadline on every node, so starting all scripts at the same moment (e.g. `parallel-ssh`,
or tmux with synchronised panes) lines the faults up with the launches. Faults planned after the
first result are injected after the launch here (r2bench waits for the first result itself).
"""

from __future__ import annotations

import os
from pathlib import Path

from r2bench.plan.model import FaultStep, NodeCommand, Plan, PlannedRun
from r2bench.safeio import atomic_write
from r2bench.shellwords import comment, quote, seconds

COPY_PREFIX = "copy from controller: "

_PRELUDE = """#!/usr/bin/env bash
# Written by `r2bench plan --script` for node {node} of sweep {experiment} on testbed {testbed}.
# Experiment: {experiment_file}   Testbed: {testbed_file}
# Start the scripts of every node at the same moment: each run section lasts the run's deadline.
# `r2bench sweep` does all of this itself, and records, verifies and always reverts; this
# script is for reading, and for running a plan by hand.
set -uo pipefail

as_root() {{  # run a command line as root (directly when already root)
  if [ "$(id -u)" = 0 ]; then bash -c "$1"; else sudo -n bash -c "$1"; fi
}}

section_start=0
start_section() {{ section_start=$(date +%s.%N); }}
at() {{  # sleep until $1 seconds after the start of the current section
  local wait
  wait=$(awk -v s="$section_start" -v a="$1" -v n="$(date +%s.%N)" \\
    'BEGIN {{ d = s + a - n; print (d > 0 ? d : 0) }}')
  sleep "$wait"
}}
"""


def _line(command: NodeCommand | str, root: bool = False) -> str:
    text = command if isinstance(command, str) else command.command
    if root or (isinstance(command, NodeCommand) and command.root):
        return f"as_root {quote(text)}"
    return text


def comment_line(text: str) -> str:
    """A `#` line of the script holding `text` (free text is escaped: it stays a comment)."""
    return f"# {comment(text)}"


def _setup_lines(plan: Plan, node: str) -> list[str]:
    lines = ["", "# ===== setup (r2bench setup does this, cached) ====="]
    steps = [s for s in plan.setup if node in s.nodes]
    if not steps:
        lines.append("# nothing to build on this node")
    lines.append(
        "# fault scripts: `r2bench sweep` copies r2bench's injectors/ folder to the path the "
        "fault commands below use"
    )
    for step in steps:
        lines.append(comment_line(f"--- {step.component}: {step.recipe} @ {step.ref or 'local'}"))
        for command in step.commands:
            if command.startswith(COPY_PREFIX):
                source, _, target = command.removeprefix(COPY_PREFIX).partition(" -> ")
                lines.append(comment_line(f"copy from the controller: {source} -> {target}"))
                lines.append(
                    comment_line(f"  e.g. on the controller: rsync -a SOURCE/ {node}:{target}/")
                )
            else:
                lines.append(command)
    return lines


def _fault_actions(fault: FaultStep, deadline: float) -> list[tuple[float, str, str]]:
    """(seconds after launch, comment, command) of one fault's injects and reverts."""
    out = []
    period = fault.period_s or 0.0
    for cycle in range(max(1, fault.cycles)):
        shift = cycle * period
        what = f"fault {fault.index} ({fault.kind} on {fault.nic})"
        if fault.cycles > 1:
            what += f", cycle {cycle}"
        since = "" if fault.since == "launch" else " (planned after the first result)"
        out.append(
            (fault.inject_after_s + shift, f"inject {what}{since}", _line(fault.inject, True))
        )
        revert_at = fault.heal_after_s + shift if fault.heal_after_s is not None else deadline
        out.append((min(revert_at, deadline), f"revert {what}", _line(fault.revert, True)))
    return out


def _run_lines(run: PlannedRun, index: int, total: int, node: str) -> list[str]:
    spec = run.spec
    deadline = float(spec.deadline_s)
    lines = [
        "",
        comment_line(f"===== run {index}/{total}: {spec.run_id}"),
        comment_line(
            f"{spec.collective}, library {spec.library_label}, scenario {spec.scenario}, "
            f"repeat {spec.repeat}; launched on {run.launch.node}; deadline {deadline:g} s"
        ),
        "start_section",
    ]
    launches = run.launch.node == node
    if launches:
        out = quote(run.run_dir)
        sudo = "sudo -n " if run.launch.root else ""
        lines += [
            f"mkdir -p {out}",
            f"{sudo}timeout --signal=TERM --kill-after=10 {seconds(deadline)} "
            f"bash -c {quote(run.launch.command)} >{out}/stdout.txt 2>{out}/stderr.txt &",
            "job=$!",
        ]
    actions = sorted(
        (a for f in run.faults if f.inject.node == node for a in _fault_actions(f, deadline)),
        key=lambda a: a[0],
    )
    for when, note, command in actions:
        lines += [f"at {seconds(when)}  # {comment(note)}", command]
    if not launches and not actions:
        lines.append("# nothing runs on this node in this run")
    if launches:
        lines.append('wait "$job"; echo "run exit code: $?"')
    lines.append(f"at {seconds(deadline)}  # the section ends at the run's deadline on every node")
    return lines


def plan_nodes(plan: Plan) -> list[str]:
    """Every node the plan touches, in first-use order."""
    seen: dict[str, None] = {}
    for step in plan.setup:
        seen.update(dict.fromkeys(step.nodes))
    for run in plan.runs:
        seen[run.launch.node] = None
        seen.update(dict.fromkeys(f.inject.node for f in run.faults))
    return list(seen)


def node_script(plan: Plan, node: str) -> str:
    """The bash script of one node."""
    lines = [
        _PRELUDE.format(
            node=comment(node),
            experiment=comment(plan.experiment),
            testbed=comment(plan.testbed),
            experiment_file=comment(plan.experiment_file),
            testbed_file=comment(plan.testbed_file),
        ).rstrip("\n")
    ]
    lines += _setup_lines(plan, node)
    total = len(plan.runs)
    for index, run in enumerate(plan.runs, start=1):
        lines += _run_lines(run, index, total, node)
    return "\n".join(lines) + "\n"


def write_scripts(plan: Plan, out_dir: Path) -> list[Path]:
    """Write `<out_dir>/<node>.sh` (executable) for every node; returns the paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for node in plan_nodes(plan):
        path = out_dir / f"{node.replace(os.sep, '_')}.sh"
        # atomic: a failed write (a full disk) never leaves half a script that still runs
        atomic_write(path, node_script(plan, node), durable=False, mode=0o755)
        paths.append(path)
    return paths
