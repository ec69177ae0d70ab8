"""The r2bench command line, built from the table of commands (`r2bench.commandtable`), and
`main`.

Each command is one module of `r2bench.commands` that holds its options (typer) and its body;
the table gives its name, its module, its line in `r2bench --help` and, by its place, its
order. A command's module is imported only when that command is called (its `--help`
included), as pip's command table does, so `r2bench --help` and `r2bench --version` answer at
once: they import no command module, no ssh, no pydantic models, no report extra.
"""

from __future__ import annotations

import difflib
import importlib
import logging
import os
import sys
from typing import Annotated, Any

import typer
from rich.console import Console
from typer.core import TyperCommand, TyperGroup

from r2bench import version_line
from r2bench.commands.failures import debug_requested, report_error
from r2bench.commandtable import COMMANDS, DEBUG, PROGRAM_HELP, VERBOSE, VERSION, CommandEntry
from r2bench.errors import ExitCode
from r2bench.textsafe import prepare_streams


def load_command(entry: CommandEntry, name: str, rich_markup_mode: Any) -> Any:
    """The command of `entry` as `name`, imported now and built as typer builds a registered
    one."""
    command = importlib.import_module(f"r2bench.commands.{entry.module}").command
    holder = typer.Typer(rich_markup_mode=rich_markup_mode)
    holder.callback()(_no_options)  # with a callback, a holder of one command is a group
    if isinstance(command, typer.Typer):
        holder.add_typer(command, name=name, help=entry.help)
    else:
        holder.command(name, short_help=entry.help)(command)
    holder_group = typer.main.get_command(holder)
    assert isinstance(holder_group, TyperGroup)
    return _quiet_flag_metavars(holder_group.commands[name])


def _no_options() -> None:
    """The holder's callback: no options of its own."""


class CommandTable(TyperGroup):
    """The top-level group: lists `COMMANDS` in their order and imports a command's module
    only when that command is called (its line in `r2bench --help` needs no import)."""

    _listing_help = False

    def list_commands(self, ctx: Any) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        entry = COMMANDS.get(cmd_name)
        if entry is None:
            return None
        if self._listing_help:  # only its name and help line are shown
            return TyperCommand(name=cmd_name, help=entry.help)
        if cmd_name not in self.commands:
            self.add_command(load_command(entry, cmd_name, self.rich_markup_mode), cmd_name)
        return self.commands[cmd_name]

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        # typer offers close names from the commands loaded so far: offer the table's
        name = args[0] if args else ""
        unknown = name and name not in COMMANDS and not name.startswith("-")
        close = difflib.get_close_matches(name, list(COMMANDS)) if unknown else []
        if close and not ctx.resilient_parsing:
            offered = ", ".join(repr(match) for match in close)
            ctx.fail(f"No such command {name!r}. Did you mean {offered}?")
        return super().resolve_command(ctx, args)

    def format_help(self, ctx: Any, formatter: Any) -> None:
        self._listing_help = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing_help = False


app = typer.Typer(
    name="r2bench",
    cls=CommandTable,
    help=PROGRAM_HELP,
    no_args_is_help=True,
    rich_markup_mode="rich",
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _show_version(value: bool) -> None:
    if value:
        typer.echo(version_line())
        raise typer.Exit()


@app.callback()
def _main_options(
    verbose: Annotated[
        int,
        typer.Option(VERBOSE.long, VERBOSE.short, count=True, metavar="", help=VERBOSE.help),
    ] = 0,
    debug: Annotated[bool, typer.Option(DEBUG.long, help=DEBUG.help)] = False,
    version: Annotated[
        bool,
        typer.Option(VERSION.long, callback=_show_version, is_eager=True, help=VERSION.help),
    ] = False,
) -> None:
    """Fault-injection and benchmarking harness for R2CCL and NCCL.

    `--debug` is read by `main` from the command line (see `debug_requested`), so that it
    holds for errors raised before this callback runs too.
    """
    del debug
    if verbose:
        level = logging.DEBUG if verbose > 1 else logging.INFO
        logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")


def _quiet_flag_metavars(command: Any) -> Any:
    """Flags take no value: show no `<bool>` type beside them in the help."""
    for param in command.params:
        if getattr(param, "is_flag", False) or getattr(param, "count", False):
            param.metavar = param.metavar or ""
    for sub in getattr(command, "commands", {}).values():
        _quiet_flag_metavars(sub)
    return command


def cli() -> Any:
    """The click command behind `r2bench` (flags shown without a type)."""
    return _quiet_flag_metavars(typer.main.get_command(app))


def main() -> None:
    """Console-script entry point; see `r2bench.commands.failures` for what each error ends as.
    `--debug` shows the traceback of expected errors too."""
    try:
        prepare_streams(os.environ)
        cli()(prog_name="r2bench")
    except BrokenPipeError:
        # The reader went away (`| head`): stop quietly, and keep Python's own flush at exit
        # from failing again on the dead pipe.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise SystemExit(ExitCode.FAILED) from None
    except Exception as error:  # every error ends here: one line, or a bug's traceback
        stderr = Console(stderr=True)
        raise SystemExit(report_error(error, debug_requested(sys.argv[1:]), stderr)) from None
