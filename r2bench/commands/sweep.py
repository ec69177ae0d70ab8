"""The functions behind `r2bench sweep`, `heal`, `inject` and `revert`: errors to exit codes.

Exit codes: 0 done, 1 something could not be carried out (a node lost, a fault not reverted,
doctor or setup failed), 2 bad input (files, options, the results folder in use, no root for
the embedded testbed), 130 interrupted.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from r2bench.nodes import NodeError
from r2bench.sweep.command import EXIT_FAILED, EXIT_USAGE, SweepOptions, dry_run, sweep_command
from r2bench.sweep.embedded import EmbeddedTestbedError
from r2bench.sweep.lock import LockedError
from r2bench.sweep.manual import ManualFault, fault_command, heal_command


def sweep_cli(options: SweepOptions, show_plan_only: bool, console: Console) -> int:
    """`r2bench sweep`; ConfigError is left to the caller (located messages)."""
    try:
        if show_plan_only:
            return dry_run(options, console)
        return sweep_command(options, console)
    except (EmbeddedTestbedError, LockedError, FileNotFoundError) as exc:
        console.print(str(exc), style="red", markup=False)
        return EXIT_USAGE
    except NodeError as exc:
        console.print(f"sweep stopped: {exc}", style="red", markup=False)
        return EXIT_FAILED


def heal_cli(testbed: Path, console: Console) -> int:
    """`r2bench heal`."""
    try:
        return heal_command(testbed, console)
    except NodeError as exc:
        console.print(f"heal: {exc}", style="red", markup=False)
        return EXIT_FAILED


def fault_cli(testbed: Path, fault: ManualFault, action: str, console: Console) -> int:
    """`r2bench inject` / `r2bench revert`."""
    try:
        return fault_command(testbed, fault, action, console)
    except NodeError as exc:
        console.print(f"{action}: {exc}", style="red", markup=False)
        return EXIT_FAILED
