"""`r2bench figures SWEEP... [--out DIR]`: the paper's figures with their claims checked."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from r2bench.errors import ExitCode

VERDICT_STYLE = {"holds": "green", "does not hold": "bold red", "not tested": "yellow"}


def distinct_folders(folders: list[Path]) -> list[Path]:
    """`folders` with each folder once, however it is spelt (`S`, `./S/`, a link to it), in
    the order first named: a sweep named twice must not count its runs twice."""
    seen: dict[Path, Path] = {}
    for folder in folders:
        seen.setdefault(folder.resolve(), folder)
    return list(seen.values())


def named_again(folders: list[Path]) -> list[tuple[Path, Path]]:
    """(folder, the earlier name of the same folder) for each folder named a second time."""
    first: dict[Path, Path] = {}
    again = []
    for folder in folders:
        earlier = first.setdefault(folder.resolve(), folder)
        if earlier is not folder:
            again.append((folder, earlier))
    return again


def command(
    sweeps: Annotated[
        list[Path], typer.Argument(help="Sweep folders (results/<sweep>).", show_default=False)
    ],
    out: Annotated[
        Path | None,
        typer.Option(
            "--out", "-o", help="Folder for the figures (default: <first sweep>/figures)."
        ),
    ] = None,
    fmt: Annotated[str, typer.Option("--format", help="Static format: png, svg or pdf.")] = "png",
) -> None:
    """Draw the paper's figures from one or more sweeps: busbw with one NIC down, overhead vs
    the no-fault baseline next to the paper's claims, stall and recovery timeline, outcome
    matrix, NIC traffic shift. Each drawn figure says whether its claim holds on this data, with
    the numbers; each missing one names the data it needs and the experiment that makes it.

    Exit codes: 0 done (figures with missing inputs are listed, not errors), 2 a sweep folder
    does not exist or holds no run.

    Example: [bold]r2bench figures results/quickstart --out figures/[/]
    """
    from r2bench.extras import require_report_extra

    require_report_extra("r2bench figures")
    from r2bench.figures.render import draw_all, load_sweeps, summary_json, write_all
    from r2bench.runfolder.store import RunStore, sweep_folder
    from r2bench.safeio import OutsideFolder, atomic_write, inside
    from r2bench.textsafe import printable

    console = Console(soft_wrap=True)
    err = Console(stderr=True)
    for sweep, first in named_again(sweeps):
        again = f"{first} is named again" + (f" (as {sweep})" if sweep != first else "")
        err.print(printable(f"note: {again}: its runs are counted once"),
                  markup=False, highlight=False, soft_wrap=True)  # fmt: skip
    sweeps = distinct_folders([sweep_folder(sweep) for sweep in sweeps])  # `.`, `RUN/..`
    for sweep in sweeps:
        if not sweep.is_dir() or not sweep.name:
            what = "no such sweep folder" if not sweep.is_dir() else "no sweep folder"
            err.print(printable(f"figures: {sweep}: {what}"), markup=False, highlight=False)
            raise typer.Exit(ExitCode.USAGE)
        if not any(RunStore.at(sweep).run_dirs()):
            err.print(
                f"figures: {sweep}: no runs in it (nothing to draw; run a sweep or import logs)",
                markup=False, highlight=False,
            )  # fmt: skip
            raise typer.Exit(ExitCode.USAGE)
    out_dir = out or sweeps[0] / "figures"
    try:  # the default folder is the sweep's own: a link there must not lead elsewhere
        inside(out_dir if out else sweeps[0], out_dir)
    except OutsideFolder as exc:
        err.print(f"figures: {exc}", markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(ExitCode.USAGE) from None
    tables = load_sweeps(sweeps)
    for line in tables.warnings:
        err.print(f"warning: {line}", style="yellow", markup=False, highlight=False, soft_wrap=True)
    outcomes, static_error = write_all(draw_all(tables), out_dir, fmt)
    atomic_write(out_dir / "claims.json", summary_json(outcomes) + "\n", out_dir)
    missing = [o for o in outcomes if o.drawn is None]
    for o in outcomes:
        if o.drawn is None:
            continue
        claim = o.drawn.claim
        style = VERDICT_STYLE.get(claim.verdict, "")
        files = escape(printable(", ".join(str(p) for p in o.files)))  # paths: never markup
        console.print(f"[bold]{o.definition.id}[/]: {files}")
        console.print(f"  claim: {escape(claim.text)}: [{style}]{claim.verdict}[/]")
        for number in claim.numbers:
            console.print(f"    {escape(number)}", highlight=False)
    if missing:
        console.print("[bold]missing inputs[/] (figures not drawn):")
        for o in missing:
            console.print(
                f"  {o.definition.id}: needs {escape(o.missing)}; run {o.experiment}",
                highlight=False,
            )
    if static_error:
        err.print(f"static figures not written: {static_error}", markup=False, highlight=False)
    console.print(printable(f"claims: {out_dir / 'claims.json'}"), markup=False, highlight=False)
