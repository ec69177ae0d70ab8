"""The comparison in a terminal: the verdict and why first, then the rows that need a look,
grouped under their series (library, scenario, mode, env) so each row names only its cell
(`1M in-place`), in as many columns as the width holds: notes go under the table as numbered
footnotes, metric names lose their unit, then the bound column gives way to a line under the
table, then the baseline and candidate values (--markdown keeps every column), so no column is
squeezed to a letter."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from rich.cells import cell_len
from rich.console import Console
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from r2bench.compare.explain import INDENT, explanation, headline
from r2bench.compare.output import (
    ORDER,
    STYLE,
    interval_text,
    key_label,
    pct_text,
    shared_fields,
    sorted_rows,
    value_text,
)
from r2bench.compare.samples import CELL_FIELDS
from r2bench.compare.stats import Verdict
from r2bench.compare.verdict import Comparison, Row
from r2bench.textsafe import printable

MAX_ROWS = 200
GAP = 2  # columns apart (padding of one on each side, none at the edges)
MIN_WIDTH = 4  # no column narrower: below this a column reads as letters
MIN_CELL = 8  # the cell column is the one that folds, never under this
UNIT_SUFFIXES = ("_gbps", "_us", "_per_s", "_s", "_ratio")
SERIES_ROW = "series"  # the cell of a row about a whole series (outcomes, recovery)


@dataclass(frozen=True)
class Layout:
    """Which columns a table shows, and how."""

    values: bool = True  # baseline and candidate
    bound: bool = True
    inline_notes: bool = True  # else numbered footnotes under the table
    compact: bool = False  # `busbw` for `busbw_gbps`, `base` for `baseline`, 361.3k


LAYOUTS = (
    Layout(),
    Layout(inline_notes=False),
    Layout(inline_notes=False, compact=True),
    Layout(bound=False, inline_notes=False, compact=True),
    Layout(values=False, bound=False, inline_notes=False, compact=True),
)
"""From the richest to the leanest; the first that fits the width is used."""


@dataclass
class Notes:
    """Distinct notes, numbered in order of appearance."""

    numbers: dict[str, int] = field(default_factory=dict)

    def mark(self, note: str) -> str:
        """`[n]` for a note (the same number for the same text), '' for none."""
        if not note:
            return ""
        number = self.numbers.setdefault(note, len(self.numbers) + 1)
        return f"[{number}]"

    def lines(self) -> list[str]:
        return [f"[{n}] {note}" for note, n in self.numbers.items()]


@dataclass(frozen=True)
class Column:
    """A column: its header, how it is justified, and its text of a row."""

    name: str
    text: Callable[[Row], str]
    justify: str = "left"


@dataclass(frozen=True)
class Group:
    """The rows of one series, under its label."""

    label: str
    rows: list[Row]


def short_metric(metric: str) -> str:
    """`busbw_gbps` -> `busbw`, `detect_s` -> `detect`, `tokens_per_s` -> `tokens`."""
    for suffix in UNIT_SUFFIXES:
        if metric.endswith(suffix):
            return metric.removesuffix(suffix)
    return metric


def compact_value(v: float | str | None) -> str:
    """A value in at most 7 characters: 361.3k for 361300, 0.09289 as it is."""
    if isinstance(v, float) and abs(v) >= 1e4:
        for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
            if abs(v) >= scale * 10 or scale == 1e3:
                return f"{v / scale:.4g}{suffix}"
    return value_text(v)


def groups(cmp: Comparison, rows: list[Row]) -> list[Group]:
    """Rows by series, the series with the worst verdict first, each row's cell in key order
    after its verdict."""
    shared = shared_fields(cmp)
    rank = {v: i for i, v in enumerate(ORDER)}
    by_series: dict[str, list[Row]] = {}
    for row in rows:
        series = tuple((n, v) for n, v in row.key if n not in CELL_FIELDS)
        label = key_label(series, shared)
        by_series.setdefault(label, []).append(row)
    ordered = sorted(by_series.items(), key=lambda item: min(rank[r.verdict] for r in item[1]))
    return [
        Group(label, sorted(members, key=lambda r: rank[r.verdict])) for label, members in ordered
    ]


def _cell(row: Row, shared: set[str]) -> str:
    cell = tuple((n, v) for n, v in row.key if n in CELL_FIELDS)
    return key_label(cell, shared) or SERIES_ROW


def columns(cmp: Comparison, layout: Layout, notes: Notes, rows: list[Row]) -> list[Column]:
    """The columns of a layout for these rows (no note column when no row has a note)."""
    shared = shared_fields(cmp)

    def metric(row: Row) -> str:
        return short_metric(row.metric) if layout.compact else row.metric

    def value(v: float | str | None) -> str:
        return compact_value(v) if layout.compact else value_text(v)

    base, cand = ("base", "cand") if layout.compact else ("baseline", "candidate")

    chosen = [Column("cell", lambda r: _cell(r, shared)), Column("metric", metric)]
    if layout.values:
        chosen += [
            Column(base, lambda r: value(r.baseline), "right"),
            Column(cand, lambda r: value(r.candidate), "right"),
        ]
    chosen += [
        Column("change", lambda r: pct_text(r.change), "right"),
        Column("interval", interval_text),
        Column("n", lambda r: f"{r.n_baseline}/{r.n_candidate}", "right"),
    ]
    if layout.bound:
        chosen.append(Column("bound", lambda r: r.threshold))
    chosen.append(Column("verdict", lambda r: r.verdict.value))
    note = (lambda r: r.note) if layout.inline_notes else (lambda r: notes.mark(r.note))
    if any(r.note for r in rows):
        chosen.append(Column("note", note))
    return chosen


def widths(chosen: list[Column], rows: Iterable[Row]) -> list[int]:
    """Each column's natural width: its widest text or header."""
    texts = [[printable(c.text(r)) for c in chosen] for r in rows]
    return [
        max([MIN_WIDTH, cell_len(c.name), *(cell_len(t[i]) for t in texts)])
        for i, c in enumerate(chosen)
    ]


