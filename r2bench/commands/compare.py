"""`r2bench compare BASELINE CANDIDATE`: exit 0 no regression, 1 regression, 2 could not compare
(bad input, nothing matched, or a baseline of another testbed, nccl-tests or library version:
`compare.provenance`). Input that cannot be compared is raised as a CompareInputError, which
`r2bench.cli.main` reports (exit 2)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rich.console import Console
from rich.text import Text

from r2bench.compare.output import junit, markdown
from r2bench.compare.policy import Policy, load_policy
from r2bench.compare.provenance import check_provenance, sweep_facts
from r2bench.compare.reference import (
    is_reference_file,
    load_reference,
    reference_from_sweep,
    reference_yaml,
)
from r2bench.compare.samples import CompareInputError, SweepData, load_sweep
from r2bench.compare.terminal import print_details, print_verdict
from r2bench.compare.verdict import (
    Comparison,
    Gate,
    compare_reference,
    compare_sweeps,
)
from r2bench.errors import ExitCode
from r2bench.safeio import atomic_write
from r2bench.textsafe import printable


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
    out = console or Console()
    err = Console(stderr=True)
    with _cannot_compare():
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
                return ExitCode.OK
        if candidate is None:
            raise CompareInputError("CANDIDATE is missing (a sweep folder)")
        cand = load_sweep(candidate)
        result, warnings = _compare(baseline, cand, policy, allow_provenance_mismatch)
        result.gate = result.gate.widened(gate or Gate())
    print_verdict(result, out)  # the verdict first, then what it stands on
    _warn(err, [*cand.tables.warnings, *warnings])
    print_details(result, out, everything=show_all)
    if markdown_file is not None:
        atomic_write(markdown_file, markdown(result))
    if junit_file is not None:
        atomic_write(junit_file, junit(result))
    return result.exit_code


@contextmanager
def _cannot_compare() -> Iterator[None]:
    """A ValueError of the readers (a policy, a reference, a sweep, a provenance mismatch) is
    input that cannot be compared: raised again as a CompareInputError saying so."""
    try:
        yield
    except ValueError as exc:
        raise CompareInputError(f"cannot compare: {exc}") from exc


def _warn(err: Console, lines: list[str]) -> None:
    for line in lines:
        err.print(Text(printable(f"warning: {line}")), style="yellow", soft_wrap=True)


def _compare(
    baseline: Path, cand: SweepData, policy: Policy, allow_mismatch: bool
) -> tuple[Comparison, list[str]]:
    """Load the baseline (a reference file or a sweep), check that its provenance matches the
    candidate's (ProvenanceMismatch otherwise), and compare; the warnings come back to be
    shown after the verdict."""
    if is_reference_file(baseline):
        ref = load_reference(baseline)
        warnings = check_provenance(ref.provenance, sweep_facts(cand), allow_mismatch)
        return compare_reference(ref, cand, policy), warnings
    base = load_sweep(baseline)
    warnings = check_provenance(sweep_facts(base), sweep_facts(cand), allow_mismatch)
    return compare_sweeps(base, cand, policy), [*base.tables.warnings, *warnings]
