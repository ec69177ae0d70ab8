"""`r2bench schema`: the JSON Schema of the testbed, experiment and recipe files."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from r2bench.config.schema import all_schemas
from r2bench.safeio import atomic_write


def command(
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
    schemas = all_schemas()
    if out_dir is None:
        sys.stdout.write(json.dumps(schemas, indent=2) + "\n")
        return
    for name, body in schemas.items():
        path = out_dir / f"{name}.schema.json"
        atomic_write(path, json.dumps(body, indent=2) + "\n", durable=False)
        Console().print(f"wrote {path}", markup=False, highlight=False)
