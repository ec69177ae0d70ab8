"""The summary's HTML: one small table of `report.summary` rows, then a sentence per row.

Columns come from the `SummaryColumn`s as they are given: a cell shows the median over the
row's runs (with the range over runs when there are several), '–' with the reason on hover
where no run of a faulted row has a value, and nothing on a fault-free row for a number that
needs a fault.
"""

from __future__ import annotations

import html

from r2bench.report.summary import (
    SUMMARY_COLUMNS,
    Measure,
    SummaryColumn,
    SummaryRow,
)

SECTION_ID = "summary"
TITLE = "What happened"
UNDEFINED = "–"


def _esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def _cell(row: SummaryRow, column: SummaryColumn) -> str:
    if column.faulted_only and not row.faulted:
        return "<td></td>"
    measure = row.measures.get(column.key) or Measure()
    if measure.defined:
        return f"<td class='num'>{_esc(measure.cell(column))}</td>"
    why = measure.missing or "no value"
    return f"<td class='num undefined' title='{_esc(why)}'>{UNDEFINED}</td>"


def _who(row: SummaryRow) -> str:
    device = ", CPU emulation" if row.cpu else ""
    return f"<b>{_esc(row.subject)}</b><div class='sub'>{_esc(row.library)}{device}</div>"


def _under(row: SummaryRow) -> str:
    said = row.fault or "no fault"
    return f"{_esc(said)}<div class='sub'>scenario {_esc(row.scenario)}</div>"


def summary_table_html(
    rows: list[SummaryRow], columns: tuple[SummaryColumn, ...] = SUMMARY_COLUMNS
) -> str:
    """The rows as one table (library and mode, fault, runs, what happened, the numbers)."""
    head = "".join(f"<th>{_esc(c.header)}</th>" for c in columns)
    body = []
    for row in rows:
        outcome = row.outcome
        cells = "".join(_cell(row, c) for c in columns)
        body.append(
            f"<tr class='{outcome.tone}'><td>{_who(row)}</td><td>{_under(row)}</td>"
            f"<td class='num'>{row.runs}</td><td class='outcome'>{_esc(outcome.word)}</td>"
            f"{cells}</tr>"
        )
    return (
        "<table class='summary' id='summary-table'><tr><th>library and mode</th><th>under</th>"
        f"<th>runs</th><th>what happened</th>{head}</tr>{''.join(body)}</table>"
    )


def sentences_html(rows: list[SummaryRow], columns: tuple[SummaryColumn, ...]) -> str:
    """One plain sentence per row, in the table's order."""
    items = "".join(f"<li class='{r.outcome.tone}'>{_esc(r.sentence(columns))}</li>" for r in rows)
    return f"<ul class='sentences'>{items}</ul>"


def _notes(columns: tuple[SummaryColumn, ...]) -> str:
    """What the shown columns that explain themselves mean (` Training: ...`), or ''."""
    said = [c.note for c in columns if c.note]
    return f" Training runs: {'; '.join(said)}." if said else ""


def summary_section(
    rows: list[SummaryRow], lead: str, columns: tuple[SummaryColumn, ...] = SUMMARY_COLUMNS
) -> str:
    """The report's opening section: `lead` (HTML: what ran), the table, the sentences."""
    if not rows:
        return f"<section id='{SECTION_ID}'><h2>{TITLE}</h2><p>No runs.</p></section>"
    how = (
        "<p class='cell small'>Each number is the median over the runs of its row (min–max "
        "when there are several): detected = fault applied to the library's first reaction "
        "line; stall = longest gap without a completed measurement around the fault; busbw "
        "ratios against busbw before the fault (the run's own, or its series' fault-free runs "
        "where it had too few samples; docs/recovery.md). "
        f"{UNDEFINED} = no value (hover for why).{_notes(columns)}</p>"
    )
    return (
        f"<section id='{SECTION_ID}'><h2>{TITLE}</h2>{lead}"
        f"{summary_table_html(rows, columns)}{sentences_html(rows, columns)}{how}</section>"
    )
