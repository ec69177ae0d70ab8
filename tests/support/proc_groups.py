"""What the tests see of processes, read from /proc (an injector's lease timer runs in its own
process group; sshd's children are found by their parent)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path


def proc_stats() -> Iterator[tuple[int, list[str]]]:
    """(pid, the fields of /proc/<pid>/stat after the command name) of every process, skipping
    those that end while they are read."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        yield int(stat.parent.name), fields


def group_members(pgid: int) -> list[int]:
    """The live (not zombie) processes of process group `pgid`."""
    return [pid for pid, fields in proc_stats() if int(fields[2]) == pgid and fields[0] != "Z"]