def choose(cmp: Comparison, rows: list[Row], width: int) -> tuple[Layout, list[int]]:
    """The richest layout whose natural widths fit `width`; else the leanest, with the cell
    column folding into what is left (never under MIN_CELL)."""
    for layout in LAYOUTS:
        natural = widths(columns(cmp, layout, Notes(), rows), rows)
        if sum(natural) + GAP * (len(natural) - 1) <= width:
            return layout, natural
    layout = LAYOUTS[-1]
    others = natural[1:]
    room = width - sum(others) - GAP * len(others)
    return layout, [max(MIN_CELL, min(natural[0], room)), *others]


def bounds_line(rows: list[Row]) -> str:
    """The bounds of the rows, for a table without its bound column:
    `bounds: ±5% (busbw, time), ±10% (detect, stall)`."""
    metrics: dict[str, list[str]] = {}
    for row in rows:
        names = metrics.setdefault(row.threshold, [])
        if row.threshold and short_metric(row.metric) not in names:
            names.append(short_metric(row.metric))
    parts = [f"{bound} ({', '.join(names)})" for bound, names in metrics.items() if bound]
    return "bounds: " + (", ".join(parts) or "none")


def _table(chosen: list[Column], sizes: list[int], header: bool) -> Table:
    table = Table(box=None, padding=(0, 1), pad_edge=False, show_header=header,
                  header_style="bold")  # fmt: skip
    for column, size in zip(chosen, sizes, strict=True):
        table.add_column(column.name, width=size, justify=column.justify,  # type: ignore[arg-type]
                         overflow="fold")  # fmt: skip
    return table


def print_rows(cmp: Comparison, rows: list[Row], console: Console) -> None:
    """The rows grouped by series, one table per group with the same column widths, then
    the footnotes."""
    layout, sizes = choose(cmp, rows, console.width)
    notes = Notes()
    chosen = columns(cmp, layout, notes, rows)
    title = (
        f"{cmp.baseline} (baseline) -> {cmp.candidate} (candidate): {cmp.matched_cells} "
        f"cells and {cmp.matched_series} series matched"
    )
    console.print(Text(printable(title)))
    console.print(_table(chosen, sizes, header=True))
    for group in groups(cmp, rows):
        if group.label:
            console.print(Text(printable(group.label), style="bold"))
        table = _table(chosen, sizes, header=False)
        for row in group.rows:
            texts = [Text(printable(c.text(row))) for c in chosen]
            verdict = [c.name for c in chosen].index("verdict")
            texts[verdict].stylize(STYLE[row.verdict])
            table.add_row(*texts)
        console.print(table)
    for line in notes.lines():
        console.print(Text(printable(line)))
    if not layout.bound:
        console.print(Text(printable(bounds_line(rows))))
    if not layout.values:
        console.print("(baseline and candidate values: a wider terminal, or --markdown FILE)")


def print_verdict(cmp: Comparison, console: Console) -> None:
    """The gate's verdict and why (the first lines a user reads); wrapped lines indented."""
    head, *lines = explanation(cmp)
    console.print(Text(printable(head), style="bold"))
    for line in lines:
        console.print(Padding(Text(printable(line.strip())), (0, 0, 0, len(INDENT)), expand=False))


def print_details(cmp: Comparison, console: Console, everything: bool = False) -> None:
    """The rows that need a look (every row with `everything`), and the verdict again at the
    end (where a CI log is read from)."""
    rows = [r for r in sorted_rows(cmp) if everything or r.verdict is not Verdict.SAME]
    if rows:
        console.print()
        print_rows(cmp, rows[:MAX_ROWS], console)
    if len(rows) > MAX_ROWS:
        console.print(f"... {len(rows) - MAX_ROWS} more rows (see --markdown or --junit)")
    same = sum(r.verdict is Verdict.SAME for r in cmp.rows)
    if same and not everything:
        console.print(f"{same} rows `same` not shown (--all lists them).")
    if rows:
        console.print(Text(printable(headline(cmp)), style="bold"))
