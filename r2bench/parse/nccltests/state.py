"""One run as it is being read (`RunState`), shared by the text and the JSON readers, and
its result once read (`finish_run` -> `ParsedNcclTests`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from r2bench.parse.library import LibraryEvidence, amd_device
from r2bench.parse.models import Device, ParsedNcclTests, Placement, ResultRow
from r2bench.parse.nccltests.columns import Layout
from r2bench.parse.nccltests.comms import CommTally

MAX_WARNINGS = 50
PLACEMENTS: tuple[Placement, Placement] = ("out_of_place", "in_place")


@dataclass
class RunState:
    """Mutable accumulator of one run; frozen into a ParsedNcclTests at the end."""

    fields: dict[str, Any] = field(default_factory=dict)
    devices: list[Device] = field(default_factory=list)
    rows: list[ResultRow] = field(default_factory=list)
    ratios: list[tuple[float, float] | None] = field(default_factory=list)  # busbw/algbw per row
    restarts: list[int] = field(default_factory=list)  # indices of rows that restart the sizes
    warnings: list[str] = field(default_factory=list)
    dropped_warnings: int = 0
    layout: Layout | None = None
    in_table: bool = False  # the column header line was seen
    pending: tuple[int, list[str]] | None = None  # (line number, a row printed in pieces)
    last_size: dict[tuple[str, str, int], int] = field(default_factory=dict)
    cycle: dict[tuple[str, str, int], int] = field(default_factory=dict)
    named: dict[str, str] = field(default_factory=dict)  # source -> collective it names
    origin: str | None = None  # the rank/host/file the header or row lines' prefix named
    library: LibraryEvidence = field(default_factory=LibraryEvidence)
    comms: CommTally = field(default_factory=CommTally)
    commented_rows: int = 0  # result rows an author commented out with `#` (read)
    n_ranks: int = 0  # distinct ranks in `devices`
    blank_redop_lines: set[int] = field(default_factory=set)  # rows read with a blank redop
    first_line: int | None = None
    last_line: int | None = None

    def warn(self, msg: str) -> None:
        if len(self.warnings) < MAX_WARNINGS:
            self.warnings.append(msg[:300])
        else:
            self.dropped_warnings += 1

    @property
    def header_done(self) -> bool:
        return bool(self.fields.get("header"))

    @property
    def ended(self) -> bool:
        """The footer or the concluding line was seen: more rows belong to another run."""
        return bool(self.fields.get("footer") or self.fields.get("concluded"))

    def drop_rows_from(self, index: int) -> None:
        """Forget the rows from `index` on (a last line cut short)."""
        del self.rows[index:]
        del self.ratios[index:]
        self.restarts = [i for i in self.restarts if i < index]


def finish_run(st: RunState) -> ParsedNcclTests:
    """What was read of a run, frozen; the warnings end with what was said in sum."""
    if st.commented_rows:
        st.warn(
            f"{st.commented_rows} result row(s) commented out with '#' in the table: read as "
            "the rows they are"
        )
    if st.dropped_warnings:
        st.warnings.append(f"... {st.dropped_warnings} more warnings not shown")
    ranks = len({d.rank for d in st.devices}) or None
    fields = dict(st.fields)
    if st.library.family in (None, "nccl") and amd_device(d.name for d in st.devices):
        st.library.family = "rccl"  # NCCL drives no AMD GPU: an RCCL build ran
    if st.library.family is not None:
        fields["library_family"] = st.library.family
    if st.comms.destroyed:
        fields["comms_destroyed"] = st.comms.destroyed
        fields["comms_open"] = len(st.comms.open)
    if st.library.version is not None:
        fields["library_version"] = st.library.version
    if st.library.path is not None:
        fields["library_path"] = st.library.path
    return ParsedNcclTests(
        devices=st.devices,
        rows=st.rows,
        warnings=st.warnings,
        ranks=ranks,
        first_line=st.first_line,
        last_line=st.last_line,
        **fields,
    )


def unreadable(st: RunState, lineno: int, why: str) -> None:
    """Count a result row that was not read, and say why."""
    st.fields["unreadable_rows"] = st.fields.get("unreadable_rows", 0) + 1
    st.warn(f"line {lineno}: result row not read: {why}")


def next_cycle(st: RunState, key: tuple[str, str, int], size: int) -> int:
    """The size sweep (`-N` cycle) a row of this size belongs to: a smaller size than the
    last starts the next one, so does the same size again (`-b X -e X -N 5`), except size 0:
    the smallest sizes of a sweep over many ranks all print as 0 B (8, 16, 32 B over 8 ranks
    hold no whole element), one row after another in one sweep."""
    last = st.last_size.get(key)
    st.last_size[key] = size
    if last is not None and (size < last or (size == last and size > 0)):
        st.cycle[key] = st.cycle.get(key, 0) + 1
        st.restarts.append(len(st.rows))
    return st.cycle.get(key, 0)
