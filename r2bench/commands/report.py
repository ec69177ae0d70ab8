"""`r2bench report`: a sweep's tables and its HTML report."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.text import Text

from r2bench.errors import ExitCode, WriteFailed
from r2bench.runfolder.store import sweep_folder
from r2bench.safeio import OutsideFolder
from r2bench.textsafe import printable

REPORT_NAME = "report.html"


def report_command(sweep_dir: Path, out: Path | None, fmt: str | None) -> int:
    """Rebuild the tables of a sweep (results/<sweep>/tables/) and write one self-contained,
    offline HTML report (default <sweep>/report.html): a table of every run, busbw vs size per
    series with spread, overhead vs a named no-fault baseline, timelines around faults, outcome
    matrix, provenance. Needs the `report` extra (raises MissingExtra without it).

    --format png|svg|pdf also writes each figure as a static file next to the report (needs
    kaleido and a Chrome/Chromium); if that fails the HTML is still written, a warning says why,
    and the exit code stays 0. Exit 2 if SWEEP_DIR is not a folder, the format is unknown or
    the report cannot be written.
    """
    from r2bench.extras import require_report_extra

    require_report_extra("r2bench report")
    from r2bench.report.export import FORMATS, export_figures
    from r2bench.report.html import build_report
    from r2bench.tables.build import build_tables, rebuild

    console, errors = Console(soft_wrap=True), Console(stderr=True, soft_wrap=True)
    if fmt is not None and fmt not in FORMATS:
        errors.print(
            Text(printable(f"r2bench report: unknown format {fmt!r}; use {'|'.join(FORMATS)}")),
            style="red",
        )
        return ExitCode.USAGE
    sweep_dir = sweep_folder(sweep_dir)  # `.`, `RUN/..`: the folder they name
    if not sweep_dir.is_dir() or not sweep_dir.name:
        what = "is not a folder" if not sweep_dir.is_dir() else "is no sweep folder"
        errors.print(Text(printable(f"r2bench report: {sweep_dir} {what}")), style="red")
        return ExitCode.USAGE
    try:
        tables = rebuild(sweep_dir)
    except (OSError, OutsideFolder) as exc:  # a read-only copy, a tables/ link: from memory
        errors.print(
            Text(printable(f"warning: tables not written ({exc}); building them in memory"))
        )
        tables = build_tables(sweep_dir)
    for line in tables.warnings:
        errors.print(Text(printable(f"warning: {line}")), style="yellow")
    if len(tables.runs) == 0:
        errors.print(
            Text(
                f"r2bench report: no runs in {sweep_dir} (nothing to report; run a sweep or import)"
            ),
            style="red",
        )
        return ExitCode.USAGE
    target = out or sweep_dir / REPORT_NAME
    try:
        figures = build_report(sweep_dir, tables, target)
    except OSError as exc:  # a WriteFailed names its file already
        what = str(exc) if isinstance(exc, WriteFailed) else f"cannot write {target}: {exc}"
        errors.print(Text(printable(f"r2bench report: {what}")), style="red", soft_wrap=True)
        return ExitCode.USAGE
    except ValueError as exc:  # an input the report reads beside the runs (at-scale.yaml)
        errors.print(Text(printable(f"r2bench report: {exc}")), style="red")
        return ExitCode.USAGE
    console.print(
        Text(printable(f"report: {target} ({len(tables.runs)} runs, {len(figures)} figures)"))
    )
    if fmt is not None:
        result = export_figures(figures, target.parent, fmt, target.stem)
        if result.error:
            errors.print(
                Text(printable(f"warning: no static figures written: {result.error}")),
                style="yellow",
            )
        for path in result.paths:
            console.print(Text(printable(f"figure: {path}")))
    return ExitCode.OK


class FigureFormat(str, Enum):
    """Static figure formats of `report --format`."""

    png = "png"
    svg = "svg"
    pdf = "pdf"


def command(
    sweep_dir: Annotated[
        Path,
        typer.Argument(
            help="A sweep folder, e.g. results/my-sweep.", show_default=False, metavar="SWEEP_DIR"
        ),
    ],
    out: Annotated[
        Path | None,
        typer.Option(
            "--out", "-o", help="HTML file (default: SWEEP_DIR/report.html).", metavar="FILE"
        ),
    ] = None,
    fmt: Annotated[
        FigureFormat | None,
        typer.Option("--format", help="Also write each figure as a static file."),
    ] = None,
) -> None:
    """Rebuild a sweep's tables and write its HTML report.

    The tables (Parquet + CSV) and one self-contained HTML report that works offline. It opens
    with the answer: per library and mode under each fault scenario, what happened (survived,
    crashed, hung, wrong results), detection and stall, busbw after vs before the fault, one
    sentence a row. Then the outcome matrix, busbw vs size per series (runs that share
    collective, library and version, R2CC_MODE, transport, ranks, GPUs, nodes and NCCL_*
    settings) with spread over repeats, overhead vs a named no-fault baseline (shown as
    overhead only outside the run-to-run spread), timelines with fault windows shaded and R2CC
    events marked, NIC traffic, and last every run and the provenance.

    Exit codes: 0 written (if a static --format cannot be exported, the HTML is still written and
    a warning says why), 2 missing sweep folder, unknown format or unwritable output.

    Example: [bold]r2bench report results/quickstart --format png[/]
    """
    raise typer.Exit(report_command(sweep_dir, out, fmt.value if fmt else None))
