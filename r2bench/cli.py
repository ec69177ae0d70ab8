"""The r2bench command line (thin: each command delegates to a module)."""

from __future__ import annotations

import typer

app = typer.Typer(
    name="r2bench",
    help="Fault-injection and benchmarking harness for R2CCL and NCCL.",
    no_args_is_help=True,
    rich_markup_mode="rich",
    pretty_exceptions_enable=False,
)
