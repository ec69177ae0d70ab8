"""Bytes each NIC moved, from the counter samples of a run (pure: no pandas, no numpy).

`node/<node>/counters.tsv` (written by `injectors/sampler.sh`, every 50 ms by default) holds a
line per NIC per sample: node epoch time, NIC, source (`net` | `ib`), tx and rx bytes, state.
Here each NIC becomes a `NicSeries` on the controller clock (the node's measured offset
subtracted), and `bytes_between` answers "how many bytes did this NIC move between t0 and t1",
interpolating linearly between samples. A counter that went backwards (a device reset) or was
unreadable splits the series: no delta is ever taken across it. The failure evidence
(`analysis.evidence`) and the per-iteration traffic table read these series.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from itertools import groupby
from math import isnan
from operator import ge, gt, itemgetter
from pathlib import Path
from typing import Literal

from r2bench.safeio import InputRefused, read_text_bounded

COUNTERS_FILE = "counters.tsv"
COUNTERS_LIMIT = 32 << 20
"""Largest counters file read (8 NICs every 50 ms for about 90 minutes; about 330 MB parsed,
measured); a larger one is left out, with no samples."""
_FIELDS = 6  # time, nic, source, tx_bytes, rx_bytes, state

CounterLine = tuple[float, str, str, float, float, str]
"""(node time, nic, source, tx bytes, rx bytes, state) of one sample line."""


def parse_counter_line(line: str) -> CounterLine | None:
    """One sample line, or None for comments, the header, lines with extra fields (two lines
    run together) and lines without a time. A line cut short keeps what it has (NaN)."""
    if not line or line.startswith(("#", "time\t")):
        return None
    fields = line.split("\t")
    if len(fields) > _FIELDS:
        return None
    fields += [""] * (_FIELDS - len(fields))
    time_s = _number(fields[0].replace(",", "."))  # a locale may write 1,5
    if time_s != time_s:  # NaN: no time, no sample
        return None
    state = "" if fields[5] == "-" else fields[5]  # `-`: the state file was unreadable
    return (time_s, fields[1], fields[2], _number(fields[3]), _number(fields[4]), state)


def _number(text: str) -> float:
    """A counter or a time; NaN for `-` (unreadable), empty or garbage."""
    try:
        return float(text)
    except ValueError:
        return float("nan")


Direction = Literal["tx", "rx", "both"]


@dataclass
class NicSeries:
    """One NIC's samples on the controller clock: time, tx and rx bytes, in time order.

    `segments` holds the index ranges within which deltas are valid (a counter reset or an
    unreadable sample starts a new one)."""

    node: str
    nic: str
    source: str
    times: list[float] = field(default_factory=list)
    tx: list[float] = field(default_factory=list)
    rx: list[float] = field(default_factory=list)
    segments: list[tuple[int, int]] = field(default_factory=list)

    @property
    def span(self) -> tuple[float, float] | None:
        """First and last sample time, or None without samples."""
        return (self.times[0], self.times[-1]) if self.times else None

    def bytes_between(self, t0: float, t1: float, direction: Direction = "both") -> float | None:
        """Bytes moved in [t0, t1] (tx, rx or both; linear between samples); None where the
        samples do not cover the interval within one valid segment."""
        seg = self._segment_of(t0, t1)
        if seg is None:
            return None
        values = (self.tx, self.rx) if direction == "both" else (getattr(self, direction),)
        return sum(self._at(v, t1, seg) - self._at(v, t0, seg) for v in values)

    def sampled_between(
        self, t0: float, t1: float, direction: Direction = "both"
    ) -> tuple[float, float] | None:
        """Bytes moved between the first sample at or after `t0` and the last at or before `t1`,
        with the seconds between those two samples; None without two such samples in one valid
        segment. Unlike `bytes_between` nothing is interpolated, so a sample taken late (a busy
        sampler) cannot spread bytes moved before `t0` into the interval."""
        values = (self.tx, self.rx) if direction == "both" else (getattr(self, direction),)
        for lo, hi in self.segments:
            a = bisect_left(self.times, t0, lo, hi + 1)
            b = bisect_right(self.times, t1, lo, hi + 1) - 1
            if a < b:
                moved = sum(v[b] - v[a] for v in values)
                return moved, self.times[b] - self.times[a]
        return None

    def _segment_of(self, t0: float, t1: float) -> tuple[int, int] | None:
        if t1 < t0:
            return None
        for lo, hi in self.segments:
            if self.times[lo] <= t0 and t1 <= self.times[hi]:
                return lo, hi
        return None

    def _at(self, values: list[float], t: float, seg: tuple[int, int]) -> float:
        lo, hi = seg
        right = bisect_left(self.times, t, lo, hi + 1)
        if right <= lo:
            return values[lo]
        if right > hi:
            return values[hi]
        t_a, t_b = self.times[right - 1], self.times[right]
        v_a, v_b = values[right - 1], values[right]
        if t_b <= t_a:
            return v_b
        return v_a + (v_b - v_a) * (t - t_a) / (t_b - t_a)


NicKey = tuple[str, str]
"""(node, nic)."""


CounterLines = dict[str, list[CounterLine]]
"""node -> its sample lines, sorted by NIC, then time (node clock)."""


def read_counter_file(path: Path) -> list[CounterLine]:
    """One sampler file's lines, sorted by NIC, then time; empty when unreadable."""
    try:
        text = read_text_bounded(path, COUNTERS_LIMIT, path.name)
    except (OSError, InputRefused):
        return []  # unreadable, or larger than any sampler writes: no samples
    lines = [s for s in map(parse_counter_line, text.splitlines()) if s is not None]
    lines.sort(key=lambda s: (s[1], s[0]))
    return lines


