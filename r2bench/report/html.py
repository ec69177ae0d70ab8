"""The sweep report: one self-contained HTML file that works offline.

plotly.js is written into the page once (inline, no CDN); each figure's data sits in a
`<script type="application/json" class="r2-figure" id="figure-<id>">` block (JSON with `<`, `>`,
`&` escaped, so no data string can close the script) and a small loader draws it. Every string
from the data that goes into HTML passes `html.escape`.
"""

from __future__ import annotations

import html
import json
import os
import urllib.parse
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import r2bench
from r2bench.extras import require_report_extra
from r2bench.runfolder import runformat
from r2bench.runfolder.provenance import Provenance
from r2bench.safeio import atomic_write
from r2bench.tables.build import Tables

# The report needs the `report` extra (pandas, plotly); importing this module does not, so a
# sweep on a machine without it still runs and says why no report was written.
try:
    import pandas as pd
    from plotly.offline import get_plotlyjs

    from r2bench.report import evidence as ev
    from r2bench.report import numbers
    from r2bench.report.campaign import campaign_section
    from r2bench.report.charts import Figure, all_figures, outcome_counts
    from r2bench.report.inline import figure_json, prose_html
    from r2bench.report.model import model_section
    from r2bench.report.nics import SECTION_TITLE, nic_panel_figures
    from r2bench.report.recovery import recovery_section
    from r2bench.report.recovery_cost import recovery_cost_section, timeline_figures
    from r2bench.report.summary import summary_columns, summary_rows, sweep_facts
    from r2bench.report.summary_html import summary_section
    from r2bench.report.training import ANCHOR as TRAINING_ANCHOR
    from r2bench.report.training import has_training, training_figures, training_section
except ImportError:  # pragma: no cover - exercised in a subprocess test
    pass

