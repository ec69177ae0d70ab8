"""The `r2bench` console script: `r2bench --version` is answered before the command tree (typer,
rich and every command module) is imported, so scripts that ask for the version pay for the
interpreter alone; everything else goes to `r2bench.cli.main`."""

from __future__ import annotations

import sys

from r2bench import version_line


def main() -> None:
    """Run r2bench with the process's arguments."""
    if sys.argv[1:] == ["--version"]:
        print(version_line())
        return
    from r2bench.cli import main as cli_main

    cli_main()
