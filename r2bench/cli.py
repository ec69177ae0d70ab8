"""The r2bench command line (thin: each command delegates to a module).

Start-up is kept light, so `r2bench --version` and `--help` answer at once: each command imports
what it needs inside its body, and the `testbed` and `cloudlab` groups (the virtual testbed,
ssh, CloudLab) are imported only when one of them is called (`LAZY_GROUPS`).
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from typer.core import TyperGroup

from r2bench import version_line
from r2bench.commands.failures import debug_requested, report_error
from r2bench.commands.figures import figures_command
from r2bench.errors import ExitCode, InputError
from r2bench.textsafe import prepare_streams, printable

# Commands in the order of a user's work; commands added later are listed after these.
WORKFLOW_ORDER = (
    *("testbed", "doctor", "plan", "setup", "sweep", "heal", "inject", "revert"),
    *("parse", "import", "report", "compare", "figures", "cloudlab", "schema", "version"),
)


@dataclass(frozen=True)
class LazyGroup:
    """A command group declared in `module` as the typer app `attribute`, imported only when
    the group is called; `help` is its line in `r2bench --help`."""

    module: str
    attribute: str
    help: str

    def load(self, name: str, rich_markup_mode: Any) -> TyperGroup:
        """The group as command `name`, built as `app.add_typer` would build it."""
        sub_app = getattr(importlib.import_module(self.module), self.attribute)
        holder = typer.Typer(rich_markup_mode=rich_markup_mode)
        holder.add_typer(sub_app, name=name, help=self.help)
        holder_group = typer.main.get_command(holder)
        assert isinstance(holder_group, TyperGroup)
        group = holder_group.commands[name]
        assert isinstance(group, TyperGroup)
        _quiet_flag_metavars(group)
        return group


LAZY_GROUPS = {
    "testbed": LazyGroup(
        "r2bench.commands.testbed",
        "testbed_app",
        "Create, inspect and remove testbeds (virtual: network namespaces).",
    ),
    "cloudlab": LazyGroup(
        "r2bench.commands.testbed",
        "cloudlab_app",
        "Write a testbed file from a CloudLab manifest.",
    ),
}


class WorkflowGroup(TyperGroup):
    """Lists commands in workflow order, not alphabetically or by registration, and imports
    the groups of `LAZY_GROUPS` only when one is called (its help line needs no import)."""

    _listing_help = False

    def list_commands(self, ctx: Any) -> list[str]:
        names = [*super().list_commands(ctx), *(n for n in LAZY_GROUPS if n not in self.commands)]
        rank = {name: i for i, name in enumerate(WORKFLOW_ORDER)}
        return sorted(names, key=lambda n: (rank.get(n, len(rank)), names.index(n)))

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        command = super().get_command(ctx, cmd_name)
        lazy = LAZY_GROUPS.get(cmd_name)
        if command is not None or lazy is None:
            return command
        if self._listing_help:  # only its name and help line are shown
            return TyperGroup(name=cmd_name, help=lazy.help)
        command = lazy.load(cmd_name, self.rich_markup_mode)
        self.add_command(command, cmd_name)
        return command

    def format_help(self, ctx: Any, formatter: Any) -> None:
        self._listing_help = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing_help = False


app = typer.Typer(
    name="r2bench",
    cls=WorkflowGroup,
    help="Fault-injection and benchmarking harness for R2CCL and NCCL.\n\n"
    "Typical flow: [bold]plan[/] EXP.yaml to see every command a sweep will run, then "
    "[bold]sweep[/] EXP.yaml (on the embedded virtual testbed it brings up, or on yours with "
    "-t TESTBED.yaml: write one, or [bold]testbed up[/]), then [bold]report[/].",
    no_args_is_help=True,
    rich_markup_mode="rich",
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _show_version(value: bool) -> None:
    if value:
        typer.echo(version_line())
        raise typer.Exit()


@app.callback()
def _main_options(
    verbose: Annotated[
        int,
        typer.Option(
            "--verbose", "-v", count=True, metavar="", help="Log what happens (-vv: debug)."
        ),
    ] = 0,
    debug: Annotated[
        bool, typer.Option("--debug", help="Show the full traceback of an error.")
    ] = False,
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_show_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Fault-injection and benchmarking harness for R2CCL and NCCL.

    `--debug` is read by `main` from the command line (see `debug_requested`), so that it
    holds for errors raised before this callback runs too.
    """
    del debug
    if verbose:
        level = logging.DEBUG if verbose > 1 else logging.INFO
        logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")


