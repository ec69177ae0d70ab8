"""`r2bench compare BASELINE CANDIDATE`: exit 0 no regression, 1 regression, 2 could not compare
(bad input, nothing matched, or a baseline of another testbed, nccl-tests or library version:
`compare.provenance`). Input that cannot be compared is raised as a CompareInputError, which
`r2bench.cli.main` reports (exit 2)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.text import Text

from r2bench.errors import ExitCode
from r2bench.safeio import atomic_write
from r2bench.textsafe import printable

if TYPE_CHECKING:  # the report extra: imported when compare runs, after require_report_extra
    from r2bench.compare.policy import Policy
    from r2bench.compare.samples import SweepData
    from r2bench.compare.verdict import Comparison, Gate


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
    allow_provenance_mismatch: bool = False,
) -> int:
    """Compare, print, write the requested files; returns the exit code. `gate` says what may
    pass unjudged besides what the policy lets pass (by default nothing: incomplete, missing
    and undecided cells fail; the policy's `undecided: pass` lets undecided ones pass); a
    baseline whose testbed, nccl-tests or library version differs from the candidate's is
    refused (CompareInputError) unless `allow_provenance_mismatch`."""
    from r2bench.compare.classes import class_lines
    from r2bench.compare.output import junit, markdown
    from r2bench.compare.policy import load_policy
    from r2bench.compare.reference import is_reference_file, reference_from_sweep, reference_yaml
    from r2bench.compare.samples import CompareInputError, load_sweep
    from r2bench.compare.terminal import print_details, print_verdict
    from r2bench.compare.verdict import Gate

    out = console or Console()
    err = Console(stderr=True)
    with _cannot_compare():
        policy = load_policy(policy_file)
        if write_reference is not None:
            if is_reference_file(baseline):
                raise CompareInputError("--write-reference needs a sweep folder as BASELINE")
            ref = reference_from_sweep(load_sweep(baseline), policy)
            atomic_write(write_reference, reference_yaml(ref))
            wrote = (
                f"wrote {write_reference}: {len(ref.cells)} cells, {len(ref.series)} series "
                f"from {baseline}"
            )
            out.print(Text(printable(wrote)))  # a path is text, never markup
            if candidate is None:
                return ExitCode.OK
        if candidate is None:
            raise CompareInputError("CANDIDATE is missing (a sweep folder)")
        cand = load_sweep(candidate)
        result, warnings, base = _compare(baseline, cand, policy, allow_provenance_mismatch)
        result.gate = result.gate.widened(gate or Gate())
    print_verdict(result, out)  # the verdict first, then what it stands on
    _warn(err, [*cand.tables.warnings, *warnings])
    print_details(result, out, everything=show_all)
    base_tables = base.tables if base is not None else None
    for line in class_lines(result.series_columns, base_tables, cand.tables):
        out.print(Text(printable(line)))
    if markdown_file is not None:
        atomic_write(markdown_file, markdown(result))
    if junit_file is not None:
        atomic_write(junit_file, junit(result))
    return result.exit_code


@contextmanager
def _cannot_compare() -> Iterator[None]:
    """A ValueError of the readers (a policy, a reference, a sweep, a provenance mismatch) is
    input that cannot be compared: raised again as a CompareInputError saying so."""
    from r2bench.compare.samples import CompareInputError

    try:
        yield
    except ValueError as exc:
        raise CompareInputError(f"cannot compare: {exc}") from exc


def _warn(err: Console, lines: list[str]) -> None:
    for line in lines:
        err.print(Text(printable(f"warning: {line}")), style="yellow", soft_wrap=True)


def _compare(
    baseline: Path, cand: SweepData, policy: Policy, allow_mismatch: bool
) -> tuple[Comparison, list[str], SweepData | None]:
    """Load the baseline (a reference file or a sweep), check that its provenance matches the
    candidate's (ProvenanceMismatch otherwise), and compare; the warnings come back to be
    shown after the verdict, with the baseline sweep (None: a reference file)."""
    from r2bench.compare.provenance import check_provenance, sweep_facts
    from r2bench.compare.reference import is_reference_file, load_reference
    from r2bench.compare.samples import load_sweep
    from r2bench.compare.verdict import compare_reference, compare_sweeps

    if is_reference_file(baseline):
        ref = load_reference(baseline)
        warnings = check_provenance(ref.provenance, sweep_facts(cand), allow_mismatch)
        return compare_reference(ref, cand, policy), warnings, None
    base = load_sweep(baseline)
    warnings = check_provenance(sweep_facts(base), sweep_facts(cand), allow_mismatch)
    return compare_sweeps(base, cand, policy), [*base.tables.warnings, *warnings], base


def command(
    baseline: Annotated[
        Path,
        typer.Argument(
            help="A sweep folder, or a reference YAML file.",
            show_default=False,
            metavar="BASELINE",
        ),
    ],
    candidate: Annotated[
        Path | None,
        typer.Argument(help="The sweep folder to judge.", show_default=False, metavar="CANDIDATE"),
    ] = None,
    policy: Annotated[
        Path | None,
        typer.Option("--policy", help="Policy YAML (minimum effects, xfail).", metavar="FILE"),
    ] = None,
    markdown: Annotated[
        Path | None,
        typer.Option("--markdown", help="Write a markdown summary (PR comment).", metavar="FILE"),
    ] = None,
    junit: Annotated[
        Path | None, typer.Option("--junit", help="Write JUnit XML (CI).", metavar="FILE")
    ] = None,
    write_reference: Annotated[
        Path | None,
        typer.Option(
            "--write-reference",
            help="Write BASELINE (a sweep) as a reference YAML.",
            metavar="FILE",
        ),
    ] = None,
    show_all: Annotated[bool, typer.Option("--all", help="Also list `same` rows.")] = False,
    allow_incomplete: Annotated[
        bool,
        typer.Option(
            "--allow-incomplete",
            help="Let candidate runs that did not finish (or could not be read) and cells "
            "missing from the candidate pass the gate.",
        ),
    ] = False,
    allow_undecided: Annotated[
        bool,
        typer.Option(
            "--allow-undecided",
            help="Let `undecided` cells (too few samples, or a change the data cannot tell "
            "from noise) pass the gate, as the policy's `undecided: pass` does.",
        ),
    ] = False,
    allow_provenance_mismatch: Annotated[
        bool,
        typer.Option(
            "--allow-provenance-mismatch",
            help="Compare even when BASELINE was measured on another testbed or with another "
            "nccl-tests or library version than CANDIDATE (each difference is then a warning).",
        ),
    ] = False,
) -> None:
    """Compare a sweep with a baseline: noise-aware regression verdicts.

    Per collective x size x library/mode x scenario: a seeded bootstrap interval over repeats and iterations, a minimum effect per metric, and
    outcome changes (ok -> crashed/timeout/wrong_results) always a regression. Identical
    samples are `same` (a sweep compared with itself passes). The gate counts every cell:
    candidate runs that did not finish, missing cells and `undecided` ones (too few samples,
    or too noisy: more repeats decide them) fail it too, unless --allow-incomplete /
    --allow-undecided (or the policy's `undecided: pass`) let them pass. The first lines say
    the verdict, why, and how to get a decision.

    A BASELINE measured on another testbed, or with another nccl-tests version or NCCL version
    of a library both sides ran, is refused, naming the field and both values, unless
    --allow-provenance-mismatch; a version unknown on either side is a warning.

    Exit codes: 0 passed, 1 regression or cells not judged, 2 could not compare (nothing
    matched, bad input, provenance differs).

    Example: [bold]r2bench compare results/baselines/ci-virtual.yaml results/ci/ci-virtual[/]
    """
    from r2bench.extras import require_report_extra

    require_report_extra("compare")
    from r2bench.compare.verdict import Gate

    gate = Gate(allow_incomplete=allow_incomplete, allow_undecided=allow_undecided)
    raise typer.Exit(
        compare_command(
            baseline,
            candidate,
            policy,
            markdown,
            junit,
            write_reference,
            show_all,
            gate=gate,
            allow_provenance_mismatch=allow_provenance_mismatch,
        )
    )
