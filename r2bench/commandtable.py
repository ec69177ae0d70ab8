"""What `r2bench --help` lists: the table of commands (`COMMANDS`), the program's help and its
own options. Plain data, no typer or rich: `r2bench.cli` builds the command line from it, and
`r2bench.tophelp` prints the top-level help from it without building that command line."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CommandEntry:
    """One command of the table: its module under `r2bench.commands` and its line in
    `r2bench --help`. The module's `command` is a typer-annotated function (its parameters are
    the command's arguments and options, its docstring the command's help) or a `typer.Typer`
    (a group of subcommands)."""

    module: str
    help: str


COMMANDS = {  # name: its module, its line in `r2bench --help`; in the order of a user's work
    "testbed": CommandEntry("testbed", "Create, inspect and remove testbeds (virtual: network namespaces)."),
    "doctor": CommandEntry("doctor", "Check that every node of a testbed is ready for a sweep."),
    "plan": CommandEntry("plan", "Show every run of an experiment and the commands it executes."),
    "setup": CommandEntry("setup", "Build what an experiment needs on every node, cached."),
    "sweep": CommandEntry("sweep", "Run an experiment end to end and write its report."),
    "heal": CommandEntry("heal", "Revert every r2bench fault still active on a testbed."),
    "inject": CommandEntry("inject", "Inject one fault by hand, with a sweep's safety checks."),
    "revert": CommandEntry("revert", "Revert one fault by hand, with a sweep's safety checks."),
    "parse": CommandEntry("parse", "Parse nccl-tests outputs and NCCL/R2CC logs into results."),
    "import": CommandEntry("import_logs", "Turn a folder of nccl-tests logs into a results sweep."),
    "report": CommandEntry("report", "Rebuild a sweep's tables and write its HTML report."),
    "compare": CommandEntry("compare", "Compare a sweep with a baseline: noise-aware regression verdicts."),
    "figures": CommandEntry("figures", "Draw the paper's figures from sweeps and check their claims."),
    "cloudlab": CommandEntry("cloudlab", "Write a testbed file from a CloudLab manifest."),
    "schema": CommandEntry("schema", "Print the JSON Schema of r2bench's files, for editors."),
    "version": CommandEntry("version", "Print r2bench's version."),
}  # fmt: skip

PROGRAM_HELP = (
    "Fault-injection and benchmarking harness for R2CCL and NCCL.\n\n"
    "Typical flow: [bold]plan[/] EXP.yaml to see every command a sweep will run, then "
    "[bold]sweep[/] EXP.yaml (on the embedded virtual testbed it brings up, or on yours with "
    "-t TESTBED.yaml: write one, or [bold]testbed up[/]), then [bold]report[/]."
)
"""The program's help (rich markup): its first paragraph, then the rest dimmed."""


@dataclass(frozen=True)
class TopOption:
    """An option of `r2bench` itself, as its help lists it."""

    long: str
    short: str
    help: str
    type: str = ""  # what typer shows in the type column
    default: str = ""  # the `[default: ...]` text, if shown


VERBOSE = TopOption("--verbose", "-v", "Log what happens (-vv: debug).", default="0")
DEBUG = TopOption("--debug", "", "Show the full traceback of an error.")
VERSION = TopOption("--version", "", "Print the version and exit.")
TOP_OPTIONS = (
    VERBOSE,
    DEBUG,
    VERSION,
    # typer's shell completion options and click's help option, in the words they bring
    TopOption("--install-completion", "", "Install completion for the current shell."),
    TopOption(
        "--show-completion",
        "",
        "Show completion for the current shell, to copy it or customize the installation.",
    ),
    TopOption("--help", "-h", "Show this message and exit.", type="<bool>"),
)
"""The options `r2bench --help` lists, in its order."""
