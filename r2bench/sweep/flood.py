"""Bounded capture of a job's NCCL log lines (pure).

R-2CCL at INFO logs every network send and test call, and a hung socket transport repeats one
WARN millions of times a minute (`NET/Socket : unable to allocate requests`). Writing all of it
would fill the disk and make every later parse slow, while the repeats say nothing new. So each
*shape* of NCCL log line (the text with its numbers masked) is kept the first `keep` times; later
lines of that shape are only counted, and a summary line per shape says how many were left out,
with the first and last time. nccl-tests' own lines (results, headers, errors) are never dropped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# `host:pid:tid [rank] NCCL INFO|WARN ...`, the form every NCCL (and R-2CCL) log line has.
_NCCL_LOG = re.compile(r"^\S+:\d+:\d+ \[\d+\] .*?NCCL (INFO|WARN|TRACE)\b")
_NUMBERS = re.compile(r"0x[0-9a-fA-F]+|\d+")
KEEP_PER_SHAPE = 2000
MAX_SHAPES = 20000
SUMMARY_PREFIX = "# r2bench: "


@dataclass
class _Shape:
    first_line: str
    dropped: int = 0
    first_dropped_at: float = 0.0
    last_dropped_at: float = 0.0
    kept: int = 0


@dataclass
class LogCondenser:
    """Decides, line by line, what of a stream is written; `summary()` accounts for the rest."""

    keep: int = KEEP_PER_SHAPE
    shapes: dict[str, _Shape] = field(default_factory=dict)

    def admit(self, text: str, time: float) -> bool:
        """Whether to write this line (False: counted under its shape instead)."""
        if not _NCCL_LOG.match(text):
            return True
        key = _NUMBERS.sub("#", text)
        shape = self.shapes.get(key)
        if shape is None:
            if len(self.shapes) >= MAX_SHAPES:
                return True
            shape = self.shapes[key] = _Shape(text)
        if shape.kept < self.keep:
            shape.kept += 1
            return True
        if not shape.dropped:
            shape.first_dropped_at = time
        shape.dropped += 1
        shape.last_dropped_at = time
        return False

    @property
    def dropped(self) -> int:
        """Lines counted but not written."""
        return sum(shape.dropped for shape in self.shapes.values())

    def summary(self) -> list[tuple[float, str]]:
        """One (time, line) per shape with lines left out, most frequent first."""
        lines = []
        for shape in sorted(self.shapes.values(), key=lambda s: -s.dropped):
            if shape.dropped:
                text = (
                    f"{SUMMARY_PREFIX}{shape.dropped} more lines like the {shape.kept} above, "
                    f"from {shape.first_dropped_at:.6f} to {shape.last_dropped_at:.6f} "
                    f"(not written, to bound the log): {shape.first_line}"
                )
                lines.append((shape.last_dropped_at, text))
        return lines
