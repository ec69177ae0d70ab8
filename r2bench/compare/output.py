"""The comparison as a rich table, as markdown (a pull-request comment) and as JUnit XML."""

from __future__ import annotations

import math
from typing import Any
from xml.etree import ElementTree as ET

from rich.console import Console
from rich.table import Table
from rich.text import Text

from r2bench.compare.stats import Verdict
from r2bench.compare.verdict import OUTCOME, Comparison, Row
from r2bench.markup import markdown_text, xml_text
from r2bench.textsafe import printable

ORDER = (
    Verdict.REGRESSION, Verdict.INCOMPLETE, Verdict.MISSING, Verdict.UNDECIDED, Verdict.XFAIL,
    Verdict.NEW, Verdict.IMPROVEMENT, Verdict.SAME,
)  # fmt: skip
STYLE = {
    Verdict.REGRESSION: "bold red",
    Verdict.IMPROVEMENT: "green",
    Verdict.UNDECIDED: "yellow",
    Verdict.XFAIL: "magenta",
    Verdict.MISSING: "yellow",
    Verdict.INCOMPLETE: "yellow",
    Verdict.NEW: "cyan",
    Verdict.SAME: "",
}
MAX_ROWS = 200
NAMED = 10  # cells named in the summary line when they fail the gate unjudged
GATE_FLAGS = "--allow-incomplete / --allow-undecided"
SIZE_UNITS = ("B", "K", "M", "G", "T")


def human_size(n: Any) -> str:
    """1048576 -> 1M."""
    try:
        value = float(n)
    except (TypeError, ValueError):
        return str(n)
    for unit in SIZE_UNITS:
        if abs(value) < 1024 or unit == SIZE_UNITS[-1]:
            return f"{value:g}{unit}"
        value /= 1024
    return str(n)


def _value(v: Any) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def _pct(v: float | None) -> str:
    if v is None or not math.isfinite(v):
        return "-"
    return f"{v:+.1%}"


def shared_fields(cmp: Comparison) -> set[str]:
    """Key fields with one value over every row (left out of the labels)."""
    values: dict[str, set[str]] = {}
    for row in cmp.rows:
        for name, value in row.key:
            values.setdefault(name, set()).add(str(value))
    if len(cmp.rows) < 2:
        return set()
    return {n for n, v in values.items() if len(v) == 1 and n != "size_bytes"}


def cell_label(
    row: Row, columns: list[str], shared: set[str] | frozenset[str] = frozenset()
) -> str:
    """The cell without the fields every row shares: `mode=1 none 4M`."""
    parts = []
    for name, value in row.key:
        if value in ("", None) or name in shared:
            continue
        if name == "size_bytes":
            parts.append(human_size(value))
        elif name in ("placement",):
            parts.append("in-place" if value == "in_place" else "")
        elif name in ("type", "redop", "library", "collective", "scenario"):
            parts.append(str(value))
        else:
            parts.append(f"{'mode' if name == 'R2CC_MODE' else name}={value}")
    return " ".join(p for p in parts if p)


def _interval(row: Row) -> str:
    if row.low is None or row.high is None:
        return "-"
    return f"[{_pct(row.low)}, {_pct(row.high)}]"


def sorted_rows(cmp: Comparison) -> list[Row]:
    """Rows with the ones that need a look first."""
    rank = {v: i for i, v in enumerate(ORDER)}
    return sorted(cmp.rows, key=lambda r: rank[r.verdict])


def summary(cmp: Comparison) -> str:
    """One line: the gate's verdict, counts per verdict, and the cells it could not judge."""
    counts = cmp.count()
    parts = [f"{counts[v.value]} {v.value}" for v in ORDER if counts[v.value]]
    code = cmp.exit_code
    head = {0: "no regression", 2: "could not compare (nothing matched)"}.get(code, "")
    if code == 1:
        head = "REGRESSION" if cmp.regressions else "NOT PASSED (cells not judged)"
    line = (
        f"{head}: {cmp.matched_cells} cells and {cmp.matched_series} series "
        f"matched; " + ", ".join(parts or ["no verdicts"])
    )
    unjudged = cmp.unjudged
    if unjudged and code != 2:
        shared = shared_fields(cmp)
        names = [f"{cell_label(r, cmp.series_columns, shared) or r.metric} ({r.verdict.value})"
                 for r in unjudged[:NAMED]]  # fmt: skip
        more = f" and {len(unjudged) - NAMED} more" if len(unjudged) > NAMED else ""
        line += (
            f"; {len(unjudged)} not judged fail the gate ({GATE_FLAGS} lets them pass): "
            + ", ".join(names)
            + more
        )
    return line


