"""`r2bench testbed up|down|status|from-slurm`: the commands that make, remove and show
testbeds.

`up`, `down` and `status` drive the virtual testbed (network namespaces on this host,
`r2bench.testbeds.virtual`); `from-slurm` writes a testbed of a Slurm allocation
(`r2bench.testbeds.slurm`). `r2bench cloudlab testbed` is `cloudlab.py`; `r2bench doctor
--discover` is in `doctor.py`.
"""

from __future__ import annotations

import json
import os
import time
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from r2bench.errors import InputError
from r2bench.textsafe import printable

# Each subcommand imports the testbed code it drives (the virtual testbed's models, Slurm):
# `r2bench testbed --help` and `r2bench testbed up --help` load none of it.

command = typer.Typer(
    help="Create, remove and inspect virtual testbeds (network namespaces on this host).",
    no_args_is_help=True,
)

StateDirOption = Annotated[
    Path | None,
    typer.Option(
        "--state-dir",
        help="State directory (default /var/lib/r2bench/virtual/NAME).",
        metavar="DIR",
    ),
]


def _progress(console: Console) -> Any:
    start = time.monotonic()

    def show(line: str) -> None:
        console.print(
            f"  [dim]{time.monotonic() - start:6.2f}s[/] {line}", highlight=False, soft_wrap=True
        )

    return show


class TestbedKind(str, Enum):
    """Testbed kinds `testbed up` can create."""

    virtual = "virtual"


@command.command("up")
def up_command(
    kind: Annotated[
        TestbedKind,
        typer.Argument(help="Testbed kind (only `virtual` is built here).", metavar="KIND"),
    ],
    nodes: Annotated[int, typer.Option(help="Number of nodes.", metavar="N")] = 2,
    nics: Annotated[int, typer.Option(help="Data NICs (rails) per node.", metavar="N")] = 2,
    name: Annotated[
        str, typer.Option(help="Testbed name (namespaces r2b-NAME-*).", metavar="NAME")
    ] = "vt",
    router: Annotated[
        bool, typer.Option(help="Put an nft bridge filter (flow-drop point) on rail 0.")
    ] = False,
    rate: Annotated[
        str | None,
        typer.Option(
            help="Cap every data NIC at this rate in both directions (tc rate, e.g. 400mbit): "
            "a tbf root qdisc with handle f2b0: at each end of each data link.",
            metavar="RATE",
        ),
    ] = None,
    gpus: Annotated[
        int,
        typer.Option(
            help="GPUs per node, from this host's: each node its own where the host has enough, "
            "else every node shares the first N (one rank per node on the same device). Each "
            "node's ranks get their own NCCL_HOSTID, so NCCL sees separate hosts and only the "
            "network path is measured between nodes (no NVLink, P2P or SHM).",
            metavar="N",
        ),
    ] = 0,
    host_gpus: Annotated[
        int | None,
        typer.Option(
            help="Take the host's GPU count as M instead of asking nvidia-smi -L (planning or "
            "testing the GPU layout on a machine without GPUs).",
            metavar="M",
        ),
    ] = None,
    state_dir: StateDirOption = None,
) -> None:
    """Create a virtual testbed and write <state-dir>/testbed.yaml.

    Example: [bold]r2bench testbed up virtual --nodes 2 --nics 4 --rate 400mbit[/]

    On a GPU host: [bold]r2bench testbed up virtual --nodes 2 --nics 4 --rate 4gbit --gpus 1[/]
    (docs/gpu.md: the namespace GPU testbed).
    """
    from r2bench.testbeds.virtual.layout import VirtualSpec
    from r2bench.testbeds.virtual.lifecycle import up

    console = Console(stderr=True)
    if kind is not TestbedKind.virtual:
        raise InputError(f"unknown testbed kind {kind!r}: only `virtual` can be created")
    spec = VirtualSpec(name, nodes, nics, router, state_dir, rate, gpus, host_gpus)
    capped = f", each capped at {rate}" if rate else ""
    console.print(f"creating virtual testbed [bold]{name}[/]: {nodes} nodes x {nics} NICs{capped}")
    result = up(spec, _progress(console))
    for warning in result.warnings:
        console.print(f"[yellow]warning:[/] {warning}")
    console.print(f"up in {result.seconds:.1f}s; testbed file: {result.testbed_yaml}")
    typer.echo(str(result.testbed_yaml))


