"""What a verifying workload says it checked: its `#iter` and `#verify` lines.

r2bench's verification workload (`r2bench/workloads/verify/r2b_verify.cu`) and the emulator
(`r2bench.workloads.ring_allreduce`) check every element of every timed iteration on every
rank and print, on rank 0's stdout (docs/verify.md):

- one line per timed iteration, as soon as it is checked:
  `#iter {"iter": 3, "cycle": 0, "size": 16777216, "start": 1795640205.990896,
  "end": 1795640205.990989, "seconds": 9.6e-05, "check_s": 1.4e-05, "wrong": 0,
  "elements": 4194304, "ranks": 2}` (`iter` counts timed iterations from 0 over all sizes and
  cycles; `start`/`end` are rank 0's wall clock in unix seconds; `wrong` is the mismatch count
  summed over ranks, null when the check was off);
- at the end, a summary: `#verify {"program": "r2b_verify", "collective": "all_reduce",
  "checked": true, "ranks": 2, "iterations": 15, "elements": 67108864, "wrong": 1,
  "wrong_iterations": [3], ...}` (after a human line `# Verification: ...`).

Public API: `parse_verification(lines)` -> `Verification | None` (None: no such line),
`read_verification(path, first, last)`, `verifications(lines, ranges)` (one pass, several runs
of one file) and `with_verification(outcome, verification)`, which makes a run whose checker
found wrong elements `wrong_results` naming the iterations. Pure; never raises on bad input.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeGuard

from r2bench.parse.models import Evidence, Outcome, OutcomeStatus
from r2bench.parse.numbers import INT64_MAX, MEASURE_MAX, BadNumber, bounded_float
from r2bench.safeio import json_loads

ITER_TAG = "#iter {"
SUMMARY_TAG = "#verify {"
BASIS = "every element of every timed iteration on every rank"
MAX_EVIDENCE = 8
MAX_WARNINGS = 20
MAX_LINE = 8192
UNNAMED = "unknown"
"""The program of an account whose summary line (which names it) was never printed."""


@dataclass(frozen=True)
class IterationRecord:
    """One timed iteration as the workload reported it."""

    iter: int
    size: int
    start: float  # rank 0's wall clock, unix seconds
    end: float
    wrong: int | None  # summed over ranks; None when not checked (-c 0)
    elements: int | None = None  # checked per rank
    cycle: int = 0
    seconds: float | None = None  # the row's time (mean over ranks, as nccl-tests)
    check_s: float | None = None  # the check's own GPU time (slowest rank)
    line: int | None = None  # 1-based line of the output


@dataclass(frozen=True)
class Verification:
    """A verifying workload's account of a run (see the module docstring)."""

    program: str  # which workload printed it
    ranks: int
    iterations: int  # timed iterations checked
    elements: int  # elements checked per rank per iteration (largest size)
    wrong: int  # total mismatches
    wrong_iterations: tuple[int, ...]
    complete: bool  # the summary line was printed (every iteration checked)
    samples: tuple[IterationRecord, ...]  # per iteration: iter, size, start, end, wrong
    checked: bool = True  # False: the check was off (-c 0): nothing was verified
    collective: str | None = None
    summary_line: int | None = None
    warnings: tuple[str, ...] = ()

    @property
    def basis(self) -> str:
        """What `lossless` may rest on, in words ("" when nothing was checked)."""
        return BASIS if self.checked else ""

    @property
    def proves_lossless(self) -> bool:
        """Every timed iteration was checked and none had a wrong element."""
        return self.checked and self.complete and self.wrong == 0

    def as_json(self) -> dict[str, Any]:
        """A JSON-ready view (`r2bench parse --json`)."""
        return {
            "program": self.program,
            "collective": self.collective,
            "checked": self.checked,
            "complete": self.complete,
            "basis": self.basis,
            "ranks": self.ranks,
            "iterations": self.iterations,
            "elements": self.elements,
            "wrong": self.wrong,
            "wrong_iterations": list(self.wrong_iterations),
            "samples": [s.__dict__ for s in self.samples],
            "warnings": list(self.warnings),
        }


