"""`r2bench doctor`: check every node of a testbed, print the table or JSON; exit 1 on failure.

With no testbed file it checks the embedded virtual testbed (`r2bench sweep`'s default) when it
is up, and otherwise says that it is not up and how to bring it up. `--discover` fills the
testbed file in from its nodes instead (`r2bench.testbeds.discover`), shows the diff and
writes it back.
"""

from __future__ import annotations

import difflib
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from r2bench.commands.options import EmbeddedTestbedOpt
from r2bench.errors import ExitCode, InputError
from r2bench.textsafe import printable

# The checks, ssh, the config models and the virtual testbed are imported where they are used,
# not here: `r2bench doctor --help` loads none of them.
if TYPE_CHECKING:
    from r2bench.nodes import NodePool


def embedded_names() -> tuple[str, ...]:
    """The embedded testbeds a sweep with no -t brings up: the CPU one and the `--gpus` one."""
    from r2bench.sweep.embedded import EMBEDDED_NAME

    return (EMBEDDED_NAME, f"{EMBEDDED_NAME}gpu")


def embedded_testbed_files(names: tuple[str, ...] | None = None) -> list[Path]:
    """The testbed files of the embedded testbeds that are up now."""
    from r2bench.testbeds.virtual.layout import default_state_dir
    from r2bench.testbeds.virtual.statedir import StatePaths

    files = [StatePaths(default_state_dir(name)).testbed_yaml for name in names or embedded_names()]
    return [path for path in files if path.is_file()]


def not_up_message(names: tuple[str, ...] | None = None) -> str:
    """What doctor says with no -t when no embedded testbed is up."""
    names = names or embedded_names()
    return (
        f"the embedded virtual testbed {names[0]} is not up, so there is nothing to check: "
        "`r2bench sweep EXPERIMENT.yaml` brings it up for the sweep (and doctors it first); "
        "to check it on its own, keep one up with `r2bench sweep EXPERIMENT.yaml "
        f"--keep-testbed` or `r2bench testbed up virtual --name {names[0]} --nics 4 --rate "
        "250mbit`, or give your own testbed with -t TESTBED.yaml"
    )


def doctor_command(
    testbed: Path | None,
    json_out: bool,
    console: Console | None = None,
    names: tuple[str, ...] | None = None,
) -> int:
    """Check every node of a testbed (none given: the embedded ones that are up); print a
    report; return 0 if nothing failed, else 1 (also when no testbed is up to check).

    An invalid testbed file raises ConfigError (the main CLI reports it).
    """
    console = console or Console()
    if testbed is not None:
        return _doctor_one(testbed, json_out, console)
    files = embedded_testbed_files(names)
    if not files:
        Console(stderr=True).print(not_up_message(names), markup=False, highlight=False)
        return ExitCode.FAILED
    codes = [_doctor_one(path, json_out, console, embedded=True) for path in files]
    return max(codes)


def _doctor_one(path: Path, json_out: bool, console: Console, embedded: bool = False) -> int:
    from r2bench.config.load import load_testbed
    from r2bench.doctor.checks import failed
    from r2bench.doctor.render import print_report, results_json
    from r2bench.doctor.run import diagnose
    from r2bench.testbeds.virtual.hold import live_holder

    model = load_testbed(path)
    if embedded and not json_out:
        holder = live_holder(path.parent)
        held = f", held by sweep {holder.describe()}" if holder else ""
        console.print(
            f"embedded virtual testbed {model.name} ({path}{held})", markup=False, highlight=False
        )
    results = diagnose(model)
    if json_out:
        sys.stdout.write(results_json(model, results) + "\n")
    else:
        print_report(model, results, console)
    return ExitCode.FAILED if failed(results) else ExitCode.OK


def discover_command(
    path: Path, dry_run: bool, console: Console | None = None, pool: NodePool | None = None
) -> int:
    """Discover, show the diff, write back. 0 done, 1 some node could not be asked."""
    from r2bench.config.load import load_testbed
    from r2bench.nodes import NodePool
    from r2bench.testbeds.discover import discover, header_of
    from r2bench.testbeds.yamlio import testbed_text, write_text_atomic

    console = console or Console()
    testbed = load_testbed(path)
    own = pool is None
    pool = pool or NodePool.from_testbed(testbed)
    try:
        merged, errors = discover(testbed, pool)
    finally:
        if own:
            pool.close()
    header = header_of(path.read_text())
    before = testbed_text(testbed, header)
    after = testbed_text(merged, header)
    diff = list(difflib.unified_diff(before.splitlines(keepends=True),
                                     after.splitlines(keepends=True),
                                     f"{path} (before)", f"{path} (discovered)"))  # fmt: skip
    for name, error in errors.items():
        console.print(f"{name}: not discovered: {error}", markup=False, highlight=False)
    if merged == testbed or not diff:
        console.print(
            printable(f"{path}: nothing to change"), markup=False, highlight=False, soft_wrap=True
        )
    else:
        console.print("".join(diff), markup=False, highlight=False, end="")
        if dry_run:
            console.print("--dry-run: nothing written")
        else:
            write_text_atomic(path, after)
            console.print(printable(f"wrote {path}"), markup=False, highlight=False, soft_wrap=True)
    return ExitCode.FAILED if errors else ExitCode.OK


def command(
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
    if discover:
        if testbed is None:
            raise InputError("--discover needs the testbed file to fill in: -t TESTBED.yaml")
        raise typer.Exit(discover_command(testbed, dry_run))

    code = doctor_command(testbed, as_json)
    raise typer.Exit(code)