MAX_LISTED = 50
MAX_PROBLEM_RUNS = 200
MAX_VALUE_CHARS = 2000
MAX_OPEN_VALUES = 5  # a provenance field with more distinct values is folded

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 1em 2em; color: #222; max-width: 1500px; }
h1 { font-size: 1.4em; margin: .2em 0; } h2 { margin-top: 1.6em; border-bottom: 1px solid #ccc; }
#summary h2 { margin-top: .6em; }
table { border-collapse: collapse; margin: .5em 0; font-size: .9em; }
td, th { border: 1px solid #ccc; padding: .25em .5em; vertical-align: top; text-align: left; }
th { background: #f3f3f3; } code, .mono { font-family: ui-monospace, monospace; }
.note { color: #a33; } .fig { margin: 1em 0; } .r2-plot { min-height: 200px; }
tr.bad td { background: #fdf0ef; } tr.warn td { background: #fdf8e6; } details { margin: .5em 0; }
.cell { max-width: 70em; overflow-wrap: anywhere; white-space: pre-wrap; }
.small, .sub { font-size: .85em; color: #555; } nav { font-size: .9em; margin: .3em 0; }
table.summary { font-size: .95em; } table.summary th { vertical-align: bottom; max-width: 9em; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.undefined { color: #888; } tr.good td.outcome { background: #e3f4e1; font-weight: 600; }
tr.bad td.outcome { background: #f9d9d6; font-weight: 600; }
tr.mixed td.outcome { background: #fbefc9; font-weight: 600; }
ul.sentences { margin: .4em 0; padding-left: 1.4em; } ul.sentences li { margin: .15em 0; }
li.bad { color: #8a1f17; }
"""

_LOADER = """
document.querySelectorAll('script.r2-figure').forEach(function (node) {
  var spec = JSON.parse(node.textContent);
  var div = document.getElementById(node.id.replace('figure-', 'plot-'));
  Plotly.newPlot(div, spec.data, spec.layout,
                 {responsive: true, displaylogo: false, scrollZoom: false});
});
"""


def esc(value: Any) -> str:
    """HTML-escape any value (None -> empty)."""
    if value is None or value is pd.NA or (isinstance(value, float) and value != value):
        return ""
    return html.escape(str(value), quote=True)


@dataclass
class ProvenanceSummary:
    """Distinct provenance values over the runs of a sweep, with how many runs had each."""

    runs: int = 0
    values: dict[str, Counter[str]] = field(default_factory=dict)
    env: dict[str, Counter[str]] = field(default_factory=dict)

    def add(self, key: str, value: Any) -> None:
        """Count one run's value of a field (dicts/lists as compact JSON)."""
        if value in (None, "", [], {}):
            return
        text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
        self.values.setdefault(key, Counter())[text[:MAX_VALUE_CHARS]] += 1


_NOT_SUMMARIZED = frozenset(
    {"env", "env_dropped", "python", "created_at", "library_basis", "node_utc_offset_s", "notes"}
)
"""Provenance fields the summary leaves out: the environment has its own rows, the others say
how or when a record was written, not what ran."""
_PROV_FIELDS = (
    *(name for name in Provenance.model_fields if name not in _NOT_SUMMARIZED),
    "env_dropped",  # last: next to the environment's own rows
)
"""The provenance fields the report summarizes, in the model's order."""


def summarize_provenance(tables: Tables) -> ProvenanceSummary:
    """Fold the provenance of every run (the provenance table) into distinct values with
    counts."""
    summary = ProvenanceSummary(runs=len(tables.runs))
    fields = set(_PROV_FIELDS)
    for name, value in zip(tables.provenance["field"], tables.provenance["value"], strict=True):
        if name.startswith("env:"):
            env = summary.env.setdefault(name.removeprefix("env:"), Counter())
            env[str(value)[:MAX_VALUE_CHARS]] += 1
        elif name in fields:
            summary.add(name, value)
    summary.values = {k: summary.values[k] for k in _PROV_FIELDS if k in summary.values}
    return summary


def _counted(counter: Counter[str]) -> str:
    items = counter.most_common(MAX_LISTED)
    more = len(counter) - len(items)
    lines = [f"{esc(v)}  <span class='note'>({n} runs)</span>" for v, n in items]
    if more > 0:
        lines.append(f"... {more} more distinct values")
    return "<br>".join(lines)


ENV_PREFIXES = ("NCCL_", "R2CC_", "UCX_", "OMPI_", "UCC_")


def differing_env(summary: ProvenanceSummary) -> list[str]:
    """Names of variables whose value differs between runs (unset in some counts)."""
    return sorted(
        name
        for name, counts in summary.env.items()
        if len(counts) > 1 or sum(counts.values()) < summary.runs
    )


def _env_rows(names: list[str], summary: ProvenanceSummary) -> list[str]:
    rows = []
    for name in names:
        counts = summary.env[name]
        unset = summary.runs - sum(counts.values())
        text = _counted(counts)
        if unset > 0:
            text += f"<br><i>unset</i>  <span class='note'>({unset} runs)</span>"
        rows.append(f"<tr><th class='mono'>{esc(name)}</th><td class='cell mono'>{text}</td></tr>")
    return rows


def provenance_html(summary: ProvenanceSummary) -> str:
    """Provenance fields, then the environment: NCCL_*/R2CC_*/UCX_*/OMPI_*/UCC_* variables that
    differ between runs in view, everything else folded (secrets were dropped at record)."""
    rows = [
        f"<tr><th>{esc(k)}</th><td class='cell mono'>{_counted(v)}</td></tr>"
        if len(v) <= MAX_OPEN_VALUES
        else f"<tr><th>{esc(k)}</th><td class='cell mono'><details><summary>{len(v)} distinct "
        f"values</summary>{_counted(v)}</details></td></tr>"
        for k, v in summary.values.items()
    ]
    differ = set(differing_env(summary))
    shown = [n for n in sorted(summary.env) if n in differ and n.startswith(ENV_PREFIXES)]
    folded = [n for n in sorted(summary.env) if n not in shown]
    parts = [f"<p>{summary.runs} run folders.</p>", "<table>", *rows, "</table>"]
    parts.append("<h3>Environment of the jobs</h3>")
    if shown:
        parts += [
            "<p>NCCL_*, R2CC_*, UCX_*, OMPI_* and UCC_* variables that differ between runs:</p>",
            "<table>",
            *_env_rows(shown, summary),
            "</table>",
        ]
    else:
        parts.append(
            "<p>No NCCL_*, R2CC_*, UCX_*, OMPI_* or UCC_* variable differs between runs.</p>"
        )
    if folded:
        parts += [
            f"<details><summary>The other {len(folded)} variables</summary><table>",
            *_env_rows(folded, summary),
            "</table></details>",
        ]
    return "\n".join(parts)


MAX_RUN_ROWS = 1000


def _filled(frame: pd.DataFrame, column: str) -> bool:
    """Whether any row has a value in `column` (a column empty in every row is not shown)."""
    if column not in frame.columns:
        return False
    return bool(frame[column].astype("string").fillna("").str.strip().ne("").any())


def _href(target: Path, page_dir: Path) -> str:
    rel = os.path.relpath(target, page_dir)
    return esc(urllib.parse.quote(rel.replace(os.sep, "/")))


def _common_dir(paths: list[str]) -> str:
    """The folder all imported sources share ('' when fewer than two or none)."""
    files = [p.split(", ")[0] for p in paths]
    if len(files) < 2:
        return ""
    try:
        common = os.path.commonpath(files)
    except ValueError:
        return ""
    return "" if common in ("", os.sep) else common


def _source(row: dict[str, Any], common: str) -> str:
    source = row.get("imported_from")
    if not source or source != source:
        return str(row["path"])
    if common:
        prefix = common.rstrip(os.sep) + os.sep
        source = ", ".join(p.removeprefix(prefix) for p in str(source).split(", "))
    return str(source)


def runs_html(sweep_dir: Path, tables: Tables, page_dir: Path) -> str:
    """One row per run: source, collective, ranks, transport (when any run logged one),
    library (proven or guessed), outcome with reason, peak and average busbw (out-of-place,
    GB/s, as `numbers.gbps` writes them), link to the raw log."""
    runs = tables.runs
    if runs.empty:
        return "<p>No runs.</p>"
    res = tables.results[tables.results["placement"] == "out_of_place"]
    peak = res.groupby("run_id")["busbw_gbps"].max()
    mean = res.groupby("run_id")["busbw_gbps"].mean()
    common = _common_dir([str(v) for v in runs["imported_from"].dropna()])
    under = f" (under <code>{esc(common)}</code>)" if common else ""
    transport = _filled(runs, "transport")
    head = (
        f"<tr><th>source file or run folder{under}</th><th>collective</th><th>ranks</th>"
        + ("<th>transport</th>" if transport else "")
        + "<th>library</th><th>outcome</th><th>reason</th><th>peak busbw (GB/s)</th>"
        "<th>avg busbw (GB/s)</th><th>log</th></tr>"
    )
    body = []
    for row in runs.head(MAX_RUN_ROWS).itertuples(index=False):
        r = row._asdict()
        avg = r.get("avg_busbw_gbps")
        avg = avg if avg is not None and avg == avg else mean.get(r["run_id"])
        log = Path(sweep_dir) / str(r["path"]) / runformat.STDOUT
        link = f"<a href='{_href(log, page_dir)}'>stdout</a>" if log.exists() else ""
        cls = "" if r["outcome"] == "ok" else " class='bad'"
        reason = numbers.gbps_in_text(str(r["reason"] or ""))
        body.append(
            f"<tr{cls}><td class='cell mono'>{esc(_source(r, common))}</td>"
            f"<td>{esc(r['collective'])}</td><td>{esc(r['ranks'])}</td>"
            + (f"<td>{esc(r.get('transport'))}</td>" if transport else "")
            + f"<td title='{esc(r.get('library_basis') or '')}'>{_library_cell(r)}</td>"
            f"<td>{esc(r['outcome'])}</td><td class='cell'>{esc(reason)}</td>"
            f"<td class='num'>{numbers.gbps(peak.get(r['run_id']))}</td>"
            f"<td class='num'>{numbers.gbps(avg)}</td><td>{link}</td></tr>"
        )
    more = len(runs) - MAX_RUN_ROWS
    tail = f"<p>... and {more} more runs (see tables/runs.csv).</p>" if more > 0 else ""
    return f"<table class='runs' id='run-table'>{head}{''.join(body)}</table>{tail}"


def _library_cell(r: dict[str, Any]) -> str:
    """The library, its version, and whether it was guessed."""
    lib = esc(r.get("library"))
    version = r.get("library_version")
    if version is not None and version == version and str(version):
        lib += f" {esc(version)}"
    if str(r.get("library_basis") or "").startswith("guess"):
        lib += " <i>(guessed)</i>"
    return lib


def _table(frame: pd.DataFrame) -> str:
    head = "".join(f"<th>{esc(c)}</th>" for c in frame.columns)
    body = "".join(
        "<tr>" + "".join(f"<td class='cell'>{_value(v)}</td>" for v in row) + "</tr>"
        for row in frame.itertuples(index=False)
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def _value(value: Any) -> str:
    """A table cell: text with its bandwidths in the report's one format."""
    return esc(numbers.gbps_in_text(value)) if isinstance(value, str) else esc(value)


def outcomes_html(tables: Tables) -> str:
    """The outcome counts as a table and the runs that did not end ok, with their reasons."""
    counts = outcome_counts(tables.runs)
    wide = counts.pivot_table(
        index=["scenario", "column"], columns="outcome", values="n", aggfunc="sum", fill_value=0
    )
    wide = wide.astype(int).reset_index()
    cols = ["run_id", "scenario", "outcome", "reason", "failed_rank", "failed_host", "path"]
    bad = tables.runs[tables.runs["outcome"] != "ok"][cols]
    parts = [_table(wide)]
    if len(bad):
        parts += [f"<h3>Runs that did not end ok ({len(bad)})</h3>", _table(bad[:MAX_PROBLEM_RUNS])]
    return "\n".join(parts)


def _figure_block(fig: Figure) -> str:
    note = f"<p class='note'>{prose_html(fig.note)}</p>" if fig.note else ""
    if fig.caption:
        note += f"<p class='cell'>{prose_html(numbers.gbps_in_text(fig.caption))}</p>"
    if not fig.spec.get("data"):  # nothing to draw: say why, skip the empty axes
        return f"<div class='fig'>{note or '<p>No data.</p>'}</div>"
    return (
        f"<div class='fig'>{note}<div id='plot-{esc(fig.id)}' class='r2-plot'></div>"
        f"<script type='application/json' class='r2-figure' id='figure-{esc(fig.id)}'>"
        f"{figure_json(fig.spec)}</script></div>"
    )


def warnings_html(warnings: list[str]) -> str:
    """Runs skipped (a bad record, a link out of the sweep), counted once, or values left out."""
    items = "".join(f"<li>{esc(w)}</li>" for w in warnings)
    return f"<p>Left out of every table and figure below:</p><ul>{items}</ul>"


def _section(title: str, body: str, anchor: str = "") -> str:
    ident = f" id='{esc(anchor)}'" if anchor else ""
    return f"<section{ident}><h2>{esc(title)}</h2>\n{body}\n</section>"


def _lead(tables: Tables) -> str:
    """What ran, above the summary table (and that the libraries were emulated, if so)."""
    facts = sweep_facts(tables)
    emulated = (
        " The CPU emulation of stock NCCL and R-2CCL on the virtual testbed (TCP NICs), not the "
        "libraries themselves (docs/gpu-notes.md has what the real ones did)."
        if facts.cpu
        else ""
    )
    return f"<p>{esc(facts.sentence())}{esc(emulated)}</p>"


SECTIONS_NAV = (
    ("outcomes", "Outcomes"),
    ("busbw", "Bus bandwidth"),
    ("overhead", "Overhead"),
    ("timelines", "Timelines"),
    ("recovery", "Recovery"),
    ("runs", "Runs"),
    ("provenance", "Provenance"),
)
"""Links under the title to the sections a reader looks for after the summary."""


def _nav(training: bool = False) -> str:
    """The links; a sweep with training runs links its training section first."""
    shown = ((TRAINING_ANCHOR, "Training"), *SECTIONS_NAV) if training else SECTIONS_NAV
    links = " · ".join(f"<a href='#{k}'>{esc(t)}</a>" for k, t in shown)
    return f"<nav>Below: {links}</nav>"


def render_report(
    sweep_dir: Path,
    tables: Tables,
    figures: list[Figure],
    summary: ProvenanceSummary,
    page_dir: Path | None = None,
) -> str:
    """The report page as a string (`page_dir`: where it will be written, for log links):
    the answer first (what happened per library, mode and fault), then the figures, the
    per-run table and provenance last."""
    by_kind: dict[str, list[Figure]] = {}
    for fig in figures:
        by_kind.setdefault(fig.id.split("-")[0], []).append(fig)
    timelines = "".join(_figure_block(f) for f in by_kind.get("timeline", []))
    columns = summary_columns(tables)
    sections = [
        summary_section(summary_rows(tables, columns), _lead(tables), columns),
        *([_section("Warnings", warnings_html(tables.warnings))] if tables.warnings else []),
        *recovery_cost_section(sweep_dir, tables, _section, _blocks, by_kind.get("recoverycost")),
        *training_section(tables, _section, _blocks, by_kind.get("training")),
        _section("Outcomes", _blocks(by_kind.get("outcomes")) + outcomes_html(tables), "outcomes"),
        *campaign_section(sweep_dir, tables, _section, _table),
        _section("Bus bandwidth vs message size", _blocks(by_kind.get("busbw")), "busbw"),
        _section("Overhead vs a no-fault baseline", _blocks(by_kind.get("overhead")), "overhead"),
        _section(
            "Timelines around faults (each run's largest size; fault window shaded)",
            timelines or "<p>No run with faults in this sweep.</p>",
            "timelines",
        ),
        recovery_section(tables),
        *_nics_section(tables),
        *_evidence_section(tables),
        *model_section(tables, _section, _blocks),
        _section("Runs", runs_html(sweep_dir, tables, Path(page_dir or sweep_dir)), "runs"),
        _section("Provenance", provenance_html(summary) + _made(sweep_dir, tables), "provenance"),
    ]
    header = f"<h1>r2bench report: {esc(Path(sweep_dir).name)}</h1>{_nav(has_training(tables))}"
    return _page(esc(f"r2bench report: {Path(sweep_dir).name}"), header + "\n".join(sections))


def _made(sweep_dir: Path, tables: Tables) -> str:
    """What the page was made from. No build time and no path beyond the sweep's name: the
    same sweep gives the same page, wherever and whenever it is built (the committed example
    reports are compared byte for byte)."""
    return (
        f"<p class='small'>{len(tables.runs)} runs, {len(tables.results)} result rows, "
        f"{tables.n_iterations} iterations, {len(tables.events)} events. "
        f"Made by r2bench {esc(r2bench.__version__)} from the sweep "
        f"<code>{esc(Path(sweep_dir).name)}</code>.</p>"
    )


def _nics_section(tables: Tables) -> list[str]:
    """The NIC traffic section, when a faulted run has counters."""
    figures = nic_panel_figures(tables)
    return [_section(SECTION_TITLE, _blocks(figures))] if figures else []


def _evidence_section(tables: Tables) -> list[str]:
    """The failure evidence section, when the sweep has a NIC fault."""
    table = ev.evidence_html(tables)
    if not table:
        return []
    parts = [table]
    for i, window in enumerate(ev.traffic_windows(tables)):
        parts.append(ev.traffic_table_html(window))
        fig = ev.traffic_figure(window, i)
        parts.append(_figure_block(fig) if fig else "")
    return [_section(ev.SECTION_TITLE, "\n".join(parts))]


def _blocks(figs: list[Figure] | None) -> str:
    return "".join(_figure_block(f) for f in figs or [])


def _page(title: str, body: str) -> str:
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<title>{title}</title><style>{_STYLE}</style>"
        f"<script type='text/javascript'>{get_plotlyjs()}</script></head>"
        f"<body>{body}<script type='text/javascript'>{_LOADER}</script></body></html>"
    )


def build_report(sweep_dir: Path, tables: Tables, out: Path) -> list[Figure]:
    """Write the report of a sweep to `out` (atomically); returns its figures."""
    require_report_extra("the HTML report")
    figures = [*all_figures(tables), *training_figures(tables), *timeline_figures(tables)]
    summary = summarize_provenance(tables)
    page = render_report(sweep_dir, tables, figures, summary, Path(out).resolve().parent)
    atomic_write(out, page)
    return figures