@command.command("down")
def down_command(
    name: Annotated[str, typer.Argument(help="Testbed name.")],
    state_dir: StateDirOption = None,
    force: Annotated[
        bool,
        typer.Option(
            "--force", help="Remove it even while a sweep holds it (that sweep then fails)."
        ),
    ] = False,
) -> None:
    """Remove everything `up` created for NAME (safe to run twice).

    A testbed a running sweep holds (the embedded one, while `r2bench sweep` uses it) is not
    removed: the holder is named; the sweep takes down what it brought up when it ends.

    Example: [bold]r2bench testbed down vt[/]
    """
    from r2bench.testbeds.virtual.hold import HeldError, live_holder
    from r2bench.testbeds.virtual.layout import check_name, default_state_dir
    from r2bench.testbeds.virtual.runner import CommandError
    from r2bench.testbeds.virtual.teardown import TestbedError, teardown

    console = Console(stderr=True)
    check_name(name)
    state = state_dir or default_state_dir(name)
    holder = live_holder(state)
    if holder is not None and not holder.is_me() and not force:
        raise HeldError(
            f"testbed {name} is held by sweep {holder.describe()}: removing it would pull it "
            "from under that sweep; wait for it to end (it takes down what it brought up), "
            "stop it with Ctrl-C, or pass --force"
        )
    try:
        done = teardown(name, state, _progress(console))
    except CommandError as exc:  # a step failed: what is left is listed, run down again
        raise TestbedError(str(exc)) from exc
    console.print(f"testbed {name}: " + ("removed" if done else "nothing to do"))


def _status_table(status: dict[str, Any]) -> Table:
    table = Table(title=f"testbed {status['name']} ({status['state_dir']})")
    for column in ("node", "namespace", "mgmt", "sshd", "links"):
        table.add_column(column)
    for node in status["nodes"]:
        links = " ".join(
            f"{ifname}:[{'green' if st == 'up' else 'red'}]{st}[/]"
            for ifname, st in node["links"].items()
        )
        table.add_row(
            node["name"],
            node["netns"] + ("" if node["netns_present"] else " [red](missing)[/]"),
            node["mgmt_address"],
            f"[green]pid {node['sshd_pid']}[/]" if node["sshd_alive"] else "[red]dead[/]",
            links,
        )
    return table


def _print_status(console: Console, status: dict[str, Any]) -> None:
    if not status["up"]:
        leftovers = status["leftover_namespaces"]
        extra = f"; leftover namespaces {leftovers} (run down)" if leftovers else ""
        console.print(f"testbed {status['name']}: not up{extra}")
        return
    console.print(_status_table(status))
    if status.get("held_by"):
        console.print(f"held by sweep {status['held_by']}", markup=False, highlight=False)
    missing = [ns for ns, present in status["namespaces"].items() if not present]
    console.print(f"host link {status['host_link']['name']}: {status['host_link']['state']}")
    if missing:
        console.print(f"[red]missing namespaces:[/] {', '.join(missing)}")
    if status["router"]:
        router = status["router"]
        console.print(
            f"router: nft {router['family']} table {router['table']} in {router['netns']}"
        )
    if status.get("rate"):
        from r2bench.testbeds.virtual.layout import SHAPING_HANDLE

        console.print(f"data NICs capped at {status['rate']} both ways (tbf {SHAPING_HANDLE})")


@command.command("status")
def status_command(
    name: Annotated[str | None, typer.Argument(help="Testbed name (default: all known).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    state_dir: StateDirOption = None,
) -> None:
    """Show nodes, namespaces, sshd and link states of a virtual testbed.

    Example: [bold]r2bench testbed status vt[/]
    """
    from r2bench.testbeds.virtual.layout import check_name, default_state_dir
    from r2bench.testbeds.virtual.status import known_testbeds, read_status

    console = Console()
    names = [name] if name else known_testbeds()
    statuses = [read_status(n, state_dir or default_state_dir(n)) for n in map(check_name, names)]
    if as_json:
        typer.echo(json.dumps(statuses if name is None else statuses[0], indent=2))
        return
    if not statuses:
        console.print("no virtual testbeds")
    for status in statuses:
        _print_status(console, status)


SLURM_HEADER = """\
Made by `r2bench testbed from-slurm` inside Slurm job {job}.
NICs (RDMA devices, netdevs, link layers, the management interface) are not in Slurm's
environment: run `r2bench doctor --discover -t {out}` inside the allocation to add them."""


@command.command("from-slurm")
def from_slurm_command(
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Testbed YAML to write (default: stdout).")
    ] = None,
    name: Annotated[
        str | None, typer.Option("--name", help="Testbed name (default: slurm-<job id>).")
    ] = None,
) -> None:
    """Write a testbed of the current Slurm allocation (SLURM_JOB_NODELIST, tasks and GPUs
    per node), launched with srun.

    Exit codes: 0 written, 2 not inside an allocation or the SLURM_* variables are invalid.

    Example: [bold]r2bench testbed from-slurm -o testbed.yaml[/]
    """
    from r2bench.testbeds.slurm import slurm_testbed
    from r2bench.testbeds.yamlio import comment_header, write_testbed

    err = Console(stderr=True)
    testbed = slurm_testbed(os.environ, name=name)  # SlurmError (exit 2) outside an allocation
    job = os.environ.get("SLURM_JOB_ID", "?")
    header = comment_header(SLURM_HEADER, job=job, out=out or "TESTBED.yaml")
    write_testbed(testbed, out, header)
    if out is not None:
        err.print(
            printable(f"wrote {out}: {len(testbed.nodes)} node(s)"),
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
