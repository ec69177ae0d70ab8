"""The gate's verdict in words, for the first lines of the output: passed or not, why, and
what gets a decision where the data could not give one.

```
NOT PASSED: could not decide 60 of 78 rows (no regression found)
  52 too noisy: the interval of the change reaches past the bound (median interval ±18%)
  8 too few samples: n=1 a side (min_samples 5)
  To decide them: more repeats on both sides (the experiment's `repeats:`) ...
```
"""

from __future__ import annotations

from collections import Counter
from statistics import median

from r2bench.compare.policy import PER_RUN_METRICS
from r2bench.compare.stats import Undecided, Verdict
from r2bench.compare.verdict import EXIT_CANNOT, EXIT_OK, NOT_DATA, Comparison, Row

INDENT = "  "
ALLOW_UNDECIDED = "`undecided: pass` in the policy (--policy FILE) or --allow-undecided"
ALLOW_INCOMPLETE = "--allow-incomplete"
ABSENT = {
    Verdict.INCOMPLETE: "candidate series with runs that did not finish or could not be read",
    Verdict.MISSING: "baseline cells the candidate does not have",
}


def headline(cmp: Comparison) -> str:
    """The first line: the gate's verdict and the counts it stands on."""
    code, rows = cmp.exit_code, len(cmp.rows)
    undecided = [r for r in cmp.unjudged if r.verdict is Verdict.UNDECIDED]
    absent = [r for r in cmp.unjudged if r.verdict in NOT_DATA]
    if code == EXIT_CANNOT:
        return "COULD NOT COMPARE: no cell or series of the candidate matches the baseline"
    if code == EXIT_OK:
        counts = Counter(r.verdict.value for r in cmp.rows)
        seen = ", ".join(f"{n} {v}" for v, n in counts.most_common())
        return f"PASSED: no regression in {rows} rows ({seen})"
    if cmp.regressions:
        worse = len(cmp.regressions)
        text = f"REGRESSION: {worse} of {rows} rows worse beyond their bound"
        unjudged = len(cmp.unjudged)
        return text + (f"; {unjudged} more not judged" if unjudged else "")
    parts = []
    if undecided:
        parts.append(f"could not decide {len(undecided)} of {rows} rows")
    if absent:
        parts.append(f"{len(absent)} rows not judged (data not there)")
    return f"NOT PASSED: {' and '.join(parts)} (no regression found)"


def reasons(cmp: Comparison) -> list[str]:
    """The lines under the headline: why rows were not judged, and how to get them judged
    (or let them pass). Rows the gate lets pass are counted, not explained."""
    if cmp.exit_code == EXIT_CANNOT:
        return [
            INDENT + "they share no collective x size x library/mode x scenario: compare sweeps "
            "of the same experiment (`missing`: only in the baseline, `new`: only in the "
            "candidate)"
        ]
    undecided = [r for r in cmp.rows if r.verdict is Verdict.UNDECIDED]
    absent = [r for r in cmp.rows if r.verdict in NOT_DATA]
    lines: list[str] = []
    if undecided and not cmp.gate.blocks(Verdict.UNDECIDED):
        lines.append(f"{len(undecided)} undecided rows pass: the gate lets them (policy or flag)")
    elif undecided:
        least = cmp.policy.min_samples
        lines += [_cause_line(cause, rows, least) for cause, rows in _by_cause(undecided)]
        recovery = any(r.metric in PER_RUN_METRICS for r in undecided)
        runs = (
            f"; recovery and per-run training rows take one sample a run, so {least} "
            "repeats at least"
            if recovery
            else ""
        )
        lines.append(
            f"To decide them: more repeats on both sides (the experiment's `repeats:`{runs}). "
            f"To let undecided rows pass: {ALLOW_UNDECIDED}."
        )
    if absent and cmp.gate.blocks(absent[0].verdict):
        counts = Counter(r.verdict for r in absent)
        lines += [f"{counts[v]} {v.value}: {ABSENT[v]}" for v in ABSENT if counts[v]]
        lines.append(f"To judge them: rerun what is missing; to let them pass: {ALLOW_INCOMPLETE}.")
    return [INDENT + line for line in lines]


def explanation(cmp: Comparison) -> list[str]:
    """The headline and its reasons."""
    return [headline(cmp), *reasons(cmp)]


def _by_cause(rows: list[Row]) -> list[tuple[Undecided, list[Row]]]:
    groups: dict[Undecided, list[Row]] = {}
    for row in rows:
        groups.setdefault(row.undecided or Undecided.TOO_NOISY, []).append(row)
    return sorted(groups.items(), key=lambda item: -len(item[1]))


def _cause_line(cause: Undecided, rows: list[Row], min_samples: int) -> str:
    count = f"{len(rows)} {cause.value}"
    if cause is Undecided.TOO_FEW_SAMPLES:
        fewest = min(min(r.n_baseline, r.n_candidate) for r in rows)
        return f"{count}: as few as n={fewest} a side (min_samples {min_samples})"
    if cause is Undecided.TOO_NOISY:
        widths = [(r.high - r.low) / 2 for r in rows if r.low is not None and r.high is not None]
        spread = f" (median interval ±{median(widths):.0%})" if widths else ""
        return f"{count}: the interval of the change reaches past the bound{spread}"
    if cause is Undecided.NO_FINISHED_RUN:
        return f"{count} on a side, so no outcome to compare"
    return f"{count}: no finite statistic on a side"
