"""The `r2bench` console script: `r2bench --version` is answered before the command tree (typer,
rich and every command module) is imported, so scripts that ask for the version pay for the
interpreter alone; `r2bench --help` is printed from the command table with rich alone
(`r2bench.tophelp`, the same bytes as the command line's help); everything else goes to
`r2bench.cli.main`."""

from __future__ import annotations

import sys

from r2bench import version_line


def main() -> None:
    """Run r2bench with the process's arguments."""
    if sys.argv[1:] == ["--version"]:
        print(version_line())
        return
    if sys.argv[1:] in (["--help"], ["-h"]):
        from r2bench.tophelp import answer

        code = answer()
        if code is not None:
            raise SystemExit(code)
    from r2bench.cli import main as cli_main

    cli_main()
