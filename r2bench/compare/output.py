"""The comparison as markdown (a pull-request comment) and as JUnit XML, and the texts of a
row that every output shares (the terminal's table: `compare.terminal`)."""

from __future__ import annotations

import math
from typing import Any
from xml.etree import ElementTree as ET

from r2bench.compare.explain import headline, reasons
from r2bench.compare.samples import Key
from r2bench.compare.stats import Verdict
from r2bench.compare.verdict import OUTCOME, Comparison, Row
from r2bench.markup import markdown_text, xml_text

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


def value_text(v: Any) -> str:
    """A baseline or candidate value: 4 significant digits, `-` for none."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def pct_text(v: float | None) -> str:
    """A relative change: `+1.5%`, `-` for none."""
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
    return key_label(row.key, shared)


def key_label(key: Key, shared: set[str] | frozenset[str] = frozenset()) -> str:
    """A key (a cell's, a series', or part of one) without the fields every row shares."""
    parts = []
    for name, value in key:
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


def interval_text(row: Row) -> str:
    """The interval of a row's change: `[-1.2%, +3.4%]`, `-` for none."""
    if row.low is None or row.high is None:
        return "-"
    return f"[{pct_text(row.low)}, {pct_text(row.high)}]"


def sorted_rows(cmp: Comparison) -> list[Row]:
    """Rows with the ones that need a look first."""
    rank = {v: i for i, v in enumerate(ORDER)}
    return sorted(cmp.rows, key=lambda r: rank[r.verdict])


def summary(cmp: Comparison) -> str:
    """One line of counts: what matched, and rows per verdict (the verdict itself and why:
    `explain.headline`, `explain.reasons`)."""
    counts = cmp.count()
    parts = [f"{counts[v.value]} {v.value}" for v in ORDER if counts[v.value]]
    return f"{cmp.matched_cells} cells and {cmp.matched_series} series matched; " + ", ".join(
        parts or ["no verdicts"]
    )


def markdown(cmp: Comparison) -> str:
    """A pull-request comment: the summary, the rows that need a look, everything folded."""
    icon = {0: "✅", 1: "❌", 2: "⚠️"}[cmp.exit_code]
    p = cmp.policy
    lines = [
        f"### {icon} r2bench compare: {markdown_text(cmp.baseline)} → "
        f"{markdown_text(cmp.candidate)}",
        "",
        f"**{markdown_text(headline(cmp))}**",
        "",
        *[f"- {markdown_text(line.strip())}" for line in reasons(cmp)],
        *([""] if reasons(cmp) else []),
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
                    cell_label(r, cmp.series_columns, shared), r.metric, value_text(r.baseline),
                    value_text(r.candidate), pct_text(r.change), interval_text(r),
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
            f"{row.metric}: baseline {value_text(row.baseline)}, candidate {value_text(row.candidate)}, "
            f"change {pct_text(row.change)} {interval_text(row)}, n {row.n_baseline}/{row.n_candidate}, "
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
