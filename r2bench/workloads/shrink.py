"""Which ranks a shrinking job drops after a network failure (pure: no I/O, no MPI).

When a collective fails or its watchdog expires, every rank reports what its own end of the ring
saw (:class:`FailureReport`), the reports are gathered over MPI's control plane (the management
network, which a data-NIC fault does not cut), and every rank applies the same rule to the same
table, so they agree without a further round:

- a rank whose own data NIC is down (the kernel says so, as a port event tells a real job)
  is the failed one, whatever stalled: a stall alone cannot tell a dead sender from a dead
  receiver when the rank behind the dead NIC was waiting to receive;
- a rank whose sends to its right neighbour stalled (units not acknowledged, no bytes leaving)
  points at its own link: with a frozen or dead NIC, its data does not leave;
- a node whose data link is down stalls in both directions: its own sends, and its left
  neighbour's sends into it. So where two ring neighbours r-1 and r both stalled, rank r's node
  is the failed one (not r-1's, whose stall is a symptom);
- with no stalled sender, a rank whose connection from its left neighbour broke points at that
  neighbour;
- policy drop_failed_node: every rank of a failed node is dropped (its other ranks share the
  failed NIC's node), the others survive.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FailureReport:
    """One rank's view of the failed collective."""

    rank: int
    node: str
    send_stalled: bool
    """Units sent to the right neighbour stayed unacknowledged with no progress."""
    recv_broken: bool = False
    """The connection from the left neighbour broke."""
    detected_at: float = 0.0
    """When this rank saw the failure (wall clock, unix s)."""
    link_down: bool = False
    """One of this rank's own data NICs is down (its interface's operstate)."""


@dataclass(frozen=True)
class ShrinkPlan:
    """The agreed outcome: the ranks dropped and the survivors (old ranks, ascending)."""

    failed_ranks: tuple[int, ...]
    dropped: tuple[int, ...]
    survivors: tuple[int, ...]
    reason: str = ""
    """Why no shrink is possible (empty when `survivors` can go on)."""
    first_detected: float = 0.0
    """The earliest rank's detection time (wall clock; 0: none reported)."""

    @property
    def possible(self) -> bool:
        """Some rank survives and none of the survivors is a failed one."""
        return not self.reason


def failed_ranks(reports: list[FailureReport]) -> tuple[int, ...]:
    """The ranks whose link failed, by the module's rules (empty: no evidence)."""
    down = {r.rank for r in reports if r.link_down}
    if down:
        return tuple(sorted(down))
    size = len(reports)
    stalled = {r.rank for r in reports if r.send_stalled}
    both_ways = {r for r in stalled if (r - 1) % size in stalled and size > 2}
    if both_ways:
        return tuple(sorted(both_ways))
    if stalled:
        return tuple(sorted(stalled))
    return tuple(sorted({(r.rank - 1) % size for r in reports if r.recv_broken}))


def plan_shrink(reports: list[FailureReport]) -> ShrinkPlan:
    """Apply drop_failed_node to every rank's report (the same result on every rank)."""
    failed = failed_ranks(reports)
    if not failed:
        reason = "no rank saw its sends stall or its connection break: no failed node to drop"
        return ShrinkPlan((), (), (), reason)
    nodes = {reports[r].node for r in failed}
    dropped = tuple(r.rank for r in reports if r.node in nodes)
    survivors = tuple(r.rank for r in reports if r.node not in nodes)
    if not survivors:
        where = ", ".join(sorted(nodes))
        reason = (
            f"dropping the failed node ({where}: ranks {_ranks(dropped)}) leaves no rank: "
            "every rank runs on it"
        )
        return ShrinkPlan(failed, dropped, (), reason)
    first = min((r.detected_at for r in reports if r.detected_at), default=0.0)
    return ShrinkPlan(failed, dropped, survivors, first_detected=first)


def _ranks(ranks: tuple[int, ...]) -> str:
    return ",".join(str(r) for r in ranks)


def comma_list(ranks: tuple[int, ...]) -> str:
    """`0,2,3`: the `dropped` field of `#train-shrink`."""
    return _ranks(ranks)
