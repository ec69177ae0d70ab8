"""The commands of r2bench, one module each: `r2bench.commandtable.COMMANDS` names them.

A command's module holds its arguments and options (typer annotations on `command`, or
`command = typer.Typer(...)` for a group of subcommands such as `testbed`) and its body: the
function that does the work and returns the exit code (`parse_command`, `doctor_command`, ...;
tests call these directly). `cli.py` imports a command's module only when that command is
called, so a module may import what it needs at its top; only the `report` extra (pandas,
pyarrow, plotly) is imported inside a body, after `require_report_extra`, so that `--help`
works without it.

Beside the commands: `options.py` (arguments several commands share), `failures.py` (what each
error ends as: `cli.main` maps every error to its exit code there), `plan_script.py` (plan
--script) and `handfault.py` (a fault by hand: inject and revert). Nothing below this layer
imports from it.
"""
