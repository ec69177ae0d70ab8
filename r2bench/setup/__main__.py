"""`python -m r2bench.setup`: the setup command on its own (same options as `r2bench setup`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from r2bench.cli import config_errors
from r2bench.setup.commands import setup_command

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)


@app.command(help=setup_command.__doc__)
def main(
    experiment: Annotated[Path, typer.Argument(help="Experiment YAML file.")],
    testbed: Annotated[Path, typer.Option("--testbed", "-t", help="Testbed YAML file.")],
    force: Annotated[bool, typer.Option("--force", help="Rebuild even if up to date.")] = False,
    jobs: Annotated[int | None, typer.Option("--jobs", "-j", help="Parallel make jobs.")] = None,
    recipes: Annotated[
        Path | None, typer.Option("--recipes", help="Folder of recipe YAMLs (default plugin/).")
    ] = None,
    log_dir: Annotated[
        Path | None, typer.Option("--log-dir", help="Build logs (default results/setup).")
    ] = None,
    timeout: Annotated[
        float | None, typer.Option("--timeout", help="Seconds allowed per build step.")
    ] = None,
) -> None:
    """Run setup and exit with its status."""
    with config_errors(Console(stderr=True)):
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


if __name__ == "__main__":
    app()
