"""The functions behind the CLI commands: argument handling, printing and exit codes.

`cli.py` declares the top-level commands (typer) and, when one of them is called, imports the
command groups declared here (`testbed`, `cloudlab`); it calls into this layer; this layer calls
the packages that do the work (records, report, plan, sweep, ...). Nothing below it imports
from here. A command returns its exit code or raises; `cli.main` (`failures.py`) turns every
error into its exit code.
"""
