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
import signal
import sys
import threading
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from r2bench.commands.options import ExperimentArg
from r2bench.errors import ExitCode
from r2bench.textsafe import printable

if TYPE_CHECKING:  # imported where used: `r2bench sweep --help` loads no ssh, plan or sweep code
    from r2bench.runfolder.store import RunStore
    from r2bench.sweep.orchestrate import SweepOptions

SWEEP_HELP = """Run an experiment end to end and write its report.

Plan, doctor, setup (cached), then every run (preflight, launch, faults in flight, deadline, revert and verify, collect, record), a final heal, the tables and the HTML report. `--dry-run` (or `r2bench plan EXP.yaml --commands`) shows the plan and runs nothing.

With no --testbed it runs on the embedded virtual testbed (2 nodes x 4 data NICs, each capped at 250 Mbit/s, in network namespaces; needs root): brought up if needed, taken down at the end unless --keep-testbed. One sweep at a time holds it: a second one refuses at once, naming the holder (pid, results folder, since when), or with --wait-testbed waits for it; it never shares it.

Running it again resumes: complete runs are skipped, incomplete ones redone; --rerun failed also redoes runs whose outcome was not ok. Ctrl-C reverts the current run's faults, stops its job on every node, marks it interrupted and writes the tables.

Exit codes: 0 every run ended (whatever its outcome), 1 some run could not be carried out (doctor or setup failed, node lost, revert failed), 2 bad input (or the embedded testbed held by another sweep), 130 interrupted.

Example: [bold]r2bench sweep experiments/quickstart.yaml[/] """


def command(
    experiment: ExperimentArg,
    testbed: Annotated[
        Path | None,
        typer.Option(
            "--testbed",
            "-t",
            help="Testbed YAML (default: the embedded virtual one).",
            show_default=False,
            metavar="TESTBED.yaml",
        ),
    ] = None,
    results: Annotated[
        Path, typer.Option("--results", help="Results root folder.", metavar="DIR")
    ] = Path("results"),
    rerun: Annotated[
        str | None,
        typer.Option(
            "--rerun", help="`failed`: redo complete runs that were not ok.", metavar="failed"
        ),
    ] = None,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="One line per run (CI logs).")
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Only show the plan (`r2bench plan --commands`).")
    ] = False,
    keep_testbed: Annotated[
        bool,
        typer.Option(
            "--keep-testbed",
            help="Leave the embedded testbed up (its testbed file stays, for -t and doctor).",
        ),
    ] = False,
    wait_testbed: Annotated[
        float,
        typer.Option(
            "--wait-testbed",
            help="While another sweep holds the embedded testbed, wait up to this long for "
            "it (default: refuse at once, naming it).",
            metavar="SECONDS",
            min=0,
            show_default=False,
        ),
    ] = 0.0,
    skip_setup: Annotated[
        bool, typer.Option("--skip-setup", help="Do not build (the nodes already have it).")
    ] = False,
    skip_doctor: Annotated[
        bool,
        typer.Option(
            "--skip-doctor", help="Do not stop on failed doctor checks (runs may be skewed)."
        ),
    ] = False,
    recipes: Annotated[
        Path | None,
        typer.Option(
            "--recipes",
            help="Folder of recipe YAMLs (default: plugin/), e.g. recipes whose git URLs point "
            "at local mirrors on an offline host.",
            metavar="DIR",
        ),
    ] = None,
) -> None:
    from r2bench.sweep.orchestrate import SweepOptions

    console = Console(stderr=True)
    if rerun not in (None, "failed"):
        console.print(f"--rerun takes `failed`, not {rerun!r}", style="red")
        raise typer.Exit(ExitCode.USAGE)
    options = SweepOptions(
        experiment,
        testbed,
        results,
        rerun == "failed",
        quiet,
        keep_testbed,
        skip_setup,
        skip_doctor,
        recipes,
        wait_testbed,
    )
    # The sweep handles Ctrl-C itself while it runs (r2bench.sweep.interrupts). Before its
    # handler is in place and after it is gone, Ctrl-C is ignored, so the process never dies of
    # a KeyboardInterrupt half-way through its clean-up or its exit.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise typer.Exit(show_plan(options) if dry_run else sweep_command(options, console))


command.__doc__ = SWEEP_HELP  # its help: paragraphs written out, not reflowed from a docstring


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
        if not any(store.run_dirs()):
            return []
        from r2bench.extras import require_report_extra

        try:
            # first: without the extra, the imports below fail with pandas' ImportError, not
            # MissingExtra's sentence naming what to install
            require_report_extra("the tables and the report")
            from r2bench.report.html import build_report
            from r2bench.report.summary import summary_rows
            from r2bench.tables.build import rebuild

            tables = rebuild(store.sweep_dir)
            build_report(store.sweep_dir, tables, store.sweep_dir / "report.html")
        except (OSError, ValueError) as exc:
            warning = printable(f"warning: tables or report not written: {exc}")
            console.print(warning, style="yellow", markup=False, highlight=False, soft_wrap=True)
            return []
        return [row.sentence() for row in summary_rows(tables)]


def rerun_line(argv: list[str]) -> str:
    """The command line that resumes this sweep (`r2bench sweep` and the same arguments)."""
    return shlex.join(["r2bench", "sweep", *argv[2:]]) if len(argv) > 1 else "r2bench sweep"


def sweep_command(options: SweepOptions, console: Console | None = None) -> int:
    """Run every planned run of an experiment on a testbed (see the module docstring)."""
    from r2bench.sweep.orchestrate import run_sweep

    options = dataclasses.replace(options, rerun_line=rerun_line(sys.argv))
    return run_sweep(options, TablesAndReport(), console or Console(stderr=True))


def show_plan(options: SweepOptions) -> int:
    """`--dry-run`: the plan, exactly as `r2bench plan --commands` shows it (with no testbed
    given: the embedded one as it would be brought up; nothing is brought up)."""
    from r2bench.commands.plan import embedded_note, plan_of
    from r2bench.plan.render import print_plan

    plan = plan_of(options.experiment, options.testbed, options.recipe_dirs)
    if options.testbed is None:
        Console(stderr=True).print(embedded_note(plan), markup=False, highlight=False)
    print_plan(plan, Console(), commands=True)
    return ExitCode.OK
