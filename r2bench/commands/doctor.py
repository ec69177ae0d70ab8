"""`r2bench doctor`: check every node of a testbed, print the table or JSON; exit 1 on failure."""

from __future__ import annotations

import sys
from pathlib import Path

from rich.console import Console

from r2bench.config.load import load_testbed
from r2bench.doctor.checks import failed
from r2bench.doctor.render import print_report, results_json
from r2bench.doctor.run import diagnose
from r2bench.errors import ExitCode


def doctor_command(testbed: Path, json_out: bool, console: Console | None = None) -> int:
    """Check every node of a testbed; print a report; return 0 if nothing failed, else 1.

    An invalid testbed file raises ConfigError (the main CLI reports it).
    """
    model = load_testbed(testbed)
    results = diagnose(model)
    if json_out:
        sys.stdout.write(results_json(model, results) + "\n")
    else:
        print_report(model, results, console or Console())
    return ExitCode.FAILED if failed(results) else ExitCode.OK