@dataclass
class _Reader:
    samples: list[IterationRecord] = field(default_factory=list)
    summary: dict[str, Any] | None = None
    summary_line: int | None = None
    ranks: int = 0  # the most any #iter line named
    warnings: list[str] = field(default_factory=list)

    def warn(self, text: str) -> None:
        if len(self.warnings) < MAX_WARNINGS:
            self.warnings.append(text)

    def line(self, number: int, text: str) -> None:
        if "#" not in text or len(text) > MAX_LINE:
            return
        at = text.find(ITER_TAG)
        if at >= 0:
            doc = self._json(number, text[at + len(ITER_TAG) - 1 :])
            if doc is not None:
                record = _iteration(doc, number)
                if record is None:
                    self.warn(
                        f"line {number}: #iter line without integer iter and size and numeric start and end"
                    )
                else:
                    self._warn_clamped(number, doc)
                    self.samples.append(record)
                    self.ranks = max(self.ranks, _int(doc.get("ranks")))
            return
        at = text.find(SUMMARY_TAG)
        if at >= 0:
            doc = self._json(number, text[at + len(SUMMARY_TAG) - 1 :])
            if doc is not None:
                self._warn_clamped(number, doc)
                self.summary, self.summary_line = doc, number

    def _warn_clamped(self, number: int, doc: dict[str, Any]) -> None:
        wrong = doc.get("wrong")
        if isinstance(wrong, int) and wrong > INT64_MAX:
            self.warn(
                f"line {number}: wrong {wrong:.3g} is more than int64 holds; counted as {INT64_MAX}"
            )

    def _json(self, number: int, text: str) -> dict[str, Any] | None:
        try:
            doc = json_loads(text)
        except ValueError:
            self.warn(f"line {number}: not a JSON object (cut short?)")
            return None
        if not isinstance(doc, dict):
            self.warn(f"line {number}: not a JSON object")
            return None
        return doc

    def result(self) -> Verification | None:
        if not self.samples and self.summary is None:
            return None
        s = self.summary or {}
        by_lines = tuple(r.iter for r in self.samples if r.wrong)
        said = s.get("checked")
        checked = said if isinstance(said, bool) else any(r.wrong is not None for r in self.samples)
        wrong_lines = sum(r.wrong or 0 for r in self.samples)
        said_wrong = _wrong_count(s.get("wrong"))
        listed = _int_tuple(s.get("wrong_iterations")) if s else ()
        if listed is None:
            self.warn(f"line {self.summary_line}: wrong_iterations is not a list of integers")
        return Verification(
            program=str(s.get("program") or UNNAMED),
            ranks=_int(s.get("ranks"), self.ranks),
            iterations=_int(s.get("iterations"), len(self.samples)),
            elements=_int(
                s.get("elements"), max((r.elements or 0 for r in self.samples), default=0)
            ),
            wrong=wrong_lines if said_wrong is None else said_wrong,
            wrong_iterations=tuple(sorted(set(listed or ()) | set(by_lines))),
            complete=bool(s),
            samples=tuple(self.samples),
            checked=checked,
            collective=str(s["collective"]) if s.get("collective") else None,
            summary_line=self.summary_line,
            warnings=tuple(self.warnings),
        )


def _int(value: Any, default: int = 0) -> int:
    return value if _is_int(value) and value >= 0 else default


def _wrong_count(value: Any) -> int | None:
    """A count of wrong elements: one beyond int64 still says the check failed, so it is held
    at INT64_MAX (warned, `_Reader._warn_clamped`), never dropped as if nothing were wrong."""
    if isinstance(value, int) and not isinstance(value, bool) and value > INT64_MAX:
        return INT64_MAX
    return value if _is_int(value) and value >= 0 else None


