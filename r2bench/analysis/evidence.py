"""Failure evidence: did each fault hit live traffic, and did it cut what it should? (pure)

A run that "survived" a fault only means something if the fault touched traffic. For every
NIC fault window of a run this module reads the target NIC's counters (`parse.nictraffic`)
and the run's iteration windows, and says:

- how many bytes the NIC moved in the `BEFORE_S` seconds before the fault was applied;
- whether a collective was in flight at that moment (and which iteration), or the fault fell
  between two collectives;
- what the NIC moved after it (from `SETTLE_S` after the fault to its revert, or the run's end):
  nothing for a port or link taken down, no received bytes for a drop (the host keeps
  transmitting into the drop), at most the cap's rate out of the NIC for a cap.

`Verdict.NO_TRAFFIC` (the NIC was idle before the fault, e.g. the NIC R2CC_MODE 2 masks off)
and `Verdict.NOT_CUT` (traffic went on as if nothing happened) make an otherwise `ok` run
`fault_without_effect` (`apply_to_outcome`): a survived fault needs a fault that hit something.
Without counter samples around the fault the verdict is `unknown`, never a guess.

`iteration_traffic` gives the per-iteration, per-NIC bytes that the report shows as a table and
a figure (R-2CCL's artifact prints the same from `port_rcv_data`).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from enum import Enum
from operator import gt
from typing import Any, NamedTuple

from r2bench.analysis.windows import FaultWindow
from r2bench.config.types import rate_bits_per_s
from r2bench.parse.models import Evidence, Outcome, OutcomeStatus
from r2bench.parse.nictraffic import NicKey, NicSeries

BEFORE_S = 2.0
"""Seconds before the fault in which the NIC's traffic is measured."""
SETTLE_S = 0.1
"""Seconds after the fault before "after" counts: bytes already on the wire, two samples."""
LIVE_S = 0.25
"""Seconds just before the fault in which traffic means the NIC was busy when it was cut
(five samples at the sampler's default 50 ms)."""
LIVE_BYTES = 64 << 10
"""More bytes than this in the `LIVE_S` before the fault: traffic was flowing at the cut."""
ESTIMATE_SLACK_S = 0.01
"""Estimated iteration windows (nccl-tests -I) are widened by this much on each side."""
MIN_WINDOW_S = 0.1
"""A before or after window shorter than this (clipped by the samples) measures nothing."""
IDLE_BYTES = 1 << 20
"""Fewer bytes than this in the window before the fault: the NIC carried no traffic (ARP,
neighbour discovery and counter noise stay far below; any collective moves far more)."""
CUT_FRACTION = 0.05
"""After a down or drop fault, a NIC still moving more than this share of its rate before the
fault (and more than IDLE_BYTES) was not cut."""
CAP_SLACK = 1.10
"""After a cap, a NIC sending faster than this multiple of the cap was not capped."""

CUTTING_KINDS = frozenset({"ib_port_down", "link_down"})
"""Faults after which the NIC moves nothing either way."""
DROPPING_KINDS = frozenset({"flow_drop", "route_drop"})
"""Faults that drop what reaches the NIC (the host keeps transmitting into the drop)."""
CAP_KINDS = frozenset({"bandwidth_cap"})


class Verdict(str, Enum):
    """What the counters say about one fault window."""

    HIT = "hit"
    """Traffic flowing on the NIC up to the moment it was applied, and the cut held after."""
    BETWEEN = "between_collectives"
    """Traffic before it and the cut held, but the NIC was quiet when it was applied: no
    collective was moving data over it at that moment."""
    NO_TRAFFIC = "no_traffic"
    """The NIC moved nothing before the fault: it had no traffic to cut."""
    AFTER_LAST = "after_the_last_collective"
    """The workload had finished every collective before the fault: it hit nothing."""
    NOT_CUT = "not_cut"
    """The NIC went on moving traffic after a fault that should have stopped or capped it."""
    UNKNOWN = "unknown"
    """No counter samples around the fault: nothing can be said."""

    @property
    def without_effect(self) -> bool:
        """Whether the fault touched no traffic (an ok run then measured no fault)."""
        return self in (Verdict.NO_TRAFFIC, Verdict.NOT_CUT, Verdict.AFTER_LAST)


class IterationWindow(NamedTuple):
    """One measured collective on the controller clock (an iteration, or a result row; a tuple:
    a dense run has thousands)."""

    number: int
    """Its place in the run, from 0."""
    start: float
    end: float
    size: int
    exact: bool = False
    """Timed by the workload itself (start and end printed), not estimated from row prints."""

    def spans(self, t: float) -> bool:
        """Whether the collective was running at `t` (estimated windows widened slightly)."""
        slack = 0.0 if self.exact else ESTIMATE_SLACK_S
        return self.start - slack <= t <= self.end + slack