def _stderr() -> Console:
    return Console(stderr=True)


class FigureFormat(str, Enum):
    """Static figure formats of `report --format`."""

    png = "png"
    svg = "svg"
    pdf = "pdf"


ExperimentArg = Annotated[
    Path,
    typer.Argument(help="Experiment YAML file.", show_default=False, metavar="EXPERIMENT.yaml"),
]
TestbedOpt = Annotated[
    Path,
    typer.Option(
        "--testbed", "-t", help="Testbed YAML file.", show_default=False, metavar="TESTBED.yaml"
    ),
]
EmbeddedTestbedOpt = Annotated[
    Path | None,
    typer.Option(
        "--testbed",
        "-t",
        help="Testbed YAML file (default: the embedded virtual testbed `sweep` brings up).",
        show_default=False,
        metavar="TESTBED.yaml",
    ),
]


@app.command()
def plan(
    experiment: ExperimentArg,
    testbed: EmbeddedTestbedOpt = None,
    commands: Annotated[
        bool, typer.Option("--commands", "-c", help="Show every command of every run.")
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the plan as JSON for tools.")
    ] = False,
    script: Annotated[
        Path | None,
        typer.Option(
            "--script",
            help="Write one bash script per node (setup, each run's launch and faults, in "
            "order, commented) into this folder.",
            metavar="DIR",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Show every run of an experiment and the commands it executes.

    Pure: it touches nothing on the nodes and brings nothing up. With no --testbed it plans on
    the embedded virtual testbed that `r2bench sweep` would bring up (shaped by the
    experiment's `virtual_testbed` section). `r2bench sweep EXP.yaml --dry-run` prints the
    same plan as `plan EXP.yaml --commands`. Warnings about the experiment's settings (a
    variable its library never reads, a log that breaks result rows) are printed after it.

    Exit codes: 0 ok, 2 invalid experiment or testbed file (every problem is listed with its
    file, line, column and field).

    Example: [bold]r2bench plan experiments/quickstart.yaml --commands[/]
    """
    from r2bench.commands.sweep import embedded_note, plan_of
    from r2bench.plan.render import plan_json, print_plan

    result = plan_of(experiment, testbed)
    if testbed is None and not as_json:
        _stderr().print(embedded_note(result), markup=False, highlight=False)
    if script is not None:
        from r2bench.commands.plan_script import write_scripts

        for path in write_scripts(result, script):
            _stderr().print(f"wrote {printable(path)}", markup=False, highlight=False)
        return
    if as_json:
        sys.stdout.write(plan_json(result) + "\n")
    else:
        print_plan(result, Console(), commands)


@app.command()
def schema(
    out_dir: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            help="Write testbed/experiment/recipe .schema.json here.",
            metavar="DIR",
        ),
    ] = None,
) -> None:
    """Print the JSON Schema of r2bench's files, for editors.

    The schemas of the testbed, experiment and recipe files, for editor completion and
    checking. Without --out, prints one JSON object {"testbed": ..., "experiment": ..., "recipe": ...}.

    Example: [bold]r2bench schema --out .schemas[/]
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
        int | None,
        typer.Option("--jobs", "-j", help="Parallel make jobs (default: cores).", metavar="N"),
    ] = None,
    recipes: Annotated[
        Path | None,
        typer.Option("--recipes", help="Folder of recipe YAMLs (default: plugin/).", metavar="DIR"),
    ] = None,
    log_dir: Annotated[
        Path | None,
        typer.Option("--log-dir", help="Build logs (default: results/setup).", metavar="DIR"),
    ] = None,
    timeout: Annotated[
        float | None,
        typer.Option("--timeout", help="Seconds allowed per build step.", metavar="SECONDS"),
    ] = None,
) -> None:
    """Build what an experiment needs on every node, cached.

    Fetches and builds the library under test and the benchmark (nccl-tests) on every node in
    parallel; an unchanged second setup does nothing and says so. `r2bench sweep` runs it
    itself.

    Exit codes: 0 built or up to date, 1 a build failed on some node (its first compiler error,
    the known cause and the log path are shown), 2 invalid experiment or testbed file.

    Example: [bold]r2bench setup experiments/quickstart.yaml -t experiments/testbeds/virtual-example.yaml[/]
    """
    from r2bench.commands.setup import setup_command

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
    testbed: EmbeddedTestbedOpt = None,
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
    """Check that every node of a testbed is ready for a sweep.

    Per node: reachable, same OS/driver/MPI, GPUs and NICs present and up, passwordless ssh
    between nodes, clocks in sync, builds present, no stray workload or active fault. Each
    failed check says how to fix it; processes and faults of a sweep that holds the testbed
    are named as that sweep's (wait for it), not as strays to kill.

    With no --testbed it checks the embedded virtual testbed when it is up, and otherwise says
    how to bring it up (`r2bench sweep` brings it up, and runs doctor, by itself).

    Exit codes: 0 all checks passed (warnings allowed), 1 a check failed or (no --testbed) the
    embedded testbed is not up, 2 invalid testbed file. With --discover: 0 written (or nothing
    to change), 1 a node could not be asked.

    Example: [bold]r2bench doctor -t experiments/testbeds/virtual-example.yaml[/]
    """
    from r2bench.commands.doctor import doctor_command

    if discover:
        from r2bench.commands.testbed import discover_command

        if testbed is None:
            raise InputError("--discover needs the testbed file to fill in: -t TESTBED.yaml")
        raise typer.Exit(discover_command(testbed, dry_run))

    code = doctor_command(testbed, as_json)
    raise typer.Exit(code)


@app.command()
def parse(
    files: Annotated[
        list[Path],
        typer.Argument(
            help="nccl-tests text or -J JSON outputs, NCCL logs, or a sweep's run folder "
            "(`-`: standard input).",
            show_default=False,
            metavar="PATH...",
        ),
    ],
    as_json: Annotated[
        bool, typer.Option("--json", help="One JSON object per file (JSON Lines).")
    ] = False,
) -> None:
    """Parse nccl-tests outputs and NCCL/R2CC logs into results.

    Result rows, typed events and the run's outcome (ok, wrong_results, crashed, timeout,
    launch_failed...) with the lines that justify it. A run folder of a sweep (or several of
    its own files) is read as one run: stdout, stderr, the -J results, its spec and the
    outcome the sweep recorded. What the input does not say (no collective named, no library
    version printed) is said in words, not guessed.

    Exit codes: 0 parsed (a crashed or hung run is data, not an error), 1 an input is not
    nccl-tests output, 2 a file could not be read.

    Example: [bold]r2bench parse all_reduce_perf.log --json[/] (or a run folder:
    [bold]r2bench parse results/quickstart/RUN_ID[/])
    """
    from r2bench.commands.parse import parse_command

    raise typer.Exit(parse_command(files, as_json))


@app.command("import")
def import_logs(
    directory: Annotated[
        Path,
        typer.Argument(
            help="Folder of existing nccl-tests logs.", show_default=False, metavar="DIR"
        ),
    ],
    sweep: Annotated[
        str | None,
        typer.Option("--sweep", help="Sweep name (default: the folder's name).", metavar="NAME"),
    ] = None,
    results: Annotated[Path, typer.Option("--results", help="Results root.", metavar="DIR")] = Path(
        "results"
    ),
) -> None:
    """Turn a folder of nccl-tests logs into a results sweep.

    Text and/or -J JSON logs, paired by the text's `Writing JSON output to` line, else by file
    stem, become one run folder per run (a log holding several runs gives several), so
    `r2bench report` works on them.

    Exit codes: 0 imported, 2 DIR is not a folder.

    Example: [bold]r2bench import ~/nccl-logs --sweep h200-logs && r2bench report results/h200-logs[/]
    """
    from r2bench.commands.import_logs import import_command

    raise typer.Exit(import_command(directory, sweep, results))


@app.command()
def report(
    sweep_dir: Annotated[
        Path,
        typer.Argument(
            help="A sweep folder, e.g. results/my-sweep.", show_default=False, metavar="SWEEP_DIR"
        ),
    ],
    out: Annotated[
        Path | None,
        typer.Option(
            "--out", "-o", help="HTML file (default: SWEEP_DIR/report.html).", metavar="FILE"
        ),
    ] = None,
    fmt: Annotated[
        FigureFormat | None,
        typer.Option("--format", help="Also write each figure as a static file."),
    ] = None,
) -> None:
    """Rebuild a sweep's tables and write its HTML report.

    The tables (Parquet + CSV) and one self-contained HTML report that works offline. It opens
    with the answer: per library and mode under each fault scenario, what happened (survived,
    crashed, hung, wrong results), detection and stall, busbw after vs before the fault, one
    sentence a row. Then the outcome matrix, busbw vs size per series (runs that share
    collective, library and version, R2CC_MODE, transport, ranks, GPUs, nodes and NCCL_*
    settings) with spread over repeats, overhead vs a named no-fault baseline (shown as
    overhead only outside the run-to-run spread), timelines with fault windows shaded and R2CC
    events marked, NIC traffic, and last every run and the provenance.

    Exit codes: 0 written (if a static --format cannot be exported, the HTML is still written and
    a warning says why), 2 missing sweep folder, unknown format or unwritable output.

    Example: [bold]r2bench report results/quickstart --format png[/]
    """
    from r2bench.commands.report import report_command

    raise typer.Exit(report_command(sweep_dir, out, fmt.value if fmt else None))


@app.command()
def compare(
    baseline: Annotated[
        Path,
        typer.Argument(
            help="A sweep folder, or a reference YAML file.",
            show_default=False,
            metavar="BASELINE",
        ),
    ],
    candidate: Annotated[
        Path | None,
        typer.Argument(help="The sweep folder to judge.", show_default=False, metavar="CANDIDATE"),
    ] = None,
    policy: Annotated[
        Path | None,
        typer.Option("--policy", help="Policy YAML (minimum effects, xfail).", metavar="FILE"),
    ] = None,
    markdown: Annotated[
        Path | None,
        typer.Option("--markdown", help="Write a markdown summary (PR comment).", metavar="FILE"),
    ] = None,
    junit: Annotated[
        Path | None, typer.Option("--junit", help="Write JUnit XML (CI).", metavar="FILE")
    ] = None,
    write_reference: Annotated[
        Path | None,
        typer.Option(
            "--write-reference",
            help="Write BASELINE (a sweep) as a reference YAML.",
            metavar="FILE",
        ),
    ] = None,
    show_all: Annotated[bool, typer.Option("--all", help="Also list `same` rows.")] = False,
    allow_incomplete: Annotated[
        bool,
        typer.Option(
            "--allow-incomplete",
            help="Let candidate runs that did not finish (or could not be read) and cells "
            "missing from the candidate pass the gate.",
        ),
    ] = False,
    allow_undecided: Annotated[
        bool,
        typer.Option(
            "--allow-undecided",
            help="Let `undecided` cells (too few samples, or a change the data cannot tell "
            "from noise) pass the gate, as the policy's `undecided: pass` does.",
        ),
    ] = False,
    allow_provenance_mismatch: Annotated[
        bool,
        typer.Option(
            "--allow-provenance-mismatch",
            help="Compare even when BASELINE was measured on another testbed or with another "
            "nccl-tests or library version than CANDIDATE (each difference is then a warning).",
        ),
    ] = False,
) -> None:
    """Compare a sweep with a baseline: noise-aware regression verdicts.

    Per collective x size x library/mode x scenario: a seeded bootstrap interval over repeats and iterations, a minimum effect per metric, and
    outcome changes (ok -> crashed/timeout/wrong_results) always a regression. Identical
    samples are `same` (a sweep compared with itself passes). The gate counts every cell:
    candidate runs that did not finish, missing cells and `undecided` ones (too few samples,
    or too noisy: more repeats decide them) fail it too, unless --allow-incomplete /
    --allow-undecided (or the policy's `undecided: pass`) let them pass. The first lines say
    the verdict, why, and how to get a decision.

    A BASELINE measured on another testbed, or with another nccl-tests version or NCCL version
    of a library both sides ran, is refused, naming the field and both values, unless
    --allow-provenance-mismatch; a version unknown on either side is a warning.

    Exit codes: 0 passed, 1 regression or cells not judged, 2 could not compare (nothing
    matched, bad input, provenance differs).

    Example: [bold]r2bench compare results/baselines/ci-virtual.yaml results/ci/ci-virtual[/]
    """
    from r2bench.extras import require_report_extra

    require_report_extra("compare")
    from r2bench.commands.compare import compare_command
    from r2bench.compare.verdict import Gate

    gate = Gate(allow_incomplete=allow_incomplete, allow_undecided=allow_undecided)
    raise typer.Exit(
        compare_command(
            baseline,
            candidate,
            policy,
            markdown,
            junit,
            write_reference,
            show_all,
            gate=gate,
            allow_provenance_mismatch=allow_provenance_mismatch,
        )
    )


@app.command()
def version() -> None:
    """Print r2bench's version.

    Example: [bold]r2bench version[/]
    """
    typer.echo(version_line())


app.command("figures", short_help="Draw the paper's figures from sweeps and check their claims.")(
    figures_command
)


SWEEP_HELP = """Run an experiment end to end and write its report.

Plan, doctor, setup (cached), then every run (preflight, launch, faults in flight, deadline, revert and verify, collect, record), a final heal, the tables and the HTML report. `--dry-run` (or `r2bench plan EXP.yaml --commands`) shows the plan and runs nothing.

With no --testbed it runs on the embedded virtual testbed (2 nodes x 4 data NICs, each capped at 250 Mbit/s, in network namespaces; needs root): brought up if needed, taken down at the end unless --keep-testbed. One sweep at a time holds it: a second one refuses at once, naming the holder (pid, results folder, since when), or with --wait-testbed waits for it; it never shares it.

Running it again resumes: complete runs are skipped, incomplete ones redone; --rerun failed also redoes runs whose outcome was not ok. Ctrl-C reverts the current run's faults, stops its job on every node, marks it interrupted and writes the tables.

Exit codes: 0 every run ended (whatever its outcome), 1 some run could not be carried out (doctor or setup failed, node lost, revert failed), 2 bad input (or the embedded testbed held by another sweep), 130 interrupted.

Example: [bold]r2bench sweep experiments/quickstart.yaml[/] """


@app.command(help=SWEEP_HELP)
def sweep(
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
    from r2bench.commands.sweep import dry_run as show_plan
    from r2bench.commands.sweep import sweep_command
    from r2bench.sweep.orchestrate import SweepOptions

    console = _stderr()
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


TestbedRequired = TestbedOpt


@app.command()
def heal(testbed: TestbedRequired) -> None:
    """Revert every r2bench fault still active on a testbed.

    Says what was found and reverted per node. Exit 0 when every node is clean, 1 otherwise.

    Example: [bold]r2bench heal -t experiments/testbeds/dgx-h100-2node.yaml[/]
    """
    from r2bench.commands.heal import heal_command

    raise typer.Exit(heal_command(testbed, Console()))


def _fault_command(action: str) -> Callable[..., None]:
    def command(
        kind: Annotated[
            str,
            typer.Argument(
                help="Fault kind: ib_port_down, link_down, route_drop, bandwidth_cap, flow_drop."
            ),
        ],
        node: Annotated[str, typer.Argument(help="Node name in the testbed.")],
        nic: Annotated[str, typer.Argument(help="NIC name of that node.")],
        testbed: TestbedRequired,
        param: Annotated[
            list[str] | None,
            typer.Option(
                "--param",
                "-p",
                help="KEY=VALUE kind setting (e.g. rate=1gbit); repeatable.",
                metavar="KEY=VALUE",
            ),
        ] = None,
        lease_s: Annotated[
            float,
            typer.Option(
                "--lease-s",
                help="The node reverts by itself after this many seconds.",
                metavar="SECONDS",
                min=1,
                max=86400,
            ),
        ] = 300.0,
    ) -> None:
        from r2bench.commands.handfault import ManualFault, fault_command

        console = _stderr()
        params = dict(p.split("=", 1) for p in param or [] if "=" in p)
        fault = ManualFault(kind, node, nic, params, lease_s)
        raise typer.Exit(fault_command(testbed, fault, action, console))

    verb = "Inject" if action == "inject" else "Revert"
    command.__doc__ = (
        f"{verb} one fault by hand, with a sweep's safety checks.\n\n"
        "The same interlocks as an experiment file: never the management NIC, the bootstrap "
        "interface or the controller's path.\n\n"
        f"Example: [bold]r2bench {action} link_down node1 nic1 -t testbed.yaml[/]"
    )
    return command


app.command("inject")(_fault_command("inject"))
app.command("revert")(_fault_command("revert"))


def _quiet_flag_metavars(command: Any) -> Any:
    """Flags take no value: show no `<bool>` type beside them in the help."""
    for param in command.params:
        if getattr(param, "is_flag", False) or getattr(param, "count", False):
            param.metavar = param.metavar or ""
    for sub in getattr(command, "commands", {}).values():
        _quiet_flag_metavars(sub)
    return command


def cli() -> Any:
    """The click command behind `r2bench` (flags shown without a type)."""
    return _quiet_flag_metavars(typer.main.get_command(app))


def main() -> None:
    """Console-script entry point; see `r2bench.commands.failures` for what each error ends as.
    `--debug` shows the traceback of expected errors too."""
    try:
        prepare_streams(os.environ)
        cli()(prog_name="r2bench")
    except BrokenPipeError:
        # The reader went away (`| head`): stop quietly, and keep Python's own flush at exit
        # from failing again on the dead pipe.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise SystemExit(ExitCode.FAILED) from None
    except Exception as error:  # every error ends here: one line, or a bug's traceback
        raise SystemExit(report_error(error, debug_requested(sys.argv[1:]), _stderr())) from None
