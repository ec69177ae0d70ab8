"""A table of right-aligned columns drawn as rich draws one (`Table` with its default heavy
head), line by line, for tables of any number of rows.

rich lays out every cell of a table before it prints the first line: about a millisecond and
a few KB a row, so the 48,000 result rows of a 200 MB log took a minute and 600 MB to print.
This writes each row as one formatted string once the column widths are known, in time and
memory linear in the rows. The header keeps rich's style (bold); the title and the rows are
plain text, as rich prints them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from rich.console import Console
from rich.text import Text

CHUNK_ROWS = 4096
"""Rows written to the console's file in one write."""
Row = TypeVar("Row")


def column_widths(
    headers: Sequence[str], rows: Sequence[Row], cells: Callable[[Row], Sequence[str]]
) -> list[int] | None:
    """The width of each column, or None where a cell is not ASCII (a character may then take
    two columns: rich must lay the table out). The cells are made again when printed, so
    only one row's are held at a time."""
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(cells(row)):
            if len(cell) > widths[i]:
                widths[i] = len(cell)
            if not cell.isascii():
                return None
    return widths


def fits(console: Console, widths: Sequence[int] | None) -> bool:
    """Whether a table of these column widths fits the console unwrapped."""
    return widths is not None and table_width(widths) <= console.width


def print_table(
    console: Console,
    title: str,
    headers: Sequence[str],
    rows: Sequence[Row],
    cells: Callable[[Row], Sequence[str]],
    widths: Sequence[int],
) -> None:
    """Print `rows` (`cells` of a row: printable, one per header) under `title`, every
    column right-aligned to `widths` (`column_widths`), in rich's heavy-head box."""
    width = table_width(widths)
    # the title, wrapped as rich wraps it, and the header: one print (each costs ~0.2 ms)
    head = Text()
    for line in Text(title).wrap(console, width, justify="left"):
        head.append(line.plain.ljust(width) + "\n")
    head.append(_rule("┏", "━", "┳", "┓", widths) + "\n┃")
    for header, column in zip(headers, widths, strict=True):
        head.append(f" {header.rjust(column)} ", style="table.header")
        head.append("┃")
    head.append("\n" + _rule("┡", "━", "╇", "┩", widths))
    console.print(head)
    console.file.flush()
    for start in range(0, len(rows), CHUNK_ROWS):
        chunk = rows[start : start + CHUNK_ROWS]
        console.file.write("".join(_row(cells(row), widths) for row in chunk))
    console.file.write(_rule("└", "─", "┴", "┘", widths) + "\n")
    console.file.flush()


def table_width(widths: Sequence[int]) -> int:
    """Characters of a line: each cell padded by one space a side, and the rules."""
    return sum(widths) + 3 * len(widths) + 1


def _rule(left: str, line: str, cross: str, right: str, widths: Sequence[int]) -> str:
    return left + cross.join(line * (w + 2) for w in widths) + right


def _row(cells: Sequence[str], widths: Sequence[int]) -> str:
    return "│" + "│".join(f" {c.rjust(w)} " for c, w in zip(cells, widths, strict=True)) + "│\n"