@dataclass(frozen=True)
class Iterations(Sequence[IterationWindow]):
    """A run's measured collectives in time order, as columns (a dense run has thousands; a
    window is made only for the few the evidence looks at)."""

    starts: Sequence[float] = ()
    ends: Sequence[float] = ()
    sizes: Sequence[int] = ()
    exact: bool = False

    def __len__(self) -> int:
        return len(self.starts)

    def __getitem__(self, i: int) -> IterationWindow:  # type: ignore[override]
        if i < 0:
            i += len(self.starts)
        return IterationWindow(i, self.starts[i], self.ends[i], self.sizes[i], self.exact)

    @classmethod
    def of(cls, items: Iterable[tuple[float, float, int]], exact: bool = False) -> Iterations:
        """From (start, end, size) triples."""
        columns = list(zip(*items, strict=True))
        if not columns:
            return cls(exact=exact)
        starts, ends, sizes = columns
        return cls.columns(starts, ends, sizes, exact)

    @classmethod
    def columns(
        cls,
        starts: Sequence[float],
        ends: Sequence[float],
        sizes: Sequence[int],
        exact: bool = False,
    ) -> Iterations:
        """From columns, put in time order."""
        if any(map(gt, starts[:-1], starts[1:])):  # rarely: put them in time order
            starts, ends, sizes = zip(*sorted(zip(starts, ends, sizes, strict=True)), strict=True)
        return cls(starts, ends, sizes, exact)


@dataclass(frozen=True)
class FaultEvidence:
    """The evidence for one fault window."""

    window: FaultWindow
    verdict: Verdict
    before_bytes: float | None
    before_s: float
    live_bytes: float | None
    """Bytes in the `LIVE_S` just before the fault."""
    after_bytes: float | None
    after_s: float
    after_what: str
    """Which counter "after" reads: `tx+rx`, `rx` (drops) or `tx` (caps)."""
    iteration: IterationWindow | None
    """The collective in flight when the fault was applied, or None."""
    gap: tuple[IterationWindow | None, IterationWindow | None] = (None, None)
    """Without one in flight: the collectives that ended before and started after it."""
    after_until: str = "the run ended"
    """What ended the "after" interval: `it came back` or `the run ended`."""
    line: str = ""

    @property
    def target(self) -> str:
        """`node/nic` of the fault."""
        return f"{self.window.node}/{self.window.nic}"


@dataclass(frozen=True)
class IterationTraffic:
    """Bytes one NIC moved during one measured collective."""

    iteration: int
    size: int
    start: float
    end: float
    node: str
    nic: str
    tx_bytes: float | None
    rx_bytes: float | None
    completed: bool = True
    """False for the collective a fault cut short: from the last completion to the run's end."""


# --------------------------------------------------------------------------- the evidence


def fault_evidence(
    windows: Iterable[FaultWindow],
    series: dict[NicKey, NicSeries],
    iterations: Sequence[IterationWindow],
    run_end: float | None,
    caps: dict[int, float] | None = None,
    finished: bool = False,
) -> list[FaultEvidence]:
    """The evidence for every NIC fault window (process faults, which name no NIC, have none).

    `caps`: fault index -> cap in bits/s (`cap_rates`), for bandwidth caps. `finished`: the
    workload timed every iteration itself and completed them all (a fault after its last
    iteration then hit nothing, whatever was on the wire just before)."""
    caps = caps or {}
    return [
        _one(w, series.get((w.node, w.nic)), iterations, run_end, caps.get(w.fault), finished)
        for w in windows
        if w.nic
    ]


def _one(
    w: FaultWindow,
    nic: NicSeries | None,
    iterations: Sequence[IterationWindow],
    run_end: float | None,
    cap_bits: float | None,
    finished: bool,
) -> FaultEvidence:
    in_flight, gap = _around(iterations, w.applied)
    after_what = "rx" if w.kind in DROPPING_KINDS else "tx" if w.kind in CAP_KINDS else "tx+rx"
    if nic is None or nic.span is None:
        ev = FaultEvidence(
            w, Verdict.UNKNOWN, None, 0.0, None, None, 0.0, after_what, in_flight, gap
        )
        return _with_line(ev, "no counter samples of this NIC")
    first, last = nic.span
    t0 = max(w.applied - BEFORE_S, first)
    before = nic.bytes_between(t0, w.applied) if w.applied - t0 >= MIN_WINDOW_S else None
    live = nic.bytes_between(max(w.applied - LIVE_S, first), w.applied)
    a0 = w.applied + SETTLE_S
    a1 = min(x for x in (w.back, run_end, last) if x is not None)
    direction = "both" if after_what == "tx+rx" else after_what
    # Only samples taken after the fault count: one taken late by a busy sampler would spread
    # bytes moved before the fault into "after" if interpolated.
    sampled = nic.sampled_between(a0, a1, direction)  # type: ignore[arg-type]
    after, after_s = sampled if sampled and sampled[1] >= MIN_WINDOW_S else (None, 0.0)
    until = "it came back" if w.back is not None and a1 >= w.back else "the run ended"
    ev = FaultEvidence(
        w, Verdict.UNKNOWN, before, w.applied - t0, live, after, after_s, after_what,
        in_flight, gap, until,
    )  # fmt: skip
    verdict, note = _verdict(ev, cap_bits, finished)
    return _with_line(replace(ev, verdict=verdict), note)


