"""r2bench read against real outputs written by other people (tests/data/public/README.md).

Each line of the README's table is what a human reads in one file (or one run of it); every
field is checked. `?` means the text does not say it: r2bench must then say nothing either
(collective) or is not checked (ranks).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest

from r2bench.analysis.outcome import classify
from r2bench.parse.events import parse_events
from r2bench.parse.library import nccl_version_text
from r2bench.parse.models import ParsedNcclTests
from r2bench.parse.nccltests.text import parse_text_runs
from tests.support import paths

PUBLIC = paths.DATA / "public"
_ROW_RE = re.compile(r"^\| (\S+\.txt(?:#\d+)?) \|")


@dataclass(frozen=True)
class Truth:
    """One line of the README table."""

    file: str
    run: int
    collective: str | None
    ranks: int | None
    rows: int
    peak: tuple[float, int] | None
    avg: float | None
    wrong: int
    outcome: str
    cycles: int
    library: str


def _truths() -> list[Truth]:
    out = []
    for line in (PUBLIC / "README.md").read_text().splitlines():
        if not _ROW_RE.match(line):
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        name, _, run = cells[0].partition("#")
        coll, ranks, rows, peak, avg, wrong, outcome, cycles, library = cells[2:11]
        value, _, size = peak.partition(" @ ")
        out.append(
            Truth(
                file=name,
                run=int(run or 1),
                collective=None if coll == "?" else coll,
                ranks=None if ranks == "?" else int(ranks),
                rows=int(rows),
                peak=None if peak == "-" else (float(value), int(size)),
                avg=None if avg == "-" else float(avg),
                wrong=int(wrong),
                outcome=outcome,
                cycles=int(cycles),
                library=library,
            )
        )
    return out


TRUTHS = _truths()


def test_the_table_covers_at_least_50_files() -> None:
    files = {t.file for t in TRUTHS}
    assert len(files) >= 50
    assert files == {p.name for p in PUBLIC.glob("*.txt")}


def _library(parsed: ParsedNcclTests) -> str:
    """`family version` as the README writes it (see its `library` field)."""
    if not parsed.library_family:
        return "?"
    version = parsed.library_version or nccl_version_text(parsed.nccl_library)
    return f"{parsed.library_family} {version or '?'}"


def _peak(parsed: ParsedNcclTests) -> tuple[float, int] | None:
    rows = [r for r in sorted(parsed.rows, key=lambda r: r.line or 0) if r.busbw_gbps is not None]
    if not rows:
        return None
    best = max(r.busbw_gbps or 0.0 for r in rows)
    first = next(r for r in rows if r.busbw_gbps == best)
    return best, first.size_bytes


@pytest.mark.parametrize("truth", TRUTHS, ids=lambda t: f"{t.file}#{t.run}")
def test_reads_what_a_human_reads(truth: Truth) -> None:
    data = (PUBLIC / truth.file).read_bytes()
    runs = parse_text_runs(data, file_name=truth.file)
    assert len(runs) >= truth.run, f"{truth.file}: {len(runs)} runs"
    _, text, parsed = runs[truth.run - 1]
    events = parse_events(text)
    outcome = classify(None, parsed=parsed, events=events)
    got = {
        "collective": parsed.collective,
        "rows": len({r.line for r in parsed.rows}),
        "peak": _peak(parsed),
        "avg": parsed.avg_busbw_gbps,
        "wrong": len({r.line for r in parsed.rows if r.wrong}),
        "outcome": outcome.status.value,
        "cycles": parsed.cycles,
        "library": _library(parsed),
    }
    want = {
        "collective": truth.collective,
        "rows": truth.rows,
        "peak": truth.peak,
        "avg": truth.avg,
        "wrong": truth.wrong,
        "outcome": truth.outcome,
        "cycles": truth.cycles,
        "library": truth.library,
    }
    if truth.ranks is not None:
        got["ranks"], want["ranks"] = parsed.ranks, truth.ranks
    assert got == want, f"{truth.file}: {outcome.reason}; warnings {parsed.warnings[:5]}"
