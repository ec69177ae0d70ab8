"""Which of a restarted job's log lines decide its outcome.

A `restart` run's output files hold every start's lines one after another (the sweep appends
each attempt's stdout and stderr to the same files). The first start's failure (its watchdog
abort, its NCCL errors, mpirun's "exited with non-zero status") is the history the recovery cost
is computed from, not the run's outcome: a job whose last start trained to the end is `ok`. The
lines' arrival times (`stdout.times`, `stderr.times`) say where the last start began.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping, Sequence

from r2bench.parse.models import Event


def last_attempt_events(
    events: Sequence[tuple[str, Event]],
    launches: Sequence[float],
    arrivals: Mapping[str, list[float] | None],
) -> list[tuple[str, Event]]:
    """The (source file, event) pairs logged by the job's last start (launched at
    `launches[-1]`, controller clock): every event when the job started once, and every event of
    a file whose arrival times (`arrivals[source]`: one per line, in order) are unknown."""
    if len(launches) < 2:
        return list(events)
    last = launches[-1]
    first_line = {
        source: bisect_left(times, last) + 1 for source, times in arrivals.items() if times
    }
    return [(source, e) for source, e in events if e.line >= first_line.get(source, 1)]