def read_counter_lines(paths: Iterable[Path]) -> CounterLines:
    """Every node's sample lines from the files collected into a run folder (those named
    `counters.tsv`, under `node/<node>/`)."""
    return {p.parent.name: read_counter_file(p) for p in paths if p.name == COUNTERS_FILE}


def series_of(lines: CounterLines, offset: Callable[[str], float]) -> dict[NicKey, NicSeries]:
    """Every NIC's series on the controller clock (`offset(node)`: node minus controller)."""
    out: dict[NicKey, NicSeries] = {}
    for node, samples in lines.items():
        shift = offset(node)
        for nic, group in groupby(samples, key=itemgetter(1)):  # sorted by NIC, then time
            chunk = list(group)
            out[(node, nic)] = _series(node, nic, chunk[0][2], chunk, shift)
    return out


def read_series(paths: Iterable[Path], offset: Callable[[str], float]) -> dict[NicKey, NicSeries]:
    """Every NIC's series from the counters files of a run, on the controller clock."""
    return series_of(read_counter_lines(paths), offset)


CounterRow = tuple[
    str, str, str, float, float | None, float | None, str, float | None, float | None
]
"""(node, nic, source, controller time, tx bytes, rx bytes, state, tx Gbit/s, rx Gbit/s); None
where a counter was unreadable or a rate undefined (JSON-safe: the kept rows hold these)."""


COUNTER_COLUMNS = (
    *("run_id", "node", "nic", "source", "time", "tx_bytes", "rx_bytes", "state"),
    *("tx_gbit_s", "rx_gbit_s"),
)
"""The counters table's columns: a run id, then a `CounterRow`."""


def counter_rows(lines: CounterLines, offset: Callable[[str], float]) -> list[CounterRow]:
    """The counters table's rows: every sample on the controller clock, with the throughput
    since the NIC's previous sample (NaN for its first one, and across a counter that went
    backwards or was unreadable)."""
    out: list[CounterRow] = []
    for node, samples in lines.items():
        shift = offset(node)
        previous: CounterLine | None = None
        for sample in samples:
            time_s, nic, source, tx, rx, state = sample
            tx_rate = rx_rate = None
            if previous is not None and previous[1] == nic and time_s > previous[0]:
                dt = time_s - previous[0]
                tx_rate = _rate(tx - previous[3], dt)
                rx_rate = _rate(rx - previous[4], dt)
            row = (node, nic, source, time_s - shift, _known(tx), _known(rx), state)
            out.append((*row, tx_rate, rx_rate))
            previous = sample
    return out


def _known(value: float) -> float | None:
    return None if value != value else value


def _rate(delta: float, dt: float) -> float | None:
    """Gbit/s of a counter delta; None for a counter that went backwards or was unreadable."""
    return delta * 8 / dt / 1e9 if delta >= 0 else None


def _series(
    node: str, nic: str, source: str, samples: list[CounterLine], shift: float
) -> NicSeries:
    """One NIC's series: unreadable samples dropped, a new segment after each of them and at
    every counter that went backwards or clock that did not advance."""
    times, _, _, tx, rx, _ = (list(col) for col in zip(*samples, strict=True))
    times = [t - shift for t in times]
    clean = not any(map(isnan, tx)) and not any(map(isnan, rx))
    if clean and not any(map(ge, times[:-1], times[1:])) and not _went_back(tx, rx):
        return NicSeries(node, nic, source, times, tx, rx, [(0, len(times) - 1)])  # the usual
    kept = [
        (t, a, b, i)
        for i, (t, a, b) in enumerate(zip(times, tx, rx, strict=True))
        if a == a and b == b
    ]
    if not kept:
        return NicSeries(node, nic, source)
    times, tx, rx, where = (list(col) for col in zip(*kept, strict=True))
    starts = [0] + [
        i
        for i in range(1, len(times))
        if where[i] != where[i - 1] + 1  # an unreadable sample between them
        or tx[i] < tx[i - 1]
        or rx[i] < rx[i - 1]
        or times[i] <= times[i - 1]
    ]
    ends = [*(b - 1 for b in starts[1:]), len(times) - 1]
    return NicSeries(node, nic, source, times, tx, rx, list(zip(starts, ends, strict=True)))


def _went_back(tx: list[float], rx: list[float]) -> bool:
    """Whether either counter ever decreased (a reset)."""
    return any(map(gt, tx[:-1], tx[1:])) or any(map(gt, rx[:-1], rx[1:]))