def _verdict(ev: FaultEvidence, cap_bits: float | None, finished: bool) -> tuple[Verdict, str]:
    """The verdict and, where it needs one, why."""
    if ev.before_bytes is None:
        return Verdict.UNKNOWN, "no counter samples before the fault"
    if ev.before_bytes < IDLE_BYTES:
        return Verdict.NO_TRAFFIC, "the NIC carried no traffic before the fault"
    kind = ev.window.kind
    if ev.after_bytes is not None and ev.after_s > 0:
        before_rate = ev.before_bytes / ev.before_s
        after_rate = ev.after_bytes / ev.after_s
        if kind in CUTTING_KINDS | DROPPING_KINDS and (
            ev.after_bytes > IDLE_BYTES and after_rate > CUT_FRACTION * before_rate
        ):
            return Verdict.NOT_CUT, f"{ev.after_what} went on at {_rate(after_rate)} after it"
        if kind in CAP_KINDS and cap_bits and after_rate * 8 > CAP_SLACK * cap_bits:
            return Verdict.NOT_CUT, (
                f"tx went on at {_rate(after_rate)}, above the cap of {_rate(cap_bits / 8)}"
            )
    live = ev.live_bytes is not None and ev.live_bytes >= LIVE_BYTES
    prev, nxt = ev.gap
    if ev.iteration is not None and ev.iteration.exact:
        return (
            Verdict.HIT,
            "" if live else "the NIC was quiet just before it, in a running collective",
        )
    if prev is not None and prev.exact and nxt is None and finished:
        return Verdict.AFTER_LAST, "the workload had finished its last collective"
    if prev is not None and prev.exact and nxt is not None:
        return Verdict.BETWEEN, "no collective was running"  # timed by the workload itself
    if live:
        return Verdict.HIT, ""
    return Verdict.BETWEEN, f"the NIC was quiet in the {LIVE_S:g} s before it"


Gap = tuple[IterationWindow | None, IterationWindow | None]


def _around(iterations: Sequence[IterationWindow], t: float) -> tuple[IterationWindow | None, Gap]:
    """The collective running at `t`, else the ones that ended before and started after it
    (`iterations` in time order: found by bisection)."""
    if not iterations:
        return None, (None, None)
    slack = 0.0 if iterations[0].exact else ESTIMATE_SLACK_S
    starts = (
        iterations.starts if isinstance(iterations, Iterations) else [i.start for i in iterations]
    )
    k = bisect_right(starts, t + slack)
    near = range(k - 1, max(-1, k - 8), -1)  # the few that started before t, latest first
    for j in near:
        if iterations[j].spans(t):
            return iterations[j], (None, None)
    prev = next((iterations[j] for j in near if iterations[j].end < t), None)
    return None, (prev, iterations[k] if k < len(iterations) else None)


def cap_rates(faults: Iterable[Any]) -> dict[int, float]:
    """fault index -> cap in bits/s, for the bandwidth caps among a run spec's `faults`."""
    out: dict[int, float] = {}
    for i, fault in enumerate(faults):
        if isinstance(fault, dict) and fault.get("kind") in CAP_KINDS:
            bits = rate_bits_per_s(str((fault.get("params") or {}).get("rate", "")))
            if bits:
                out[i] = bits
    return out


# --------------------------------------------------------------------------- the line


def _with_line(ev: FaultEvidence, note: str) -> FaultEvidence:
    return replace(ev, line=evidence_line(ev, note))


