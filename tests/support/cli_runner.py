"""r2bench's commands run in the test process the way the `r2bench` script runs them.

Commands raise their errors and `r2bench.cli.main` reports them (one line, or the located issues
of a config file) with the exit code of their kind; typer's CliRunner stops at the raise. This
helper finishes the job as main does, so a test reads the exit code and text a user gets."""

from __future__ import annotations

import io
from dataclasses import dataclass

from rich.console import Console
from typer.testing import CliRunner

from r2bench.cli import app
from r2bench.commands.failures import report_error
from r2bench.errors import R2benchError


@dataclass(frozen=True)
class Ran:
    """How a command ended: its exit code and everything it printed (stdout, then stderr)."""

    exit_code: int
    output: str
    stderr: str
    """What went to stderr alone (the reported error included)."""


def invoke_as_main(*args: str, env: dict[str, str] | None = None, stdin: str | None = None) -> Ran:
    """Run `r2bench ARGS`; an expected error is reported as main reports it. Anything else
    (a bug) fails the test."""
    result = CliRunner().invoke(app, list(args), env=env, input=stdin)
    output, code, error = result.output, result.exit_code, result.exception
    stderr = result.stderr
    if isinstance(error, R2benchError):
        reported = io.StringIO()
        code = report_error(error, False, Console(file=reported, width=250))
        output += reported.getvalue()
        stderr += reported.getvalue()
    else:
        assert error is None or isinstance(error, SystemExit), error
    assert "bug in r2bench" not in output
    return Ran(int(code), output, stderr)


def invoke_wide(*args: str) -> Ran:
    """`invoke_as_main` at 250 columns, so that no path or message is wrapped."""
    return invoke_as_main(*args, env={"COLUMNS": "250"})
