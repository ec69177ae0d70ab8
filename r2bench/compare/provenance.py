"""Whether the two sides of a comparison were measured on comparable software and testbeds.

A candidate is only judged against a baseline measured on the same testbed, with the same
nccl-tests version and the same version of each library both sides ran: a faster NCCL or
another cluster would otherwise read as a regression or hide one. A library's version is the
one its runs printed (NCCL's `NCCL version` line, R-2CCL's too): what was loaded, not the ref a
recipe pinned, so two commits of a library built on the same NCCL still compare; a run that
printed none adds nothing. The facts are flat, one value per field (`testbed`,
`nccl_tests_version`, `library_version[<library>]`), so a reference file keeps them as
written (`provenance:`). A field nobody recorded (an imported log without
a version line, a reference written before references kept provenance) is unknown: it is
reported as a warning, never as a mismatch. So is a field only some runs recorded (8 of 9 runs
name no testbed): the value is what the others recorded, and `<field> unknown in` says how many
runs it leaves unchecked.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from r2bench.analysis.importer import IMPORTED_TESTBED
from r2bench.compare.samples import SweepData
from r2bench.errors import InputError
from r2bench.runfolder import runmodel
from r2bench.runfolder import store as st

Facts = dict[str, str | None]
"""field -> value (None: unknown)."""

ALLOW_FLAG = "--allow-provenance-mismatch"
LIBRARY_FIELD = "library_version[{}]"
UNKNOWN_IN = " unknown in"
"""Suffix of the fact that says how many runs recorded no value of a field (`3 of 9 runs`)."""


class ProvenanceMismatch(InputError, ValueError):
    """The sides differ in what makes a comparison meaningful; the message names each field,
    both values and the flag that compares anyway."""


@dataclass(frozen=True)
class Difference:
    """One field whose value differs between baseline and candidate."""

    field: str
    baseline: str
    candidate: str

    def text(self) -> str:
        """`testbed: baseline 'a', candidate 'b'`."""
        return f"{self.field}: baseline {self.baseline!r}, candidate {self.candidate!r}"


def _joined(values: object) -> str | None:
    """The distinct non-empty values, sorted and joined (None when there is none)."""
    seen = sorted({str(v) for v in pd.Series(values).dropna() if str(v).strip()})
    return ", ".join(seen) or None


def _add(facts: Facts, field: str, values: list[object]) -> None:
    """`field`: the values the runs recorded, joined; and when some runs recorded one and
    others none, `<field> unknown in`: how many recorded none."""
    known = [v for v in values if v is not None and not pd.isna(v) and str(v).strip()]
    facts[field] = _joined(known)
    if known and len(known) < len(values):
        facts[field + UNKNOWN_IN] = f"{len(values) - len(known)} of {len(values)} runs"


def _testbeds(sweep: SweepData) -> list[object]:
    """The testbed each run names in spec.json (None for one that names none; imported runs
    know none)."""
    names: list[object] = []
    for run_dir in st.RunStore.at(sweep.path).run_dirs() if sweep.path.is_dir() else []:
        name = runmodel.load_run(run_dir).spec.testbed
        names.append(name if isinstance(name, str) and name != IMPORTED_TESTBED else None)
    return names


def sweep_facts(sweep: SweepData) -> Facts:
    """The provenance of a sweep that a comparison must agree on."""
    runs = sweep.tables.runs
    facts: Facts = {}
    _add(facts, "testbed", _testbeds(sweep))
    _add(facts, "nccl_tests_version", list(runs.get("nccl_tests_version", [])))
    if "library" in runs.columns and "nccl_library" in runs.columns:
        for library, group in runs.groupby("library", sort=True):
            _add(facts, LIBRARY_FIELD.format(library), list(group["nccl_library"]))
    return facts


def compare_provenance(baseline: Facts, candidate: Facts) -> tuple[list[Difference], list[str]]:
    """(fields whose values differ, warnings for fields unknown on either side). A library
    only one side ran is left out: none of its cells can be compared anyway."""
    for side, facts in (("baseline", baseline), ("candidate", candidate)):
        if not facts:
            return [], [
                f"provenance: the {side} records none (a reference written before references "
                "kept it): its testbed, nccl-tests and library versions are unknown; not checked"
            ]
    differences: list[Difference] = []
    warnings: list[str] = []
    for side, facts in (("baseline", baseline), ("candidate", candidate)):
        for field, count in sorted(facts.items()):
            if field.endswith(UNKNOWN_IN) and count:
                name = field.removesuffix(UNKNOWN_IN)
                warnings.append(
                    f"provenance: {name} is unknown in {count} of the {side} (they record "
                    "none); only the others are checked"
                )
    fields = baseline.keys() & candidate.keys() | {"testbed", "nccl_tests_version"}
    unknown: dict[str, list[str]] = {}  # fields neither side knows
    for field in sorted(f for f in fields if not f.endswith(UNKNOWN_IN)):
        base, cand = baseline.get(field), candidate.get(field)
        if base is None or cand is None:
            side = "in the baseline" if base is None else "in the candidate"
            if base or cand:
                warnings.append(
                    f"provenance: {field} is unknown {side} (the other side: "
                    f"{base or cand!r}); not checked"
                )
            else:
                unknown.setdefault("on both sides", []).append(field)
        elif base != cand:
            differences.append(Difference(field, base, cand))
    # one line for all the fields no run recorded (a library that prints no version line)
    warnings += [
        f"provenance: {', '.join(names)} {'is' if len(names) == 1 else 'are'} unknown {side}; "
        "not checked"
        for side, names in unknown.items()
    ]
    return differences, warnings


def check_provenance(baseline: Facts, candidate: Facts, allow_mismatch: bool) -> list[str]:
    """The warning lines to show; raises ProvenanceMismatch on a difference unless
    `allow_mismatch` (then each difference is a warning line too)."""
    differences, warnings = compare_provenance(baseline, candidate)
    if differences and not allow_mismatch:
        raise ProvenanceMismatch(
            "provenance differs: "
            + "; ".join(d.text() for d in differences)
            + f". A candidate measured on another testbed or with other versions is not judged "
            f"against this baseline: compare it with a baseline of its own, or pass "
            f"{ALLOW_FLAG} to compare anyway"
        )
    shown = [f"provenance differs ({ALLOW_FLAG}): {d.text()}" for d in differences]
    return shown + warnings