def evidence_line(ev: FaultEvidence, note: str = "") -> str:
    """One line a reader can check, e.g. `node1/nic3 link_down: hit during iteration 7 (64 MiB);
    412 MB moved in the 2.0 s before it; 0 B tx+rx in the 2.9 s after it`."""
    head = f"{ev.target} {ev.window.kind}: {VERDICT_TEXT[ev.verdict]}"
    if ev.iteration is not None:
        about = "" if ev.iteration.exact else "~"
        head += f" during iteration {about}{ev.iteration.number} ({_size(ev.iteration.size)})"
    elif any(it is not None and it.exact for it in ev.gap):
        # Exact iteration times: where the fault fell between them.
        prev, nxt = ev.gap
        parts = []
        if prev is not None:
            parts.append(
                f"{ev.window.applied - prev.end:.3f} s after iteration {prev.number} ended"
            )
        if nxt is not None:
            parts.append(f"{nxt.start - ev.window.applied:.3f} s before iteration {nxt.number}")
        elif ev.verdict is Verdict.HIT and prev is not None:
            parts.append(f"in iteration {prev.number + 1}, which never completed")
        head += f" ({', '.join(parts)})"
    facts = []
    if ev.before_bytes is not None:
        facts.append(f"{_bytes(ev.before_bytes)} moved in the {ev.before_s:.1f} s before it")
    if ev.live_bytes is not None:
        facts.append(f"{_bytes(ev.live_bytes)} in the last {LIVE_S:g} s")
    if ev.after_bytes is not None:
        facts.append(
            f"{_bytes(ev.after_bytes)} {ev.after_what} in the {ev.after_s:.1f} s after it"
            f" until {ev.after_until}"
        )
    text = "; ".join([head, *facts])
    return f"{text} ({note})" if note and ev.verdict is not Verdict.HIT else text


VERDICT_TEXT = {
    Verdict.HIT: "hit live traffic",
    Verdict.BETWEEN: "applied between collectives",
    Verdict.NO_TRAFFIC: "touched no traffic",
    Verdict.NOT_CUT: "did not cut the traffic",
    Verdict.AFTER_LAST: "applied after the last collective",
    Verdict.UNKNOWN: "evidence unknown",
}


def _bytes(n: float) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n:.0f} B"


def _rate(bytes_per_s: float) -> str:
    return f"{bytes_per_s * 8 / 1e9:.3g} Gbit/s"


def _size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} B"


# --------------------------------------------------------------------------- the outcome


def apply_to_outcome(outcome: Outcome | None, evidence: Sequence[FaultEvidence]) -> Outcome | None:
    """An `ok` run whose every NIC fault touched no traffic is `fault_without_effect`, with
    the evidence lines; any other outcome is returned as it is."""
    if outcome is None or outcome.status is not OutcomeStatus.OK or not evidence:
        return outcome
    if not all(ev.verdict.without_effect for ev in evidence):
        return outcome
    return Outcome(
        status=OutcomeStatus.FAULT_WITHOUT_EFFECT,
        reason="the fault touched no traffic: " + "; ".join(ev.line for ev in evidence),
        evidence=[
            *outcome.evidence,
            *(Evidence(text=ev.line, source="counters") for ev in evidence),
        ],
    )


# --------------------------------------------------------------------------- per-iteration traffic


TRAFFIC_BEFORE = 3
TRAFFIC_AFTER = 7
"""Iterations kept in the traffic table: this many before the first fault and from it on (a
dense run has thousands; the evidence is around the fault, as R-2CCL's artifact prints 10)."""


def iteration_traffic(
    series: dict[NicKey, NicSeries],
    iterations: Sequence[IterationWindow],
    windows: Iterable[FaultWindow] = (),
    run_end: float | None = None,
) -> list[IterationTraffic]:
    """Bytes each NIC moved during each measured collective around the first fault (every
    collective without a fault window; None where a NIC was not sampled). A fault after the
    last completion (the run hung in the collective it cut) adds that collective, from the last
    completion to `run_end`, as not completed: where the faulted NIC falls to zero."""
    picked = range(len(iterations))
    first = min((w.applied for w in windows), default=None)
    if first is not None:
        ends = (
            iterations.ends if isinstance(iterations, Iterations) else [i.end for i in iterations]
        )
        at = bisect_left(ends, first)
        picked = picked[max(0, at - TRAFFIC_BEFORE) : at + TRAFFIC_AFTER]
    chosen = [(iterations[i], True) for i in picked]
    last_end = iterations[-1].end if iterations else None
    if first is not None and run_end is not None and last_end is not None and last_end < first:
        cut = IterationWindow(len(iterations), last_end, run_end, 0, iterations[-1].exact)
        chosen.append((cut, False))
    out = []
    for (node, nic), s in sorted(series.items()):
        for it, done in chosen:
            # the cut-short collective: counted up to the last sample (the sampler stops with it)
            end = min(it.end, s.times[-1]) if not done and s.times else it.end
            out.append(
                IterationTraffic(
                    it.number, it.size, it.start, it.end, node, nic,
                    s.bytes_between(it.start, end, "tx"),
                    s.bytes_between(it.start, end, "rx"),
                    done,
                )
            )  # fmt: skip
    out.sort(key=lambda t: (t.iteration, t.node, t.nic))
    return out
