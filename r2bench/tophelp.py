"""`r2bench --help` printed from the command table (`r2bench.commandtable`) with rich alone:
the same panels, in the same styles and widths, as typer's rich help of the command line
(`r2bench.cli`) prints, without importing typer, click or any command, or building the
command tree. `tests/integration/test_cli_help.py` holds the two to the same bytes."""

from __future__ import annotations

import inspect
import os
import sys
from typing import ClassVar

from rich.align import Align
from rich.columns import Columns
from rich.console import Console, Group, RenderableType
from rich.highlighter import RegexHighlighter
from rich.padding import Padding
from rich.panel import Panel
from rich.table import Table
from rich.text import Text
from rich.theme import Theme

from r2bench.commandtable import COMMANDS, PROGRAM_HELP, TOP_OPTIONS, TopOption

USAGE = "Usage: r2bench [OPTIONS] COMMAND [ARGS]..."
THEME = Theme(
    {
        "option": "bold cyan",
        "switch": "bold green",
        "negative_option": "bold magenta",
        "negative_switch": "bold red",
        "types": "bold yellow",
        "types_sep": "dim",
        "usage": "yellow",
    }
)
"""The styles of typer's rich help."""


class _OptionHighlighter(RegexHighlighter):
    """Options, switches, types and the usage line, as typer highlights them."""

    highlights: ClassVar[list[str]] = [
        r"(^|\W)(?P<switch>\-\w+)(?![a-zA-Z0-9])",
        r"(^|\W)(?P<option>\-\-[\w\-]+)(?![a-zA-Z0-9])",
        r"(?P<types>\<[^\>]+\>)",
        r"(?P<usage>Usage: )",
    ]


class _TypesHighlighter(RegexHighlighter):
    """The brackets of a type, dimmed."""

    highlights: ClassVar[list[str]] = [
        r"^(?P<types_sep>(\[|<))",
        r"(?P<types_sep>\|)",
        r"(?P<types_sep>(\]|>))(\.\.\.)?$",
    ]


def console() -> Console:
    """A console set up as typer sets up its help's (colours forced by FORCE_COLOR and the
    like, the width by TERMINAL_WIDTH)."""
    forced = bool(os.getenv("GITHUB_ACTIONS") or os.getenv("FORCE_COLOR") or os.getenv("PY_COLORS"))
    force_terminal = (
        False if os.getenv("_TYPER_FORCE_DISABLE_TERMINAL") else (True if forced else None)
    )
    width = os.getenv("TERMINAL_WIDTH")
    return Console(
        theme=THEME,
        highlighter=_OptionHighlighter(),
        color_system="auto",
        force_terminal=force_terminal,
        width=int(width) if width else None,
    )


def print_help(out: Console | None = None) -> None:
    """Print the top-level help."""
    out = out or console()
    highlight = _OptionHighlighter()
    out.print(Padding(highlight(USAGE), 1), style="bold")
    out.print(Padding(Align(_program_help(highlight), pad=False), (0, 1, 1, 1)))
    out.print(_panel("Options", _options_table(highlight)))
    out.print(_panel("Commands", _commands_table(highlight)))
    out.file.write("\n")  # click ends its help with a line of its own


def _program_help(highlight: _OptionHighlighter) -> Group:
    first, *rest = inspect.cleandoc(PROGRAM_HELP).split("\n\n")
    parts: list[RenderableType] = [highlight(Text.from_markup(first.replace("\n", " ").strip()))]
    if rest:
        text = inspect.cleandoc("\n\n".join(rest))
        parts += [Text(""), highlight(Text.from_markup(text, style="dim"))]
    return Group(*parts)


def _panel(title: str, table: Table) -> Panel:
    return Panel(table, border_style="dim", title=title, title_align="left")


def _table(highlight: bool) -> Table:
    return Table(
        highlight=highlight, show_header=False, expand=True, box=None, show_lines=False,
        leading=0, border_style=None, row_styles=None, pad_edge=False, padding=(0, 1),
    )  # fmt: skip


def _options_table(highlight: _OptionHighlighter) -> Table:
    table = _table(highlight=True)
    types = _TypesHighlighter()
    negative = _OptionHighlighter()  # no secondary (negative) options at the top level
    for option in TOP_OPTIONS:
        table.add_row(
            highlight(option.long),
            highlight(option.short),
            negative(""),
            negative(""),
            types(Text(option.type, style="bold yellow", overflow="fold")),
            _option_help(option, highlight),
        )
    return table


def _option_help(option: TopOption, highlight: _OptionHighlighter) -> Columns:
    items: list[RenderableType] = [highlight(Text.from_markup(option.help.strip()))]
    if option.default:
        items.append(Text(f"[default: {option.default}]", style="dim"))
    return Columns(items)


def _commands_table(highlight: _OptionHighlighter) -> Table:
    table = _table(highlight=False)
    width = max(len(name) for name in COMMANDS)
    table.add_column(style="bold cyan", no_wrap=True, width=width)
    table.add_column("Description", justify="left", no_wrap=False, ratio=10)
    for name, entry in COMMANDS.items():
        first = inspect.cleandoc(entry.help).split("\n\n")[0]
        table.add_row(Text(name), highlight(Text.from_markup(first.strip())))
    return table


def answer() -> int | None:
    """`r2bench --help` as the command line answers it; the exit code. None when it must be
    the command line's answer after all: standard output cannot be written to (it reports
    that, as for every command). A reader gone away (`| head`) ends it quietly."""
    from r2bench.errors import ExitCode
    from r2bench.textsafe import OutputClosed, prepare_streams

    try:
        prepare_streams(os.environ)
    except OutputClosed:
        return None
    try:
        print_help()
        sys.stdout.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return int(ExitCode.FAILED)
    return int(ExitCode.OK)
