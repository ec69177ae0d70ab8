"""The command line reads as users of typer tools expect: examples, choices, order, metavars.

This module holds those with real processes; the same subject's other tests:
tests/unit/test_cli_help.py (its pure tests).
"""

from __future__ import annotations

import subprocess
import sys

_HELP_WITHOUT_REPORT_EXTRA = """
import sys
for name in ("pandas", "pyarrow", "plotly"):
    sys.modules[name] = None  # as if not installed
from typer.testing import CliRunner
from r2bench.cli import COMMANDS, app
for name in COMMANDS:
    result = CliRunner().invoke(app, [name, "--help"])
    assert result.exit_code == 0, (name, result.output, result.exception)
print("ok")
"""


def test_every_command_help_works_without_the_report_extra() -> None:
    """A command's module is imported for its --help: none may need pandas, pyarrow or plotly
    at import (the report extra is imported in a command's body, after the check naming it)."""
    proc = subprocess.run(
        [sys.executable, "-c", _HELP_WITHOUT_REPORT_EXTRA],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr
