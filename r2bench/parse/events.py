"""Typed events from NCCL / R2CCL logs, nccl-tests error lines and launcher messages.

Public API:

- `iter_events(source, include_info=False, tz=timezone.utc)`: stream `Event`s from text
  (str, bytes or an iterable of lines), one event at most per line, in line order.
- `parse_events(...)`: the same, as a list.
- `read_events(source, per_kind, tz)`: the first events of each kind, in bounded memory.
- `read_log(source, file_name=None, ...)`: the runs (`nccltests`) and the events of a log in
  one streaming pass: the way to read a large log (`r2bench parse`).

Lines are read as `nccltests.lines.LogLines` gives them: launcher prefixes (Open MPI tags,
torchrun's `[rank0]:`, srun labels, grep's file names) and paste artefacts (code fences, `>`
quotes, autolinks such as `[p2p.cc:783](https://p2p.cc:783/)`) taken off; an event's `text` is
the line as written.

NCCL INFO lines with no particular meaning are skipped unless `include_info` is set (a long
`NCCL_DEBUG=INFO` log has millions of them). NCCL prints timestamps in the node's local time
without a zone: pass that zone as `tz` to get correct epoch seconds.

The bracketed number in `host:pid:tid [N] NCCL ...` is NCCL's CUDA device index, which equals
the rank only with one process per GPU on one node; it is reported as `rank` and the outcome
classifier prefers the nccl-tests `# Rank` table (pid -> rank) when it has one.

What a launcher prints when a rank or the job dies (mpirun's reports, srun's task exits, a
failed start) is each launcher's `crash_messages` (r2bench.launch); a log does not say which
launcher wrote it, so every launcher's messages are tried. What the frameworks people run NCCL
under print when it fails is read too: PyTorch's ProcessGroupNCCL watchdog timeout
(`collective_timeout`), its `NCCL error ...`/`ncclRemoteError` reports, and NCCL's own fatal
errors (`async fatal event on QP`, `communicator encountered a fatal error`;
`nccl_fatal_error`).
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
from r2bench.parse.models import Event, EventKind, ParsedNcclTests
from r2bench.parse.nccltests.lines import MAX_LINE, LogLines
from r2bench.parse.nccltests.text import ROW_FIRST, RunParser
from r2bench.parse.numbers import id_or_none

MAX_TEXT = 500

# The `host:pid:tid` prefix may lack its thread id (`host:pid [dev]`) or be gone (an author
# stripped it: `NCCL WARN ...` at the start of the line, or `[dev] NCCL WARN`: a bracketed
# number of up to 4 digits is the device, not a time stamp).
_NCCL_RE = re.compile(
    r"^(?:\[(?P<ts>(?!\d{1,4}\])[^\]]{1,64})\]\s*)?"
    r"(?:(?P<host>[^\s:\[\]]+):(?P<pid>\d+)(?::(?P<tid>\d+))?\s+)?"
    r"(?:\[(?P<dev>\d+)\]\s+)?(?:(?:[\d.]+\s+)?(?P<src>[^\s:]+:\d+)\s+)?"
    r"NCCL (?P<level>INFO|WARN|TRACE|CALL|ABORT)\b ?(?P<msg>.*)$"
)
# NCCL's fatal errors: the IB async thread's events and the check that fails the comm after one.
_FATAL_RE = re.compile(
    r"(?P<dev>\S+:\d+) async fatal event(?: on (?P<on>QP|CQ|SRQ))?(?: \([^)]*\))?: (?P<what>.*)"
    r"|communicator encountered a fatal error(?: \(detected in (?P<detected>\w+)\))?"
)
_SOCKET_SOURCES = ("misc/socket.cc", "net_socket.cc")
# PyTorch's ProcessGroupNCCL: `[Rank 0] Watchdog caught collective operation timeout:
# WorkNCCL(SeqNum=1, OpType=BROADCAST, ..., Timeout(ms)=600000) ran for 600081 milliseconds`.
_WATCHDOG_RE = re.compile(
    r"(?:\[Rank (?P<rank>\d+)\] )?Watchdog caught collective operation timeout: "
    r"WorkNCCL\((?:SeqNum=(?P<seq>\d+), )?OpType=(?P<op>\w+)[^)]*?"
    r"(?:Timeout\(ms\)=(?P<timeout_ms>\d+))?\)(?: ran for (?P<ran_ms>\d+) milliseconds)?"
)
# A framework's report of an NCCL call that failed: PyTorch's `NCCL error in: file:line,
# unhandled system error ..., NCCL version 2.19.3`, `NCCL error: remote process exited or there
# was a network error`, `ncclRemoteError: ...`, `NCCL communicator was aborted on rank 3`.
_FRAMEWORK_NCCL_ERROR_RE = re.compile(
    r"NCCL error(?: in: \S+?)?[:,] (?P<what>[^,(]+)"
    r"|(?P<code>ncclRemoteError|ncclSystemError|ncclInternalError|ncclUnhandledCudaError"
    r"|ncclInvalidUsage): (?P<text>.+)"
    r"|NCCL communicator was aborted(?: on rank (?P<rank>\d+))?"
)
_RANK_SAID_RE = re.compile(r"\[(?:PG \S+ )?Rank (\d+)\]")
_FRAMEWORK_WORDS = (
    "NCCL error",
    "ncclRemoteError",
    "ncclSystemError",
    "ncclInternalError",
    "ncclUnhandledCudaError",
    "ncclInvalidUsage",
    "communicator was aborted",
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
# `... with error 12, opcode 0, len 0, vendor err 129` (NCCL 2.1x), `... with status=12
# opcode=0 len=0 vendor err 81` and `... with status=IBV_WC_LOC_PROT_ERR(4) opcode=... vendor_err=81`
# (NCCL 2.23 on).
_IB_STATUS = (
    r"Got completion from peer (?P<peer>\S+) with (?:error |status=)"
    r"(?:(?P<status_name>IBV_WC_\w+)\()?(?P<status>\d+)\)?"
)
_IB_RE = re.compile(_IB_STATUS + r".*?vendor[ _]err[ =]?(?P<vendor>\d+)")
MAX_WRAPPED = 4
_IB_TAIL_RE = re.compile(
    r"\b(?:len|opcode|reqSize|req_type|vendor[ _]err|localGid|remoteGids?|hca)\b|IBV_WC_"
)
"""Words of the IB error's tail: a line goes on with a wrapped error when it holds one,
starts with a GID (`::ffff:...`) or completes the error's vendor error."""
"""Lines an IB completion error may be wrapped over (a terminal's or a paste's wrapping)."""
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


# The start of what each of `_R2CC_RULES` matches, in the same order, and a word each of them
# holds: a substring test on the word (fast) comes before the key's search (slower), and the
# key alone tells the event's kind (the rule's own regex then reads its fields).
_R2CC_KEY_TEXTS = (
    ("HOT_REPAIR", r"Broadcast HOT_REPAIR signal from rank"),
    ("HOT_REPAIR", r"Received HOT_REPAIR signal '"),
    ("STEP_SYNC", r"(?:Sent|Received) STEP_SYNC channel="),
    ("R2CC", r"R2CC: hot-repair detected"),
    ("R2CC", r"R2CC inject failure: channel="),
    ("gather complete", r"gather complete: localMask="),
    ("R2CC", r"R2CC_MODE=\d+ \((?:SEND|RECV)\): Channel \d+ will simulate"),
    ("type=BACKUP", r"Connect COMPLETED rank=\d+ channel=\d+ type=BACKUP"),
    ("OOB: Socket", r"OOB: Socket Initialized on Port"),
    ("NCCL version", r"(?:^|NCCL INFO )NCCL version "),
)
_WORD_ORDER = ("STEP_SYNC", "HOT_REPAIR", "gather complete", "type=BACKUP", "OOB: Socket", "R2CC",
               "NCCL version")  # fmt: skip
_KEYED_RULES: tuple[tuple[str, tuple[tuple[int, re.Pattern[str]], ...]], ...] = tuple(
    (
        word,
        tuple(
            (index, re.compile(key)) for index, (w, key) in enumerate(_R2CC_KEY_TEXTS) if w == word
        ),
    )
    for word in _WORD_ORDER
)


_WARN_KINDS: dict[tuple[str, bool], EventKind] = {}


def _warn_kind(line: str) -> EventKind:
    """The kind of event an NCCL WARN line can only be (its message and whether it comes from
    NCCL's socket sources decide), remembered per message: a log repeats a few WARNs millions
    of times."""
    head, _, msg = line.partition(" NCCL WARN ")
    key = (msg, "socket.cc:" in head)
    kind = _WARN_KINDS.get(key)
    if kind is None:
        kind = _classify_nccl("WARN", msg, "misc/socket.cc:0" if key[1] else None)[0]
        if len(_WARN_KINDS) < 4096:
            _WARN_KINDS[key] = kind
    return kind


def _r2cc_rule(text: str) -> int | None:
    """The index in `_R2CC_RULES` of the rule `text` (a log line or its message) can only
    be, or None: a few substring tests, then the key of each rule its words point to."""
    if not (
        "R2CC" in text
        or "STEP_SYNC" in text
        or "HOT_REPAIR" in text
        or "NCCL version" in text
        or "gather complete" in text
        or "type=BACKUP" in text
        or "OOB: Socket" in text
    ):
        return None
    for word, rules in _KEYED_RULES:
        if word in text:
            for index, key in rules:
                if key.search(text) is not None:
                    return index
    return None


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
    return _counted(scanner, list(_scan(scanner, source)))


def _counted(scanner: _Scanner, kept: list[Event]) -> list[Event]:
    """`kept` with the count of the events left out on the last kept one of each kind, and
    the line of the last one left out (`more`, `last_line`): a kind repeated a million times
    is its first events, a count and where it last was, never a million objects."""
    if not scanner.left_out:
        return kept
    last = {e.kind: i for i, e in enumerate(kept)}
    for kind, more in scanner.left_out.items():
        i = last.get(kind)
        if i is None:  # every one left out (a kind whose first event was held back)
            continue
        said = {"more": str(more), "last_line": str(scanner.last_line.get(kind, ""))}
        kept[i] = kept[i].model_copy(update={"details": {**kept[i].details, **said}})
    return kept


def read_log(
    source: str | bytes | Iterable[str] | Iterable[bytes],
    *,
    file_name: str | None = None,
    per_kind: int = MAX_EVENTS_PER_KIND,
    tz: tzinfo = timezone.utc,
) -> tuple[list[ParsedNcclTests], list[Event]]:
    """The runs of a text log (as `nccltests.text.iter_runs` finds them) and its events (as
    `read_events` keeps them), in one streaming pass: each line is read, decoded and cleaned
    once, so a log of gigabytes costs one pass in bounded memory whatever its mix of lines."""
    parser = RunParser(split=True)
    scanner = _Scanner(include_info=False, tz=tz, per_kind=per_kind)
    lines = LogLines(source)
    events: list[Event] = []
    feed_parser, feed_scanner, library_line = parser.feed, scanner.feed, parser.library_line
    try:
        for lineno, raw, text, origin, stamp in lines:
            if " NCCL INFO " in text and text[:1] not in ROW_FIRST:
                # most of an INFO log: skipped here unless it may be an event (R2CC words,
                # the version, an IB error) or completes one held back
                library_line(lineno, text)
                if scanner.idle:
                    rule = _r2cc_rule(text)
                    if rule is None and "Got completion" not in text:
                        continue
                    if rule is not None and scanner.capped(_R2CC_RULES[rule][0], lineno):
                        continue
            else:
                feed_parser(lineno, text, origin)
            if len(raw) <= MAX_LINE:
                feed_scanner(lineno, raw, text, stamp, events)
    except Exception as exc:  # a broken reader must not lose what was read so far
        parser.st.warn(f"input read failed: {exc!r}")
    scanner.flush(events)
    return parser.finish(lines, file_name=file_name), _counted(scanner, events)


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
    out: list[Event] = []
    for lineno, raw, text, _origin, stamp in LogLines(source):
        if len(raw) > MAX_LINE:
            continue
        scanner.feed(lineno, raw, text, stamp, out)
        if out:
            yield from out
            out.clear()
    scanner.flush(out)
    yield from out


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
class _HeldIb:
    """An IB completion error whose vendor error has not been seen yet: NCCL's message, or a
    paste of it, may go on over the next lines."""

    lineno: int
    raw: str
    match: re.Match[str]
    stamp: str | None
    parts: list[str] = field(default_factory=list)
    """The lines that went on with the message."""

    @property
    def message(self) -> str:
        return " ".join([self.match.group("msg").strip(), *self.parts])

    @property
    def complete(self) -> bool:
        """The vendor error is read."""
        return _IB_RE.search(self.message) is not None


@dataclass
class _Scanner:
    include_info: bool
    tz: tzinfo
    per_kind: int | None = None  # NCCL events of one kind built at most (see read_events)
    seen: dict[EventKind, int] = field(default_factory=dict)
    left_out: dict[EventKind, int] = field(default_factory=dict)
    pending: _Pending | None = None
    ib_pending: _HeldIb | None = None
    line: int = 0
    """The line being read (the last line of a kind left out is said with its count)."""
    last_line: dict[EventKind, int] = field(default_factory=dict)

    def feed(self, lineno: int, raw: str, line: str, stamp: str | None, out: list[Event]) -> None:
        """The events of one line (`raw` as written, `line` cleaned, `stamp` the time stamp
        the cleaning took off), appended to `out`."""
        self.line = lineno
        if self.pending is not None:
            self._continue_pending(line, out)
        if self.ib_pending is not None and self._continue_ib(line, out):
            return  # the line went on with the IB error held back
        if " NCCL INFO " in line and not self.include_info:
            rule = _r2cc_rule(line)
            if rule is not None:
                kind = _R2CC_RULES[rule][0]
            elif "Got completion from peer" in line:
                kind = EventKind.NET_IB_COMPLETION_ERROR
            else:
                return  # most INFO lines: nothing to classify
            if self.per_kind is not None and self.seen.get(kind, 0) >= self.per_kind:
                self._count(kind)  # beyond the first ones: counted, not built
                return
        elif " NCCL WARN " in line and self.per_kind is not None:
            kind = _warn_kind(line)
            if self.seen.get(kind, 0) >= self.per_kind:
                self._count(kind)  # beyond the first ones: counted, not built
                return
        if "NCCL " in line and (m := _NCCL_RE.match(line)) is not None:
            event = self._nccl(lineno, raw, m, stamp)
            if event is not None:
                out.append(event)
            return
        event = self._other(lineno, raw, line)
        if event is not None:
            out.append(event)

    def capped(self, kind: EventKind, lineno: int) -> bool:
        """Whether an event of `kind` (on line `lineno`) is beyond the first `per_kind` ones:
        then counted (not built), and True."""
        self.line = lineno
        if self.per_kind is None or self.seen.get(kind, 0) < self.per_kind:
            return False
        self._count(kind)
        return True

    @property
    def idle(self) -> bool:
        """No message spread over several lines is waiting for its next line."""
        return self.pending is None and self.ib_pending is None

    def _continue_ib(self, line: str, out: list[Event]) -> bool:
        """Whether `line` goes on with the IB completion error held back (joined to it: it
        holds a word of the error's tail, a GID, or completes its vendor error); the error is
        passed on to `out` at the first line that does not go on with it, or after
        `MAX_WRAPPED` lines."""
        held = self.ib_pending
        assert held is not None
        text = line.strip()
        goes_on = (
            bool(text)
            and "NCCL " not in line
            and (
                _IB_TAIL_RE.search(text) is not None
                or text.startswith("::")
                or (not held.complete and _IB_RE.search(f"{held.message} {text}") is not None)
            )
        )
        if goes_on:
            held.parts.append(text)
            if len(held.parts) < MAX_WRAPPED:
                return True
        out.append(self._ib_event())
        return goes_on

    def _ib_event(self) -> Event:
        """The IB completion error held back, as complete as its lines made it."""
        held = self.ib_pending
        assert held is not None
        self.ib_pending = None
        joined = held.message
        found = _IB_RE.search(joined)
        details = _groups(found) if found else _ib_partial(joined)
        return self._nccl_event(
            EventKind.NET_IB_COMPLETION_ERROR,
            held.lineno,
            held.raw,
            held.match,
            joined,
            details,
            held.stamp,
        )

    def _nccl_event(
        self,
        kind: EventKind,
        lineno: int,
        raw: str,
        m: re.Match[str],
        message: str,
        details: dict[str, str],
        stamp: str | None,
    ) -> Event:
        """The event of an NCCL log line (`host:pid:tid [dev] src NCCL LEVEL message`)."""
        if m.group("src"):
            details["source"] = m.group("src")
        return _event(
            kind,
            lineno,
            raw,
            message=message,
            time=_parse_time(m.group("ts") or stamp, self.tz),
            host=m.group("host"),
            pid=_number(m.group("pid")),
            tid=_number(m.group("tid")),
            rank=_number(m.group("dev")),
            details=details,
        )

    def flush(self, out: list[Event]) -> None:
        if self.ib_pending is not None:
            out.append(self._ib_event())
        if self.pending is not None:
            p, self.pending = self.pending, None
            out.append(_event(p.kind, p.line, p.text, details=p.details, **p.fields))

    def _continue_pending(self, line: str, out: list[Event]) -> None:
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
            self.flush(out)

    def _nccl(self, lineno: int, raw: str, m: re.Match[str], stamp: str | None) -> Event | None:
        msg = m.group("msg").strip()
        level = m.group("level")
        kind, details = _classify_nccl(level, msg, m.group("src"))
        if kind is EventKind.NCCL_INFO and not self.include_info:
            return None  # worth a look, but nothing to classify
        if self.per_kind is not None and not self._count(kind):
            return None
        if kind is EventKind.NET_IB_COMPLETION_ERROR and "vendor" not in details:
            # NCCL's message may go on on the next lines: complete it there (_continue_ib).
            self.ib_pending = _HeldIb(lineno, raw, m, stamp)
            return None
        return self._nccl_event(kind, lineno, raw, m, msg, details, stamp)

    def _count(self, kind: EventKind) -> bool:
        """Count an event of `kind`; whether it is among the first `per_kind` (kept)."""
        n = self.seen.get(kind, 0)
        self.seen[kind] = n + 1
        if self.per_kind is not None and n >= self.per_kind:
            self.left_out[kind] = self.left_out.get(kind, 0) + 1
            self.last_line[kind] = self.line
            return False
        return True

    def _other(self, lineno: int, raw: str, line: str) -> Event | None:
        body = _ROW_PREFIX_RE.sub("", line, count=1).strip()
        if not body:
            return None
        if (m := _TEST_RE.match(body)) is not None:
            return _test_event(lineno, raw, body, m)
        if ": Test " in body and (m := _TEST_GLUED_RE.search(body)) is not None:
            return _test_event(lineno, raw, body[m.start() :], m)
        if body.startswith("NCCL failure") and (m := _OLD_FAILURE_RE.match(body)) is not None:
            details = {"where": m.group("where"), "error": m.group("rest").strip(" '.")}
            return _event(EventKind.TEST_NCCL_FAILURE, lineno, raw, message=body, details=details)
        if (m := _TEST_STACK_RE.match(body)) is not None:
            return _event(
                EventKind.TEST_FAILURE,
                lineno,
                raw,
                message=body,
                host=m.group("host"),
                pid=int(m.group("pid")),
                details={"where": m.group("where")},
            )
        if "Watchdog caught" in body or ("ncc" in body.lower() and _framework_words(body)):
            event = self._framework(lineno, raw, body)
            if event is not None:
                return event
        return self._mpi(lineno, raw, body)

    def _framework(self, lineno: int, raw: str, body: str) -> Event | None:
        """A framework's report of NCCL failing under it: PyTorch's watchdog timeout, its
        `NCCL error`/`ncclRemoteError` reports, an aborted communicator."""
        if (m := _WATCHDOG_RE.search(body)) is not None:
            kind = EventKind.COLLECTIVE_TIMEOUT
            details = {k: v for k, v in m.groupdict().items() if v is not None and k != "rank"}
            rank = int(m.group("rank")) if m.group("rank") else None
        elif (m := _FRAMEWORK_NCCL_ERROR_RE.search(body)) is not None:
            kind = EventKind.NCCL_FATAL_ERROR
            what = m.group("what") or m.group("text") or "communicator aborted"
            details = {"what": what.strip(), "reported_by": "framework"}
            if m.group("code"):
                details["code"] = m.group("code")
            rank = int(m.group("rank")) if m.group("rank") else None
        else:
            return None
        if rank is None and (said := _RANK_SAID_RE.search(body)) is not None:
            rank = int(said.group(1))
        if self.per_kind is not None and not self._count(kind):
            return None
        return _event(kind, lineno, raw, message=body, rank=rank, details=details)

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


def _framework_words(body: str) -> bool:
    return any(w in body for w in _FRAMEWORK_WORDS)


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


_IB_PEER_RE = re.compile(_IB_STATUS)


def _ib_partial(msg: str) -> dict[str, str]:
    """Peer and status of an IB completion error whose vendor error was never printed."""
    m = _IB_PEER_RE.search(msg)
    return _groups(m) if m else {}


def _groups(m: re.Match[str]) -> dict[str, str]:
    """A match's named groups that matched."""
    return {k: v for k, v in m.groupdict().items() if v is not None}


def _number(text: str | None) -> int | None:
    """A prefix's number (pid, thread id, device), None where the prefix lacks it."""
    return int(text) if text is not None else None


def _classify_nccl(
    level: str, msg: str, source: str | None = None
) -> tuple[EventKind, dict[str, str]]:
    if (rule := _r2cc_rule(msg)) is not None:
        kind, rx = _R2CC_RULES[rule]
        if (m := rx.search(msg)) is not None:
            return kind, {k: v for k, v in m.groupdict().items() if v is not None}
    if "Got completion from peer" in msg:
        m = _IB_RE.search(msg)
        return EventKind.NET_IB_COMPLETION_ERROR, (_groups(m) if m else {})
    if level == "WARN":
        if "fatal" in msg and (m := _FATAL_RE.search(msg)) is not None:
            return EventKind.NCCL_FATAL_ERROR, {
                k: v.strip() for k, v in m.groupdict().items() if v is not None
            }
        if any(w in msg for w in _SOCKET_WORDS) or (
            source.endswith(_SOCKET_SOURCES, 0, source.rfind(":"))
            if source is not None
            else any(f"{src}:" in msg for src in _SOCKET_SOURCES)
        ):
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
    _refuse_bad_ids(fields)
    return Event(kind=kind, line=lineno, text=clean(line.strip()), **fields)


def _refuse_bad_ids(fields: dict[str, Any]) -> None:
    """A pid, thread id or rank beyond any real one (a pid of 10^23) is left out of the event,
    and the event says why in its details: the line's event is kept, its table stays int64."""
    for name in ("pid", "tid", "rank"):
        if fields.get(name) is None:
            continue
        fields[name], why = id_or_none(fields[name], name)
        if why is not None:
            details = dict(fields.get("details") or {})
            details[f"{name}_refused"] = why
            fields["details"] = details


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
