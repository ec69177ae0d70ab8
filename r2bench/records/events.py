"""Typed events from NCCL / R2CCL logs, nccl-tests error lines and launcher messages.

Public API:

- `iter_events(source, include_info=False, tz=timezone.utc)`: stream `Event`s from text
  (str, bytes or an iterable of lines), one event at most per line, in line order.
- `parse_events(...)`: the same, as a list.

NCCL INFO lines with no particular meaning are skipped unless `include_info` is set (a long
`NCCL_DEBUG=INFO` log has millions of them). NCCL prints timestamps in the node's local time
without a zone: pass that zone as `tz` to get correct epoch seconds.

The bracketed number in `host:pid:tid [N] NCCL ...` is NCCL's CUDA device index, which equals
the rank only with one process per GPU on one node; it is reported as `rank` and the outcome
classifier prefers the nccl-tests `# Rank` table (pid -> rank) when it has one.

What a launcher prints when a rank or the job dies (mpirun's reports, srun's task exits, a
failed start) is each launcher's `crash_messages` (r2bench.launch); a log does not say which
launcher wrote it, so every launcher's messages are tried.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone, tzinfo
from typing import Any

from r2bench.launch.base import CRASH_DETAILS, CrashKind, CrashMessage
from r2bench.launch.registry import crash_messages
from r2bench.records.models import Event, EventKind
from r2bench.records.nccltests import MAX_LINE, iter_lines

MAX_TEXT = 500

_NCCL_RE = re.compile(
    r"^(?:\[(?P<ts>[^\]]{1,64})\]\s*)?"
    r"(?P<host>[^\s:\[\]]+):(?P<pid>\d+):(?P<tid>\d+)\s+"
    r"(?:\[(?P<dev>\d+)\]\s+)?(?:(?:[\d.]+\s+)?(?P<src>[^\s:]+:\d+)\s+)?"
    r"NCCL (?P<level>INFO|WARN|TRACE|CALL|ABORT)\b ?(?P<msg>.*)$"
)
# INFO lines worth classifying (R2CC events, the version, IB errors); the rest are skipped.
_INFO_WORTH_RE = re.compile(
    r"HOT_REPAIR|STEP_SYNC|hot-repair|gather complete|R2CC_MODE=|type=BACKUP|OOB: Socket"
    r"|R2CC inject failure"
    r"|NCCL version|Got completion"
)
_TS_RE = re.compile(r"^(\d{4}-\d{2}-\d{2})[ T](\d{2}:\d{2}:\d{2})(?:[.,](\d{1,9}))?")
_EPOCH_RE = re.compile(r"^\d{9,11}(?:\.\d+)?$")
_BARE_VERSION_RE = re.compile(r"^NCCL version (\S+)")
_ROW_PREFIX_RE = re.compile(r"^\s*\d+\s+\d+\s+\S+\s+\S+\s+-?\d+(?=\S)")
_TEST_TAIL = (
    r": Test (?P<what>NCCL failure|CUDA failure|timeout \((?P<secs>\d+)s\))"
    r"\s*(?P<where>\S+:\d+)?\s*(?P<rest>.*)$"
)
_TEST_RE = re.compile(r"^(?P<host>\S+)" + _TEST_TAIL)
# The same message glued to the end of a half-printed result row ("...  4.36  0vm: Test timeout"):
# only a host name that starts with a letter can be told apart from the row's last number.
_TEST_GLUED_RE = re.compile(r"(?<![A-Za-z_-])(?P<host>[A-Za-z_][\w.-]*)" + _TEST_TAIL)
# Releases before 2.x: `NCCL failure all_reduce.cu:95 'unhandled cuda error'`, no host.
_OLD_FAILURE_RE = re.compile(r"^NCCL failure (?P<where>\S+:\d+)\s*(?P<rest>.*)$")
_TEST_STACK_RE = re.compile(r"^\s*\.\. (?P<host>\S+) pid (?P<pid>\d+): Test failure (?P<where>\S+)")
# Open MPI's own signal handler: "[host:pid] Signal: Segmentation fault (11)" and its backtrace
# "[host:pid] [ 1] /lib/libnccl.so.2(ncclAllReduce+0x10a)[0x7f...]".
_OMPI_SIGNAL_RE = re.compile(
    r"^\[(?P<host>[^:\]\s]+):0*(?P<pid>\d+)\] Signal: (?P<name>.+?) \((?P<sig>\d+)\)\s*$"
)
_OMPI_FRAME_RE = re.compile(
    r"^\[(?P<host>[^:\]\s]+):0*(?P<pid>\d+)\] \[\s*(?P<n>\d+)\] (?P<object>[^(\[\s]+)"
    r"(?:\((?P<symbol>[^)+]*)(?:\+0x[0-9a-f]+)?\))?"
)
_IB_RE = re.compile(
    r"Got completion from peer (?P<peer>\S+) with (?:error |status=)(?P<status>\d+)"
    r".*?vendor err (?P<vendor>\d+)"
)
_SOCKET_WORDS = (
    "socketProgress",
    "socketPoll",
    "Connection reset by peer",
    "Connection closed by remote peer",
    "Connection refused",
    "Broken pipe",
    "NET/Socket",
)
_CRASH_EVENTS = {
    CrashKind.SIGNALED: EventKind.MPI_PROCESS_SIGNALED,
    CrashKind.EXITED: EventKind.MPI_PROCESS_EXIT,
    CrashKind.ABORTED: EventKind.MPI_JOB_ABORTED,
    CrashKind.LAUNCH_FAILED: EventKind.LAUNCH_ERROR,
}
_RANK_ENDS = tuple(m for m in crash_messages() if m.kind is not CrashKind.LAUNCH_FAILED)
"""Launchers' reports of a rank's or the job's end, tried in registry order."""
_LAUNCH_FAILED_RE = re.compile(
    "|".join(
        f"(?:{m.pattern.pattern})" for m in crash_messages() if m.kind is CrashKind.LAUNCH_FAILED
    )
    or "(?!)"
)
"""Any launcher's message that the job could not start (tried after the NCCL version line)."""
# Words of a failed start that prose and help texts use too: taken only in a program's own
# message (`bash: mpirun: command not found`, `all_reduce_perf: error while loading ...`).
_LAUNCH_WORDS = ("command not found", "No such file or directory", "cannot open shared object file")
_PROGRAM_SAYS_RE = re.compile(r"^[\w./~+-]+: ")
_R2CC_RULES: tuple[tuple[EventKind, re.Pattern[str]], ...] = (
    (
        EventKind.R2CC_HOT_REPAIR_BROADCAST,
        re.compile(r"Broadcast HOT_REPAIR signal from rank (?P<from_rank>\d+) to (?P<peers>\d+)"),
    ),
    (
        EventKind.R2CC_HOT_REPAIR_RECEIVED,
        re.compile(r"Received HOT_REPAIR signal '(?P<signal>[^']*)' from (?P<peer>\S+)"),
    ),
    (
        EventKind.R2CC_STEP_SYNC,
        re.compile(
            r"(?P<direction>Sent|Received) STEP_SYNC channel=(?P<channel>\d+) step=(?P<step>\d+)"
            r" (?:to rank (?P<peer_rank>\d+)|from (?P<peer>\S+))"
        ),
    ),
    (EventKind.R2CC_HOT_REPAIR_DETECTED, re.compile(r"R2CC: hot-repair detected")),
    (
        # R2CC_DISCONNECTED_HCA firing in the IB transport (src/transport/net_ib.cc).
        EventKind.R2CC_INJECTED_FAILURE,
        re.compile(r"R2CC inject failure: channel=(?P<channel>\d+) step=(?P<step>\d+)"),
    ),
    (
        EventKind.R2CC_GATHER_COMPLETE,
        re.compile(
            r"gather complete: localMask=(?P<local_mask>\S+)"
            r" globalMask=(?P<global_mask>\S+)"
        ),
    ),
    (
        EventKind.R2CC_BACKUP_SWITCH,
        re.compile(
            r"R2CC_MODE=(?P<mode>\d+) \((?P<side>SEND|RECV)\): Channel (?P<channel>\d+)"
            r" will simulate disable of device (?P<failed_dev>\d+) \((?P<failed_name>[^)]*)\)"
            r" and use backup device (?P<backup_dev>\d+) \((?P<backup_name>[^)]*)\)"
        ),
    ),
    (
        EventKind.R2CC_BACKUP_CONNECTED,
        re.compile(
            r"Connect COMPLETED rank=(?P<peer_rank>\d+) channel=(?P<channel>\d+) type=BACKUP"
            r" dev=(?P<dev>\d+)"
        ),
    ),
    (EventKind.R2CC_OOB_INIT, re.compile(r"OOB: Socket Initialized on Port (?P<port>\d+)")),
    (EventKind.NCCL_VERSION, re.compile(r"^NCCL version (?P<version>\S+)")),
)


_CONTROL = {c: "\ufffd" for c in [*range(0x20), 0x7F] if c != 0x09}


def clean(text: str, limit: int = MAX_TEXT) -> str:
    """A log line made safe to store and show: control characters replaced, length capped."""
    text = text[:limit]
    return text if text.isprintable() else text.translate(_CONTROL)


MAX_EVENTS_PER_KIND = 2000
"""Events of one kind kept by `read_events`: R-2CCL at INFO repeats one WARN millions of
times, and the first ones are the evidence; the rest are counted."""


def read_events(
    source: str | bytes | Iterable[str] | Iterable[bytes],
    per_kind: int = MAX_EVENTS_PER_KIND,
    tz: tzinfo = timezone.utc,
) -> list[Event]:
    """The first `per_kind` events of each kind of a log, in line order, in bounded memory
    whatever the log's size: the events beyond are counted, not built, and the last event kept
    of such a kind carries `details["more"]`, the number left out."""
    scanner = _Scanner(include_info=False, tz=tz, per_kind=per_kind)
    kept = list(_scan(scanner, source))
    if not scanner.left_out:
        return kept
    last = {e.kind: i for i, e in enumerate(kept)}
    for kind, more in scanner.left_out.items():
        i = last[kind]
        kept[i] = kept[i].model_copy(update={"details": {**kept[i].details, "more": str(more)}})
    return kept


def parse_events(
    source: str | bytes | Iterable[str] | Iterable[bytes],
    include_info: bool = False,
    tz: tzinfo = timezone.utc,
) -> list[Event]:
    """All events of a log, in line order. See `iter_events`."""
    return list(iter_events(source, include_info=include_info, tz=tz))


def iter_events(
    source: str | bytes | Iterable[str] | Iterable[bytes],
    include_info: bool = False,
    tz: tzinfo = timezone.utc,
) -> Iterator[Event]:
    """Stream typed events from a log. Never raises on bad input; unknown lines are skipped."""
    return _scan(_Scanner(include_info=include_info, tz=tz), source)


def _scan(
    scanner: _Scanner, source: str | bytes | Iterable[str] | Iterable[bytes]
) -> Iterator[Event]:
    for lineno, line in enumerate(iter_lines(source), start=1):
        if len(line) > MAX_LINE:
            continue
        yield from scanner.feed(lineno, line)
    yield from scanner.flush()


@dataclass
class _Pending:
    """A launcher message spread over several lines, completed as its lines arrive."""

    kind: EventKind
    line: int
    text: str
    fields: dict[str, Any]
    continuation: tuple[re.Pattern[str], ...]
    details: dict[str, str] = field(default_factory=dict)
    ttl: int = 8  # lines to wait for the remaining fields


@dataclass
class _Scanner:
    include_info: bool
    tz: tzinfo
    per_kind: int | None = None  # NCCL events of one kind built at most (see read_events)
    seen: dict[EventKind, int] = field(default_factory=dict)
    left_out: dict[EventKind, int] = field(default_factory=dict)
    pending: _Pending | None = None
    ib_pending: tuple[int, str, re.Match[str]] | None = None

    def feed(self, lineno: int, line: str) -> Iterator[Event]:
        if self.pending is not None:
            yield from self._continue_pending(line)
        if self.ib_pending is not None:
            ib = self._continue_ib(line)
            yield ib
            if ib.message.endswith(line.strip()) and "vendor" in ib.details:
                return  # the line was the message's continuation
        if "NCCL " in line and (m := _NCCL_RE.match(line)) is not None:
            event = self._nccl(lineno, line, m)
            if event is not None:
                yield event
            return
        event = self._other(lineno, line)
        if event is not None:
            yield event

    def _continue_ib(self, line: str) -> Event:
        """The IB completion error held back, completed by `line` when it continues it."""
        assert self.ib_pending is not None
        lineno, first, m = self.ib_pending
        self.ib_pending = None
        msg = m.group("msg").strip()
        continued = "NCCL " not in line and not _NCCL_RE.match(line)
        joined = f"{msg} {line.strip()}" if continued else msg
        found = _IB_RE.search(joined)
        details = found.groupdict() if found else _ib_partial(msg)
        return self._nccl_event(
            EventKind.NET_IB_COMPLETION_ERROR, lineno, first, m, joined, details
        )

    def _nccl_event(
        self,
        kind: EventKind,
        lineno: int,
        line: str,
        m: re.Match[str],
        message: str,
        details: dict[str, str],
    ) -> Event:
        """The event of an NCCL log line (`host:pid:tid [dev] src NCCL LEVEL message`)."""
        if m.group("src"):
            details["source"] = m.group("src")
        return _event(
            kind,
            lineno,
            line,
            message=message,
            time=_parse_time(m.group("ts"), self.tz),
            host=m.group("host"),
            pid=int(m.group("pid")),
            tid=int(m.group("tid")),
            rank=int(m.group("dev")) if m.group("dev") is not None else None,
            details=details,
        )

    def flush(self) -> Iterator[Event]:
        if self.ib_pending is not None:
            yield self._continue_ib("NCCL ")
        if self.pending is not None:
            p, self.pending = self.pending, None
            yield _event(p.kind, p.line, p.text, details=p.details, **p.fields)

    def _continue_pending(self, line: str) -> Iterator[Event]:
        p = self.pending
        assert p is not None
        for rx in p.continuation:
            if (m := rx.search(line)) is not None:
                fields, details = _crash_fields(m)
                p.fields.update(fields)
                p.details.update(details)
        p.ttl -= 1
        # The node line may come before the exit code (PRRTE): only both rank and code end it.
        if p.ttl <= 0 or ("exit_code" in p.details and "rank" in p.fields):
            yield from self.flush()

    def _nccl(self, lineno: int, line: str, m: re.Match[str]) -> Event | None:
        msg = m.group("msg").strip()
        level = m.group("level")
        if level == "INFO" and not self.include_info and _INFO_WORTH_RE.search(msg) is None:
            return None  # most INFO lines: nothing to classify
        kind, details = _classify_nccl(level, msg)
        if self.per_kind is not None:
            n = self.seen.get(kind, 0)
            self.seen[kind] = n + 1
            if n >= self.per_kind:
                self.left_out[kind] = self.left_out.get(kind, 0) + 1
                return None
        if kind is EventKind.NET_IB_COMPLETION_ERROR and "vendor" not in details:
            # NCCL's message may go on on the next line: complete it there (see _continue_ib).
            self.ib_pending = (lineno, line, m)
            return None
        if kind is EventKind.NCCL_INFO and not self.include_info:
            return None
        return self._nccl_event(kind, lineno, line, m, msg, details)

    def _other(self, lineno: int, line: str) -> Event | None:
        body = _ROW_PREFIX_RE.sub("", line, count=1).strip()
        if not body:
            return None
        if (m := _TEST_RE.match(body)) is not None:
            return _test_event(lineno, line, body, m)
        if ": Test " in body and (m := _TEST_GLUED_RE.search(body)) is not None:
            return _test_event(lineno, line, body[m.start() :], m)
        if body.startswith("NCCL failure") and (m := _OLD_FAILURE_RE.match(body)) is not None:
            details = {"where": m.group("where"), "error": m.group("rest").strip(" '.")}
            return _event(EventKind.TEST_NCCL_FAILURE, lineno, line, message=body, details=details)
        if (m := _TEST_STACK_RE.match(body)) is not None:
            return _event(
                EventKind.TEST_FAILURE,
                lineno,
                line,
                message=body,
                host=m.group("host"),
                pid=int(m.group("pid")),
                details={"where": m.group("where")},
            )
        return self._mpi(lineno, line, body)

    def _mpi(self, lineno: int, line: str, body: str) -> Event | None:
        if body.startswith("[") and (event := _crash_line(lineno, line, body)) is not None:
            return event
        for message in _RANK_ENDS:
            if (m := message.pattern.search(body)) is not None:
                return self._rank_end(message, m, lineno, line, body)
        if (m := _BARE_VERSION_RE.match(body)) is not None:
            details = {"version": m.group(1)}
            return _event(EventKind.NCCL_VERSION, lineno, line, message=body, details=details)
        if _LAUNCH_FAILED_RE.search(body) or (
            _PROGRAM_SAYS_RE.match(body) and any(p in body for p in _LAUNCH_WORDS)
        ):
            return _event(EventKind.LAUNCH_ERROR, lineno, line, message=body)
        return None

    def _rank_end(
        self, message: CrashMessage, m: re.Match[str], lineno: int, line: str, body: str
    ) -> Event | None:
        """The event of a launcher's report; one that goes on over the next lines is held
        until they complete it (see `_continue_pending`)."""
        kind = _CRASH_EVENTS[message.kind]
        fields, details = _crash_fields(m)
        if message.continuation:
            fields = {"message": body, **fields}
            self.pending = _Pending(kind, lineno, line, fields, message.continuation)
            return None
        return _event(kind, lineno, line, message=body, details=details, **fields)


def _crash_fields(m: re.Match[str]) -> tuple[dict[str, Any], dict[str, str]]:
    """An event's fields (rank, pid, host) and details from a launcher message's named groups
    (see `CrashMessage`)."""
    groups = m.groupdict()
    fields: dict[str, Any] = {}
    if groups.get("rank") is not None:
        fields["rank"] = int(groups["rank"])
    if groups.get("pid") is not None:
        fields["pid"] = int(groups["pid"]) or None  # Open MPI 4 often prints PID 0
    if groups.get("host"):
        fields["host"] = groups["host"]
    return fields, {key: groups[key] or "" for key in CRASH_DETAILS if key in groups}


def _crash_line(lineno: int, line: str, body: str) -> Event | None:
    if (m := _OMPI_SIGNAL_RE.match(body)) is not None:
        details = {"signal": m.group("sig"), "signal_name": m.group("name")}
        host, pid = m.group("host"), int(m.group("pid"))
        return _event(
            EventKind.PROCESS_SIGNAL,
            lineno,
            line,
            message=body,
            host=host,
            pid=pid,
            details=details,
        )
    if (m := _OMPI_FRAME_RE.match(body)) is not None:
        details = {"frame": m.group("n"), "object": m.group("object")}
        details["symbol"] = m.group("symbol") or ""
        host, pid = m.group("host"), int(m.group("pid"))
        return _event(
            EventKind.BACKTRACE_FRAME,
            lineno,
            line,
            message=body,
            host=host,
            pid=pid,
            details=details,
        )
    return None


_IB_PEER_RE = re.compile(
    r"Got completion from peer (?P<peer>\S+) with (?:error |status=)(?P<status>\d+)"
)


def _ib_partial(msg: str) -> dict[str, str]:
    """Peer and status of an IB completion error whose vendor error was never printed."""
    m = _IB_PEER_RE.search(msg)
    return {k: v for k, v in m.groupdict().items() if v is not None} if m else {}


def _classify_nccl(level: str, msg: str) -> tuple[EventKind, dict[str, str]]:
    for kind, rx in _R2CC_RULES:
        m = rx.search(msg)
        if m:
            return kind, {k: v for k, v in m.groupdict().items() if v is not None}
    if "Got completion from peer" in msg:
        m = _IB_RE.search(msg)
        return EventKind.NET_IB_COMPLETION_ERROR, (m.groupdict() if m else {})
    if level == "WARN":
        if any(w in msg for w in _SOCKET_WORDS):
            return EventKind.SOCKET_ERROR, {}
        return EventKind.NCCL_WARN, {}
    return EventKind.NCCL_INFO, {}


def _test_event(lineno: int, line: str, body: str, m: re.Match[str]) -> Event:
    what = m.group("what")
    details = {"where": m.group("where") or "", "error": m.group("rest").strip(" '")}
    if m.group("secs"):
        kind = EventKind.TEST_TIMEOUT
        details["timeout_s"] = m.group("secs")
    elif what == "NCCL failure":
        kind = EventKind.TEST_NCCL_FAILURE
    else:
        kind = EventKind.TEST_FAILURE
        details["what"] = what
    return _event(kind, lineno, line, message=body, host=m.group("host"), details=details)


def _event(kind: EventKind, lineno: int, line: str, **fields: Any) -> Event:
    fields["message"] = clean(fields.get("message", ""))
    return Event(kind=kind, line=lineno, text=clean(line.strip()), **fields)


def _parse_time(ts: str | None, tz: tzinfo) -> float | None:
    if not ts:
        return None
    ts = ts.strip()
    if _EPOCH_RE.match(ts):
        return float(ts)
    m = _TS_RE.match(ts)
    if not m:
        return None
    base = _epoch_of_second(m.group(1), m.group(2), tz)
    if base is None:
        return None
    frac = float("0." + m.group(3)) if m.group(3) else 0.0
    return base + frac


@functools.lru_cache(maxsize=4096)
def _epoch_of_second(day: str, clock: str, tz: tzinfo) -> float | None:
    """Epoch seconds of a local time stamp (cached: a log's lines share their seconds)."""
    try:
        base = datetime.strptime(f"{day} {clock}", "%Y-%m-%d %H:%M:%S")
    except ValueError:
        return None
    return base.replace(tzinfo=tz).timestamp()
