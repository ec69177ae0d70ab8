"""The plain table writer draws what rich's Table draws, character for character."""

from __future__ import annotations

import io

import pytest
from rich.console import Console
from rich.table import Table
from rich.text import Text

from r2bench import plaintable

HEADERS = ("size (B)", "count", "type", "#wrong")
ROWS = [
    ["8", "2", "float", "0"],
    ["1073741824", "268435456", "float", ""],
    ["", "", "", "1.23e+09"],
]


def _console(width: int = 132) -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, width=width, color_system=None, force_terminal=False), out


def _by_rich(title: str, rows: list[list[str]]) -> str:
    console, out = _console()
    table = Table(title=Text(title), title_justify="left")
    for header in HEADERS:
        table.add_column(header, justify="right")
    for cells in rows:
        table.add_row(*(Text(c) for c in cells))
    console.print(table)
    return out.getvalue()


def _cells(row: list[str]) -> list[str]:
    return row


LONG_TITLE = "captures/build-v2.13.13.tail.log: collective not stated -> not_nccl_tests"


@pytest.mark.parametrize("rows", [ROWS, [], ROWS * 300])
@pytest.mark.parametrize("title", ["log.txt: all_reduce -> ok", LONG_TITLE])
def test_same_characters_as_rich(rows: list[list[str]], title: str) -> None:
    console, out = _console()
    widths = plaintable.column_widths(HEADERS, rows, _cells)
    assert widths is not None and plaintable.fits(console, widths)
    plaintable.print_table(console, title, HEADERS, rows, _cells, widths)
    assert out.getvalue() == _by_rich(title, rows)


def test_a_wide_or_non_ascii_cell_is_left_to_rich() -> None:
    narrow, _ = _console(width=40)
    assert not plaintable.fits(narrow, plaintable.column_widths(HEADERS, ROWS, _cells))  # 45 wide
    assert plaintable.column_widths(HEADERS, [["８", "2", "float", "0"]], _cells) is None
