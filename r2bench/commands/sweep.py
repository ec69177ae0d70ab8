"""`r2bench sweep`: the sweep of `r2bench.sweep.orchestrate`, given the tables and the report
to write at its end, or (`--dry-run`) only its plan.

Exit codes: 0 every run was carried out (whatever its outcome), 1 some run could not be
(doctor or setup failed, a node was lost, a fault was not reverted), 2 bad input (files,
options, the results folder in use, no root for the embedded testbed), 130 interrupted (the
current run's faults reverted, its job stopped). Errors are reported by `r2bench.cli.main`.
"""

from __future__ import annotations

import dataclasses
import shlex
import sys
import tempfile
import threading
from contextlib import suppress
from pathlib import Path

from rich.console import Console

from r2bench.errors import ExitCode
from r2bench.plan.build import load_inputs, make_plan, read_experiment
from r2bench.plan.model import Plan
from r2bench.plan.render import print_plan
from r2bench.runfolder.store import RunStore
from r2bench.sweep.embedded import embedded_description
from r2bench.sweep.orchestrate import SweepOptions, run_sweep


class TablesAndReport:
    """The sweep's outputs: its tables and HTML report, rebuilt from the run folders."""

    def preload(self) -> threading.Thread:
        """Import the tables and report code (pandas, plotly: about half a second of CPU)
        while the controller waits on the nodes for agents, doctor and setup, so the end of
        the sweep does not pay for it. Without the `report` extra there is nothing to load."""

        def load() -> None:
            with suppress(ImportError):
                import r2bench.report.html
                import r2bench.tables.build  # noqa: F401

        thread = threading.Thread(target=load, daemon=True, name="r2bench-preload")
        thread.start()
        return thread

    def write(self, store: RunStore, console: Console) -> list[str]:
        """Rebuild the tables and the HTML report from the run folders; return the report
        summary's sentences (what the runs show), which the sweep prints last."""
        from r2bench.report.html import build_report
        from r2bench.report.summary import summary_rows
        from r2bench.tables.build import rebuild

        if not any(store.run_dirs()):
            return []
        try:
            tables = rebuild(store.sweep_dir)
            build_report(store.sweep_dir, tables, store.sweep_dir / "report.html")
        except (OSError, ValueError) as exc:
            console.print(f"[yellow]warning: tables or report not written: {exc}[/]")
            return []
        return [row.sentence() for row in summary_rows(tables)]


def rerun_line(argv: list[str]) -> str:
    """The command line that resumes this sweep (`r2bench sweep` and the same arguments)."""
    return shlex.join(["r2bench", "sweep", *argv[2:]]) if len(argv) > 1 else "r2bench sweep"


def sweep_command(options: SweepOptions, console: Console | None = None) -> int:
    """Run every planned run of an experiment on a testbed (see the module docstring)."""
    options = dataclasses.replace(options, rerun_line=rerun_line(sys.argv))
    return run_sweep(options, TablesAndReport(), console or Console(stderr=True))


EMBEDDED_LABEL = (
    "the embedded virtual testbed {name} that `r2bench sweep` brings up ({description})"
)
"""What a plan made with no -t names as its testbed file (the description is not kept)."""


def plan_of(experiment: Path, testbed: Path | None, recipe_dirs: list[Path] | None = None) -> Plan:
    """The plan of an experiment on a testbed file, or with no testbed on the embedded one as
    `sweep` would bring it up (described from the experiment's `virtual_testbed` section;
    nothing is brought up)."""
    if testbed is not None:
        return make_plan(load_inputs(experiment, testbed, recipe_dirs))
    loaded = read_experiment(experiment)
    with tempfile.TemporaryDirectory() as tmp:
        description = embedded_description(Path(tmp), loaded.experiment.virtual_testbed)
        inputs = load_inputs(loaded, description, recipe_dirs)
        plan = make_plan(inputs)
    shape = inputs.testbed.description.removeprefix("virtual testbed: ")
    label = EMBEDDED_LABEL.format(name=plan.testbed, description=shape)
    return plan.model_copy(update={"testbed_file": label})


def embedded_note(plan: Plan) -> str:
    """The line that says a plan made with no -t is of the embedded testbed, and its shape."""
    return f"testbed: {plan.testbed_file} (plan brings nothing up; -t TESTBED.yaml plans on yours)"


def dry_run(options: SweepOptions) -> int:
    """`--dry-run`: the plan, exactly as `r2bench plan --commands` shows it (with no testbed
    given: the embedded one as it would be brought up; nothing is brought up)."""
    plan = plan_of(options.experiment, options.testbed, options.recipe_dirs)
    if options.testbed is None:
        Console(stderr=True).print(embedded_note(plan), markup=False, highlight=False)
    print_plan(plan, Console(), commands=True)
    return ExitCode.OK
