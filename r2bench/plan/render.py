"""Show a Plan to people (rich tables) and to tools (JSON)."""

from __future__ import annotations

from dataclasses import dataclass

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from r2bench.config.types import format_size
from r2bench.plan.model import FaultStep, Plan, PlannedRun
from r2bench.textsafe import markup_safe, printable


def plan_json(plan: Plan) -> str:
    """The plan as indented JSON (every run with its id, spec and commands)."""
    return plan.model_dump_json(indent=2)


def runs_table(plan: Plan, width: int | None = None) -> Table:
    """One row per run: id, library, collective, sizes, swept variables, scenario, faults.

    With `width` (the console's) and more columns than fit in it, each run becomes one cell
    of a few lines instead (id; library, collective, sizes, scenario; the swept variables as
    NAME=value; the faults), so a narrow terminal shows every value rather than columns
    squeezed to nothing."""
    variables = sorted({k for run in plan.runs for k in run.spec.env} - _fixed_env(plan))
    title = f"{plan.experiment} on {plan.testbed}: {len(plan.runs)} runs"
    rows = [_RunCells.of(run, variables) for run in plan.runs]
    wide = Table(title=title, expand=False)
    for header in ("run id", "library", "collective", "sizes", *variables, "scenario", "faults"):
        wide.add_column(header, overflow="fold", no_wrap=header == "run id")
    for row in rows:
        cells = (row.run_id, row.library, row.collective, row.sizes, *row.values.values())
        wide.add_row(*(Text(cell) for cell in (*cells, row.scenario, row.faults)))
    if width is None or Console(width=100_000).measure(wide).maximum <= width:
        return wide
    stacked = Table(title=title, expand=False, show_lines=True)
    stacked.add_column("run: library · collective · sizes · scenario; settings; faults")
    for row in rows:
        settings = "  ".join(f"{name}={value}" for name, value in row.values.items())
        lines = [f"{row.library} · {row.collective} · {row.sizes} · scenario {row.scenario}"]
        lines += [settings] if settings else []
        lines.append(f"faults: {row.faults}")
        stacked.add_row(Text(row.run_id, style="bold") + Text("\n" + "\n".join(lines)))
    return stacked


@dataclass(frozen=True)
class _RunCells:
    """What the runs table shows of one run, as text."""

    run_id: str
    library: str
    collective: str
    sizes: str
    values: dict[str, str]  # swept variable -> value (`-` when unset)
    scenario: str
    faults: str

    @classmethod
    def of(cls, run: PlannedRun, variables: list[str]) -> _RunCells:
        spec = run.spec
        faults = ", ".join(f"{f.kind} {f.node}/{f.nic} @{_at(f)}{_span(f)}" for f in run.faults)
        sizes = f"{format_size(spec.size_begin)}..{format_size(spec.size_end)}"
        if spec.training is not None:  # a training job has no sizes: its model and length
            sizes = f"{spec.training.model} x {spec.training.updates} updates"
        if spec.recovery is not None:
            sizes += f", recovery {spec.recovery.strategy.value}"
        return cls(
            spec.run_id, spec.library_label, spec.collective, sizes,
            {v: printable(spec.env.get(v, "-")) for v in variables}, spec.scenario,
            printable(faults or "-"),
        )  # fmt: skip


def _fixed_env(plan: Plan) -> set[str]:
    """Variables with one value across every run (shown in --commands, not as columns)."""
    if not plan.runs:
        return set()
    first = plan.runs[0].spec.env
    return {k for k, v in first.items() if all(r.spec.env.get(k) == v for r in plan.runs)}


def setup_panel(plan: Plan) -> Panel:
    """Build commands, once per component and version, on every node."""
    parts = []
    for step in plan.setup:
        title = Text(
            printable(f"{step.recipe} @ {step.ref or 'local'} on {', '.join(step.nodes)}"),
            style="bold",
        )
        parts.append(title)
        parts.extend(Text("  $ " + printable(command)) for command in step.commands)
    return Panel(Group(*parts) if parts else Text("nothing to build"), title="setup")


def run_panel(run: PlannedRun) -> Panel:
    """Exact commands of one run: the launch line and each fault's inject/revert."""
    parts = [
        Text(f"on {run.launch.node}:", style="bold"),
        Text("  $ " + printable(run.launch.command)),
    ]
    for fault in run.faults:
        since = fault.anchor.replace("_", " ") + ("'s line" if fault.since == "update" else "")
        heal = (
            f"at {fault.heal_after_s:g} s"
            if fault.heal_after_s is not None
            else "when the run ends"
        )
        parts.append(
            Text(
                f"fault {fault.index}: {fault.kind} on {fault.node}/{fault.nic}"
                + (f" (runs on {fault.inject.node})" if fault.inject.node != fault.node else ""),
                style="bold yellow",
            )
        )
        parts.append(
            Text(
                f"  inject at {fault.inject_after_s:g} s after {since} (node reverts by itself after {fault.lease_s:g} s):"
            )
        )
        parts.append(Text(f"  {fault.inject.node}$ {printable(_root(fault.inject.command))}"))
        parts.append(Text(f"  revert {heal}:"))
        parts.append(Text(f"  {fault.revert.node}$ {printable(_root(fault.revert.command))}"))
    return Panel(Group(*parts), title=run.spec.run_id, title_align="left")


def _root(command: str) -> str:
    """A root command, still a line that can be pasted into a root shell."""
    return f"{command}  # as root"


def print_plan(plan: Plan, console: Console, commands: bool) -> None:
    """The human view: runs table, and with `commands` the setup and every run's commands."""
    console.print(runs_table(plan, console.width))
    for note in plan.notes:
        console.print(f"[yellow]note:[/] {markup_safe(note)}")
    if commands:
        console.print(setup_panel(plan))
        for run in plan.runs:
            console.print(run_panel(run))


def _at(fault: FaultStep) -> str:
    """When a fault comes: `3s`, or `update 400` (+ seconds after its line)."""
    if fault.at_update is None:
        return f"{fault.inject_after_s:g}s"
    after = f"+{fault.inject_after_s:g}s" if fault.inject_after_s else ""
    return f"update {fault.at_update}{after}"


def _span(fault: FaultStep) -> str:
    """How long a fault stays, and its flap cycles: ` for 3s x5 every 10s`."""
    out = f" for {fault.heal_after_s - fault.inject_after_s:g}s" if fault.heal_after_s else ""
    if fault.cycles > 1:
        out += f" x{fault.cycles} every {fault.period_s:g}s"
    return out
