"""The communicators an NCCL log shows set up and torn down (`comm 0x... rank R nranks N ...
- Init COMPLETE`, `... - Destroy COMPLETE`): a program of one's own (not nccl-tests) ends
its log with each rank's `Destroy COMPLETE`, which says it ended as it meant to."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_COMM_RE = re.compile(r"\bcomm (?P<comm>0x[0-9a-fA-F]+) rank (?P<rank>\d+) nranks (?P<n>\d+)\b")
MAX_COMMS = 10_000
"""Communicators tracked: a log that sets up more is judged by its first ones."""


@dataclass
class CommTally:
    """Which (communicator, rank) pairs a log initialised and destroyed."""

    open: set[tuple[str, str]] = field(default_factory=set)
    destroyed: int = 0

    def feed(self, line: str) -> None:
        """One NCCL INFO line that holds `COMPLETE`."""
        init = line.endswith("Init COMPLETE") or " Init COMPLETE" in line
        destroy = not init and "Destroy COMPLETE" in line
        if not (init or destroy) or (m := _COMM_RE.search(line)) is None:
            return
        key = (m.group("comm"), m.group("rank"))
        if init and len(self.open) < MAX_COMMS:
            self.open.add(key)
        elif destroy:
            self.open.discard(key)
            self.destroyed += 1