def _num(value: Any) -> float | None:
    """A finite number as a float, else None (a whole number too large for one included)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return bounded_float(value, "value", low=-MEASURE_MAX)
        except BadNumber:
            return None
    return None


def _int_tuple(value: Any) -> tuple[int, ...] | None:
    if not isinstance(value, list) or not all(_is_int(v) for v in value):
        return None
    return tuple(value)


def _iteration(doc: dict[str, Any], line: int) -> IterationRecord | None:
    it, size = doc.get("iter"), doc.get("size")
    start, end = _num(doc.get("start")), _num(doc.get("end"))
    if not (_is_int(it) and _is_int(size)) or start is None or end is None:
        return None  # (a bool is an int too: JSON's true names no iteration, but is harmless)
    wrong, elements = doc.get("wrong"), doc.get("elements")
    return IterationRecord(
        iter=it,
        size=size,
        start=start,
        end=end,
        wrong=_wrong_count(wrong),
        elements=elements if _is_int(elements) else None,
        cycle=_int(doc.get("cycle")),
        seconds=_num(doc.get("seconds")),
        check_s=_num(doc.get("check_s")),
        line=line,
    )


def _is_int(value: Any) -> TypeGuard[int]:
    """A JSON whole number a table column holds (int64); a bool is no number."""
    return isinstance(value, int) and not isinstance(value, bool) and abs(value) <= INT64_MAX


def _text(raw: str | bytes) -> str:
    return raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw


def parse_verification(lines: Iterable[str | bytes], first_line: int = 1) -> Verification | None:
    """The verification account of one run's stdout lines; None when it holds no `#iter` or
    `#verify` line (not a verifying workload)."""
    reader = _Reader()
    for number, raw in enumerate(lines, start=first_line):
        reader.line(number, _text(raw))
    return reader.result()


def verifications(
    lines: Iterable[str | bytes], ranges: list[tuple[int, int]]
) -> list[Verification | None]:
    """One pass over a file holding several runs: the account of each (first, last) line
    range (1-based, inclusive)."""
    readers = [_Reader() for _ in ranges]
    # the ranges by first line, walked once with the lines: linear in lines and runs (a log
    # of 6,000 runs), where trying every range on every line was quadratic
    order = sorted(range(len(ranges)), key=lambda index: ranges[index])
    active: list[int] = []  # ranges holding the current line (overlapping ones all get it)
    upcoming = 0
    for number, raw in enumerate(lines, start=1):
        if b"#" not in raw if isinstance(raw, bytes) else "#" not in raw:
            continue
        while upcoming < len(order) and ranges[order[upcoming]][0] <= number:
            active.append(order[upcoming])
            upcoming += 1
        if any(ranges[index][1] < number for index in active):
            active = [index for index in active if ranges[index][1] >= number]
        if not active:
            if upcoming == len(order):
                break  # past every range
            continue
        text = _text(raw)
        for index in active:
            readers[index].line(number, text)
    return [r.result() for r in readers]


def read_verification(path: Path | None, workload: str | None = None) -> Verification | None:
    """The account in a stdout file; None when there is none or the file cannot be read. A
    quick byte search first: most outputs are nccl-tests' and hold no such line. `workload`
    (the run's, as its spec names it) names the program when no summary line did (a run cut
    short before it: a timeout, a crash)."""
    if path is None:
        return None
    try:
        data = path.read_bytes()
    except OSError:
        return None
    if ITER_TAG.encode() not in data and SUMMARY_TAG.encode() not in data:
        return None
    check = parse_verification(data.decode("utf-8", "replace").splitlines())
    if check is not None and check.program == UNNAMED and workload:
        check = replace(check, program=workload)
    return check


def evidence_of(check: Verification, source: str | None = None) -> list[Evidence]:
    """One evidence line per iteration with wrong elements (the first few), naming it."""
    out = []
    for s in check.samples:
        if s.wrong:
            per = f" of {s.elements} per rank" if s.elements is not None else ""
            out.append(
                Evidence(
                    line=s.line,
                    text=f"timed iteration {s.iter} ({s.size} B): {s.wrong} wrong element(s)"
                    f"{per} on {check.ranks} rank(s)",
                    source=source,
                )
            )
    if not out and check.wrong_iterations:  # summary only (the #iter lines were lost)
        listed = ", ".join(map(str, check.wrong_iterations))
        out.append(
            Evidence(
                line=check.summary_line,
                text=f"{check.wrong} wrong element(s) in timed iteration(s) {listed}",
                source=source,
            )
        )
    return out[:MAX_EVIDENCE]


def _checker(check: Verification) -> str:
    """The program that checked, as the reason names it."""
    return "the verifying workload" if check.program == UNNAMED else check.program


def with_verification(
    outcome: Outcome | None, check: Verification | None, source: str | None = "stdout.txt"
) -> Outcome | None:
    """The outcome once the checker's account is known.

    Wrong elements found and the run otherwise fine (ok, incomplete, or already
    wrong_results), or crashed only after the summary was printed (the workload's own exit
    code 2, which mpirun reports as a process exit): `wrong_results` whose reason and evidence
    name the iterations. Any other failure (a crash or timeout mid-run) keeps its status and
    gains the wrong iterations as evidence. No wrong element: unchanged."""
    if outcome is None or check is None or not (check.wrong or check.wrong_iterations):
        return outcome
    evidence = evidence_of(check, source)
    iters = ", ".join(map(str, check.wrong_iterations[:MAX_EVIDENCE]))
    more = " ..." if len(check.wrong_iterations) > MAX_EVIDENCE else ""
    found = (
        f"{check.wrong} wrong element(s) in timed iteration(s) {iters}{more} "
        f"({_checker(check)} checks {BASIS})"
    )
    fine = {OutcomeStatus.OK, OutcomeStatus.INCOMPLETE, OutcomeStatus.WRONG_RESULTS}
    if outcome.status in fine or (outcome.status is OutcomeStatus.CRASHED and check.complete):
        # a crash after the summary is the workload's own exit code 2: its lines prove nothing
        crashed = outcome.status is OutcomeStatus.CRASHED
        kept = [] if crashed else [e for e in outcome.evidence if e not in evidence]
        return Outcome(
            status=OutcomeStatus.WRONG_RESULTS,
            reason=found,
            evidence=(evidence + kept)[:MAX_EVIDENCE],
        )
    return outcome.model_copy(
        update={
            "reason": f"{outcome.reason}; before that, {found}",
            "evidence": (outcome.evidence + evidence)[:MAX_EVIDENCE],
        }
    )
