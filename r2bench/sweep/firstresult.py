"""When a job printed its first result (pure): the anchor of `since: first_result` faults.

nccl-tests prints a row in pieces: size, count, type, redop and root before the size is run,
the out-of-place figures after it, the in-place ones last. A library that logs to the same stdout
(NCCL at INFO without NCCL_DEBUG_FILE) writes its lines between the pieces, so a row may come as
`  16777216  4194304  float  sum  -1node0:... NCCL INFO ...` and its figures many lines later, at
the start of another line. The first result is the first whole row, or the first figures that
follow such a cut-off row head; for a training job, its first `#train` update line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_TRAINING_UPDATE = re.compile(r'#train \{"update": (\d+)')
_WHOLE_ROW = re.compile(r"^\s*\d+\s+\d+\s+\S+\s+\S+\s+-?\d+\s+\S")
_ROW_HEAD = re.compile(r"^\s*\d+\s+\d+\s+[a-z]\w*\s+\w+\s+-?\d+\s*$")
_FIGURES = re.compile(r"^\s*(?:\d+\.\d+|N/A)\s+(?:\d+\.\d+|N/A)\s+(?:\d+\.\d+|N/A)\s+(?:\d+|N/A)")
# The start of a library log line glued to nccl-tests' text: `host:pid:tid [rank] NCCL ...`.
_GLUED_LOG = re.compile(r"[A-Za-z][\w.-]*:\d+:\d+ \[\d+\] NCCL ")


@dataclass
class FirstResultWatch:
    """Fed stdout line by line; `feed` is True once, for the line that completes a result."""

    seen: bool = False
    head_pending: bool = False

    def feed(self, text: str) -> bool:
        """Whether this line holds the first result (False for every line after it)."""
        if self.seen:
            return False
        glued = _GLUED_LOG.search(text)
        own = text[: glued.start()] if glued else text
        whole = _WHOLE_ROW.match(own) or training_update(own) is not None
        if whole or (self.head_pending and _FIGURES.match(own)):
            self.seen = True
            return True
        if _ROW_HEAD.match(own):
            self.head_pending = True
        return False


def training_update(text: str) -> int | None:
    """The update number of a training job's `#train` line (a launcher's `[1,0]<stdout>:`
    prefix allowed), or None for any other line."""
    found = _TRAINING_UPDATE.search(text)
    return int(found.group(1)) if found and len(found.group(1)) < 19 else None
