"""The functions behind the CLI commands: argument handling, printing and exit codes.

`cli.py` declares the top-level commands (typer) and mounts the command groups declared
here (`testbed`, `cloudlab`); it calls into this layer; this layer calls the
packages that do the work (records, report, plan, ...). Nothing below it imports from here.
"""
