"""`r2bench version`: the version."""

from __future__ import annotations

import typer

from r2bench import version_line


def command() -> None:
    """Print r2bench's version.

    Example: [bold]r2bench version[/]
    """
    typer.echo(version_line())
