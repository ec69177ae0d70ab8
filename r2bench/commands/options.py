"""Arguments and options that several commands share, declared once (typer `Annotated` types)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

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
