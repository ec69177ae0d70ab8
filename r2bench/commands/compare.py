"""`r2bench compare BASELINE CANDIDATE`: exit 0 no regression, 1 regression, 2 could not compare."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.text import Text

from r2bench.compare.output import junit, markdown, print_table
from r2bench.compare.policy import load_policy
from r2bench.compare.reference import (
    is_reference_file,
    load_reference,
    reference_from_sweep,
    reference_yaml,
)
from r2bench.compare.samples import CompareInputError, load_sweep
from r2bench.compare.verdict import (
    EXIT_CANNOT,
    EXIT_OK,
    Comparison,
    Gate,
    compare_reference,
    compare_sweeps,
)
from r2bench.records.store import atomic_write


def compare_command(
    baseline: Path,
    candidate: Path | None,
    policy_file: Path | None = None,
    markdown_file: Path | None = None,
    junit_file: Path | None = None,
    write_reference: Path | None = None,
    show_all: bool = False,
    console: Console | None = None,
    gate: Gate | None = None,
) -> int:
    """Compare, print, write the requested files; returns the exit code. `gate` says what may
    pass unjudged (by default nothing: incomplete, missing and undecided cells fail)."""
    out = console or Console()
    err = Console(stderr=True)
    try:
        policy = load_policy(policy_file)
        if write_reference is not None:
            if is_reference_file(baseline):
                raise CompareInputError("--write-reference needs a sweep folder as BASELINE")
            ref = reference_from_sweep(load_sweep(baseline), policy)
            atomic_write(write_reference, reference_yaml(ref))
            out.print(
                f"wrote {write_reference}: {len(ref.cells)} cells, {len(ref.series)} series "
                f"from {baseline}"
            )
            if candidate is None:
                return EXIT_OK
        if candidate is None:
            raise CompareInputError("CANDIDATE is missing (a sweep folder)")
        cand = load_sweep(candidate)
        for line in cand.tables.warnings:
            err.print(Text(f"warning: {line}"), style="yellow", soft_wrap=True)
        result: Comparison
        if is_reference_file(baseline):
            result = compare_reference(load_reference(baseline), cand, policy)
        else:
            result = compare_sweeps(load_sweep(baseline), cand, policy)
        result.gate = gate or Gate()
    except (CompareInputError, ValueError) as exc:
        err.print(f"[red]cannot compare:[/] {exc}")
        return EXIT_CANNOT
    print_table(result, out, everything=show_all)
    if markdown_file is not None:
        atomic_write(markdown_file, markdown(result))
    if junit_file is not None:
        atomic_write(junit_file, junit(result))
    return result.exit_code
