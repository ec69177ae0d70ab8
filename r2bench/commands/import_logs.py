"""`r2bench import`: a folder of nccl-tests logs made a results sweep."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.text import Text

from r2bench.analysis.importer import import_dir
from r2bench.errors import ExitCode
from r2bench.runfolder.store import RunStore
from r2bench.textsafe import printable


def import_command(directory: Path, sweep: str | None, results: Path) -> int:
    """Import a folder of existing nccl-tests logs (text and/or -J JSON, a text and the JSON it
    wrote paired) into a results sweep: one run folder per run `r2bench parse` shows of a log
    (the same reading: library, R2CC_MODE, outcome, iterations), spec reconstructed from the
    output, so `r2bench report` works on them. Runs already imported are skipped. Exit 2 if DIR is not a
    readable folder."""
    console, errors = Console(soft_wrap=True), Console(stderr=True, soft_wrap=True)
    if not directory.is_dir():
        errors.print(Text(printable(f"r2bench import: {directory} is not a folder")), style="red")
        return ExitCode.USAGE
    try:
        target = RunStore(results, sweep or directory.resolve().name).sweep_dir
    except ValueError as exc:  # a sweep name that is not one folder name
        errors.print(
            Text(
                printable(f"r2bench import: --sweep: {exc}; give one folder name, e.g. h200-logs")
            ),
            style="red",
        )
        return ExitCode.USAGE
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        errors.print(
            Text(
                printable(
                    f"r2bench import: cannot write the results folder {target}:"
                    f" {exc.strerror or exc}"
                )
            ),
            style="red",
        )
        return ExitCode.USAGE
    try:
        report = import_dir(directory, results, sweep)
    except OSError as exc:
        errors.print(
            Text(printable(f"r2bench import: cannot read {directory}: {exc}")), style="red"
        )
        return ExitCode.USAGE
    for run_id, source in report.imported:
        console.print(Text(printable(f"imported {source} -> {run_id}")))
    for source, reason in report.skipped:
        errors.print(Text(printable(f"skipped {source}: {reason}")), style="yellow")
    if report.scenarios:
        named = ", ".join(f"{src} -> {sc}" for src, sc in sorted(report.scenarios.items())[:5])
        more = f" and {len(report.scenarios) - 5} more" if len(report.scenarios) > 5 else ""
        console.print(
            Text(
                printable(
                    f"note: {len(report.scenarios)} file name(s) with a dot became scenarios"
                    f" (what follows the first dot): {named}{more}; rename the files to change"
                    " that"
                )
            )
        )
    console.print(
        Text(
            f"{len(report.imported)} imported, {len(report.already)} already there, "
            f"{len(report.skipped)} skipped -> {report.sweep_dir}"
        )
    )
    if report.imported or report.already:
        from r2bench.extras import MissingExtra
        from r2bench.tables.build import rebuild

        try:
            rebuild(report.sweep_dir)
        except MissingExtra as exc:
            errors.print(Text(printable(f"note: tables not written: {exc}")), style="yellow")
    return ExitCode.OK


def command(
    directory: Annotated[
        Path,
        typer.Argument(
            help="Folder of existing nccl-tests logs.", show_default=False, metavar="DIR"
        ),
    ],
    sweep: Annotated[
        str | None,
        typer.Option("--sweep", help="Sweep name (default: the folder's name).", metavar="NAME"),
    ] = None,
    results: Annotated[Path, typer.Option("--results", help="Results root.", metavar="DIR")] = Path(
        "results"
    ),
) -> None:
    """Turn a folder of nccl-tests logs into a results sweep.

    Text and/or -J JSON logs, paired by the text's `Writing JSON output to` line, else by file
    stem, become one run folder per run (a log holding several runs gives several), the runs
    `r2bench parse` shows of it with the same library and R2CC_MODE, so `r2bench report` works
    on them.

    Compressed logs (.gz, .bz2, .xz) and UTF-16 ones are read; other archives are listed as
    skipped. A value no run can hold (a size beyond int64, a #wrong of 10^23) costs its row,
    warned with its line; a log r2bench cannot read is skipped, named, and the rest imported.

    Exit codes: 0 imported, 2 DIR is not a folder or the results could not be written (a full
    disk, a file size limit: the file and the system's words are named; no half run is left).

    Example: [bold]r2bench import ~/nccl-logs --sweep h200-logs && r2bench report results/h200-logs[/]
    """
    raise typer.Exit(import_command(directory, sweep, results))
