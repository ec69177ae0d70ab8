"""`r2bench testbed from-slurm`: a testbed file from inside a Slurm allocation."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from r2bench.testbeds.slurm import SlurmError, slurm_testbed
from r2bench.testbeds.yamlio import write_testbed

EXIT_USAGE = 2

HEADER = """\
# Made by `r2bench testbed from-slurm` inside Slurm job {job}.
# NICs (RDMA devices, netdevs, link layers, the management interface) are not in Slurm's
# environment: run `r2bench doctor --discover -t {out}` inside the allocation to add them.
"""


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
    err = Console(stderr=True)
    try:
        testbed = slurm_testbed(os.environ, name=name)
    except SlurmError as exc:
        err.print(f"from-slurm: {exc}", markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(EXIT_USAGE) from None
    job = os.environ.get("SLURM_JOB_ID", "?")
    write_testbed(testbed, out, HEADER.format(job=job, out=out or "TESTBED.yaml"))
    if out is not None:
        err.print(f"wrote {out}: {len(testbed.nodes)} node(s)", highlight=False)