def print_table(cmp: Comparison, console: Console, everything: bool = False) -> None:
    """The verdicts as a rich table (rows that are `same` only with `everything`)."""
    table = Table(title=Text(printable(f"{cmp.baseline} -> {cmp.candidate}")), show_lines=False)
    for name in ("cell", "metric", "baseline", "candidate", "change", "interval", "n", "bound",
                 "verdict", "note"):  # fmt: skip
        table.add_column(name, overflow="fold")
    shared = shared_fields(cmp)
    rows = [r for r in sorted_rows(cmp) if everything or r.verdict is not Verdict.SAME]
    for row in rows[:MAX_ROWS]:
        style = STYLE[row.verdict]
        table.add_row(
            Text(printable(cell_label(row, cmp.series_columns, shared))),
            Text(printable(row.metric)), _value(row.baseline),
            _value(row.candidate), _pct(row.change), _interval(row),
            f"{row.n_baseline}/{row.n_candidate}", row.threshold,
            f"[{style}]{row.verdict.value}[/]" if style else row.verdict.value,
            Text(printable(row.note)),
        )  # fmt: skip
    if rows:
        console.print(table)
    if len(rows) > MAX_ROWS:
        console.print(f"... {len(rows) - MAX_ROWS} more rows (see --markdown or --junit)")
    same = sum(r.verdict is Verdict.SAME for r in cmp.rows)
    if same and not everything:
        console.print(f"{same} rows `same` not shown.")
    console.print(Text(printable(summary(cmp))))


def markdown(cmp: Comparison) -> str:
    """A pull-request comment: the summary, the rows that need a look, everything folded."""
    icon = {0: "✅", 1: "❌", 2: "⚠️"}[cmp.exit_code]
    p = cmp.policy
    lines = [
        f"### {icon} r2bench compare: {markdown_text(cmp.baseline)} → "
        f"{markdown_text(cmp.candidate)}",
        "",
        markdown_text(summary(cmp) + "."),
        "",
        f"Bootstrap {p.confidence:.0%} intervals ({p.resamples} resamples, seed {p.seed}), "
        f"at least {p.min_samples} samples a side; series told apart by "
        + ", ".join(markdown_text(c) for c in cmp.series_columns)
        + ".",
        "",
    ]
    head = (
        "| cell | metric | baseline | candidate | change | interval | n | bound | verdict | note |"
    )
    rule = "|---|---|---:|---:|---:|---|---:|---|---|---|"

    shared = shared_fields(cmp)

    def fails(row: Row) -> bool:
        return row.verdict is Verdict.REGRESSION or cmp.gate.blocks(row.verdict)

    def table(rows: list[Row]) -> list[str]:
        return [head, rule] + [
            "| " + " | ".join(
                [*(markdown_text(x) for x in (
                    cell_label(r, cmp.series_columns, shared), r.metric, _value(r.baseline),
                    _value(r.candidate), _pct(r.change), _interval(r),
                    f"{r.n_baseline}/{r.n_candidate}", r.threshold)),
                 f"**{r.verdict.value}**" if fails(r) else r.verdict.value,
                 markdown_text(r.note)]
            ) + " |"
            for r in rows[:MAX_ROWS]
        ]  # fmt: skip

    look = [r for r in sorted_rows(cmp) if r.verdict is not Verdict.SAME]
    if look:
        lines += [*table(look), ""]
    lines += ["<details><summary>All verdicts</summary>", "", *table(sorted_rows(cmp)), "",
              "</details>", ""]  # fmt: skip
    return "\n".join(lines)


def junit(cmp: Comparison) -> str:
    """JUnit XML: one test case per cell x metric and per series outcome; a regression is a
    failure, and so is a row the gate could not judge (incomplete, missing, undecided) unless
    allowed; the others (xfail, new, allowed ones) are skipped with the reason. Every text goes
    through `xml_text`, so the file stays valid whatever the records hold."""
    shared = shared_fields(cmp)
    suite = ET.Element("testsuite", name="r2bench-compare")
    counts = {"tests": 0, "failures": 0, "skipped": 0}
    for row in cmp.rows:
        case = ET.SubElement(
            suite,
            "testcase",
            classname=xml_text(f"r2bench.compare.{row.metric if row.metric != '-' else 'cell'}"),
            name=xml_text(cell_label(row, cmp.series_columns, shared) or OUTCOME),
            time="0",
        )
        counts["tests"] += 1
        text = xml_text(
            f"{row.metric}: baseline {_value(row.baseline)}, candidate {_value(row.candidate)}, "
            f"change {_pct(row.change)} {_interval(row)}, n {row.n_baseline}/{row.n_candidate}, "
            f"bound {row.threshold}. {row.note}".strip()
        )
        if row.verdict is Verdict.REGRESSION:
            counts["failures"] += 1
            failure = ET.SubElement(
                case, "failure", message=f"regression: {text}", type="regression"
            )
            failure.text = text
        elif cmp.gate.blocks(row.verdict):
            counts["failures"] += 1
            failure = ET.SubElement(
                case, "failure", message=f"not judged ({row.verdict.value}): {text}",
                type="not-judged",
            )  # fmt: skip
            failure.text = text
        elif row.verdict not in (Verdict.IMPROVEMENT, Verdict.SAME):
            counts["skipped"] += 1
            ET.SubElement(case, "skipped", message=f"{row.verdict.value}: {text}")
        else:
            ET.SubElement(case, "system-out").text = f"{row.verdict.value}: {text}"
    for name, value in counts.items():
        suite.set(name, str(value))
    suite.set("errors", "0")
    root = ET.Element("testsuites")
    root.append(suite)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
