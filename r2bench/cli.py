"""The r2bench command line (thin: each command delegates to a module)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

import r2bench
from r2bench.config.errors import ConfigError

app = typer.Typer(
    name="r2bench",
    help="Fault-injection and benchmarking harness for R2CCL and NCCL.\n\n"
    "Typical flow: [bold]testbed up[/] (or write a testbed file), [bold]plan[/] to see every "
    "command a sweep will run, [bold]setup[/], [bold]sweep[/], [bold]report[/].",
    no_args_is_help=True,
    rich_markup_mode="rich",
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

EXIT_USAGE = 2


@contextmanager
def config_errors(console: Console) -> Iterator[None]:
    """Print ConfigError issues (file:line:col: field: message) and exit 2, never a traceback."""
    try:
        yield
    except ConfigError as error:
        for issue in error.issues:
            console.print(issue.render(), markup=False, highlight=False, soft_wrap=True)
        count = len(error.issues)
        console.print(
            f"{count} problem{'s' if count != 1 else ''} found; nothing was run.", style="red"
        )
        raise typer.Exit(EXIT_USAGE) from None


def _stderr() -> Console:
    return Console(stderr=True)


ExperimentArg = Annotated[Path, typer.Argument(help="Experiment YAML file.", show_default=False)]
TestbedOpt = Annotated[
    Path, typer.Option("--testbed", "-t", help="Testbed YAML file.", show_default=False)
]


@app.command()
def plan(
    experiment: ExperimentArg,
    testbed: TestbedOpt,
    commands: Annotated[
        bool, typer.Option("--commands", "-c", help="Show every command of every run.")
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the plan as JSON for tools.")
    ] = False,
) -> None:
    """Expand an experiment into runs and show exactly what each will execute. Touches nothing.

    Exit codes: 0 ok, 2 invalid experiment or testbed file (every problem is listed with its
    file, line, column and field).
    """
    from r2bench.plan.build import load_inputs, make_plan
    from r2bench.plan.render import plan_json, print_plan

    with config_errors(_stderr()):
        result = make_plan(load_inputs(experiment, testbed))
    if as_json:
        sys.stdout.write(plan_json(result) + "\n")
    else:
        print_plan(result, Console(), commands)


@app.command()
def schema(
    out_dir: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="Write testbed/experiment/recipe .schema.json here."),
    ] = None,
) -> None:
    """JSON Schema of the testbed, experiment and recipe files (for editor completion).

    Without --out, prints one JSON object {"testbed": ..., "experiment": ..., "recipe": ...}.
    """
    from r2bench.config.schema import all_schemas

    schemas = all_schemas()
    if out_dir is None:
        sys.stdout.write(json.dumps(schemas, indent=2) + "\n")
        return
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, body in schemas.items():
        path = out_dir / f"{name}.schema.json"
        path.write_text(json.dumps(body, indent=2) + "\n")
        Console().print(f"wrote {path}")


@app.command()
def setup(
    experiment: ExperimentArg,
    testbed: TestbedOpt,
    force: Annotated[
        bool, typer.Option("--force", help="Rebuild even when nothing changed.")
    ] = False,
    jobs: Annotated[
        int | None, typer.Option("--jobs", "-j", help="Parallel make jobs (default: cores).")
    ] = None,
    recipes: Annotated[
        Path | None, typer.Option("--recipes", help="Folder of recipe YAMLs (default: plugin/).")
    ] = None,
    log_dir: Annotated[
        Path | None, typer.Option("--log-dir", help="Build logs (default: results/setup).")
    ] = None,
    timeout: Annotated[
        float | None, typer.Option("--timeout", help="Seconds allowed per build step.")
    ] = None,
) -> None:
    """Fetch and build what an experiment needs (library under test, nccl-tests) on every node,
    in parallel, cached: an unchanged second setup does nothing and says so.

    Exit codes: 0 built or up to date, 1 a build failed on some node (its first compiler error,
    the known cause and the log path are shown), 2 invalid experiment or testbed file.
    """
    from r2bench.setup.commands import setup_command

    with config_errors(_stderr()):
        code = setup_command(
            experiment,
            testbed,
            force,
            jobs,
            recipes=recipes,
            log_dir=log_dir,
            build_timeout_s=timeout,
        )
    raise typer.Exit(code)


@app.command()
def doctor(
    testbed: TestbedOpt,
    as_json: Annotated[bool, typer.Option("--json", help="Print the checks as JSON.")] = False,
    discover: Annotated[
        bool,
        typer.Option(
            "--discover",
            help="Fill in GPUs, RDMA devices, ports, netdevs, link layers and the management "
            "NIC from the nodes; show the diff and write the testbed file back.",
        ),
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="With --discover: show the diff, write nothing.")
    ] = False,
) -> None:
    """Check that every node is ready: reachable, same OS/driver/MPI, GPUs and NICs present and
    up, passwordless ssh between nodes, clocks in sync, builds present, no stray workload or
    active fault. Each failed check says how to fix it.

    Exit codes: 0 all checks passed (warnings allowed), 1 a check failed, 2 invalid testbed file.
    With --discover: 0 written (or nothing to change), 1 a node could not be asked.
    """
    from r2bench.doctor.cli import doctor_command

    if discover:
        from r2bench.testbeds.discover import discover_command

        with config_errors(_stderr()):
            raise typer.Exit(discover_command(testbed, dry_run))

    with config_errors(_stderr()):
        code = doctor_command(testbed, as_json)
    raise typer.Exit(code)


@app.command()
def parse(
    files: Annotated[
        list[Path],
        typer.Argument(help="nccl-tests text or -J JSON outputs, NCCL logs.", show_default=False),
    ],
    as_json: Annotated[
        bool, typer.Option("--json", help="One JSON object per file (JSON Lines).")
    ] = False,
) -> None:
    """Parse nccl-tests outputs and NCCL/R2CC logs: result rows, events and the run's outcome
    (ok, wrong_results, crashed, timeout, launch_failed...) with the lines that justify it.

    Exit codes: 0 parsed (a crashed or hung run is data, not an error), 2 a file could not be read.
    """
    from r2bench.records.commands import parse_command

    raise typer.Exit(parse_command(files, as_json))


@app.command("import")
def import_logs(
    directory: Annotated[
        Path, typer.Argument(help="Folder of existing nccl-tests logs.", show_default=False)
    ],
    sweep: Annotated[
        str | None, typer.Option("--sweep", help="Sweep name (default: the folder's name).")
    ] = None,
    results: Annotated[Path, typer.Option("--results", help="Results root.")] = Path("results"),
) -> None:
    """Turn a folder of existing nccl-tests logs (text and/or -J JSON, paired by file stem)
    into a results sweep, one run folder per log, so `r2bench report` works on them.

    Exit codes: 0 imported, 2 DIR is not a folder.
    """
    from r2bench.records.commands import import_command

    raise typer.Exit(import_command(directory, sweep, results))


@app.command()
def report(
    sweep_dir: Annotated[
        Path, typer.Argument(help="A sweep folder, e.g. results/my-sweep.", show_default=False)
    ],
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="HTML file (default: SWEEP_DIR/report.html).")
    ] = None,
    fmt: Annotated[
        str | None, typer.Option("--format", help="Also write each figure as png, svg or pdf.")
    ] = None,
) -> None:
    """Rebuild a sweep's tables (Parquet + CSV) and write one self-contained HTML report that
    works offline: busbw vs size per R2CC_MODE with spread over repeats, overhead vs the
    no-fault baseline, per-iteration timelines with fault windows shaded and R2CC events
    marked, the outcome matrix, and the sweep's provenance.

    Exit codes: 0 written (if a static --format cannot be exported, the HTML is still written and
    a warning says why), 2 missing sweep folder, unknown format or unwritable output.
    """
    from r2bench.records.commands import report_command

    raise typer.Exit(report_command(sweep_dir, out, fmt))


@app.command()
def version() -> None:
    """Print r2bench's version."""
    typer.echo(f"r2bench {r2bench.__version__}")


def _mount_subcommands() -> None:
    from r2bench.virtual.cli import testbed_app

    app.add_typer(
        testbed_app,
        name="testbed",
        help="Create, inspect and remove testbeds (virtual: network namespaces).",
    )


_mount_subcommands()


def _mount_testbed_tools() -> None:
    """cloudlab testbed, testbed from-slurm, figures (modules under cloudlab/, testbeds/,
    figures/)."""
    from r2bench.cloudlab.cli import cloudlab_app
    from r2bench.figures.cli import figures_command
    from r2bench.testbeds.cli import from_slurm_command
    from r2bench.virtual.cli import testbed_app

    app.add_typer(cloudlab_app, name="cloudlab", help="CloudLab: a testbed file from a manifest.")
    testbed_app.command("from-slurm")(from_slurm_command)
    app.command("figures")(figures_command)


_mount_testbed_tools()


def _not_implemented(name: str, summary: str) -> Callable[[], None]:
    def command() -> None:
        _stderr().print(f"r2bench {name}: not implemented yet.", style="red")
        raise typer.Exit(EXIT_USAGE)

    command.__doc__ = f"{summary} [red](not implemented yet)[/]"
    return command


for _name, _summary in (
    ("sweep", "Run every planned run: launch, inject faults, record, heal."),
    ("heal", "Revert every r2bench fault still active on the testbed."),
):
    app.command(_name)(_not_implemented(_name, _summary))


def main() -> None:
    """Console-script entry point."""
    app()
