"""nccl-tests' text output (stdout, also interleaved with NCCL logs, cut short or behind
launcher prefixes), read in one streaming pass as one run (`parse_text`) or as every run it
holds (`iter_runs`, `parse_text_runs`).

`RunParser` is the pass itself, for a caller that reads a log once for several things
(`events.read_log`); `ends_complete` says whether an output ends as a complete run of its
tool's version. Nothing here raises on bad input: what was understood is returned, and what
was not is listed in `ParsedNcclTests.warnings`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from r2bench.parse.models import ParsedNcclTests
from r2bench.parse.nccltests.collective import settle_collective
from r2bench.parse.nccltests.columns import SIZE_ONLY, Layout, is_column_line, looks_like_row
from r2bench.parse.nccltests.lines import MAX_LINE, LogLines, raw_lines
from r2bench.parse.nccltests.runs import split_by_ratio
from r2bench.parse.nccltests.salvage import check_blank_redops, keep_consensus, short_row
from r2bench.parse.nccltests.state import RunState, finish_run
from r2bench.parse.nccltests.table import (
    COMMAND_RE,
    DEVICE_RE,
    RUN_START_RE,
    flush_pending,
    parse_comment,
    parse_other,
    parse_row,
)

_LOG_START_RE = re.compile(r"[A-Za-z][\w.-]*:\d+:\d+ \[\d+\] ")
"""The start of an NCCL log line (`host:pid:tid [rank] `), wherever it is in a line."""
_GLUED_TEST_RE = re.compile(r"(?<=\d)[A-Za-z_][\w.-]*: Test ")
"""nccl-tests' `host: Test timeout` message right after a row's last printed number."""
ROW_FIRST = frozenset(" \t0123456789")
"""First characters of a line that may be a result row with a library log line glued on."""


def parse_text(
    source: str | bytes | Iterable[str] | Iterable[bytes],
    binary_name: str | None = None,
    *,
    file_name: str | None = None,
    first_line: int = 1,
) -> ParsedNcclTests:
    """Parse nccl-tests stdout/stderr (possibly interleaved with NCCL logs, truncated, garbage,
    behind launcher prefixes) as one run.

    The collective is taken from what the output says (the program name line, a command line
    that runs the test, a failure line naming its source file, the columns and the busbw/algbw
    ratio), then `binary_name` (the test binary that was run), then the `file_name`;
    `collective_from` says which. An iterable should yield lines with their line ends (as a
    file does): a last line without one is taken as cut short and its row is dropped.
    `first_line` numbers the lines of a run cut out of a longer file.
    """
    parser = RunParser(split=False)
    lines = LogLines(source, first_line)
    parser.parse(lines)
    return parser.finish(lines, binary_name=binary_name, file_name=file_name)[0]


def iter_runs(
    source: str | bytes | Iterable[str] | Iterable[bytes], *, file_name: str | None = None
) -> list[ParsedNcclTests]:
    """Every run of a text output, in one streaming pass; each knows its `first_line` and
    `last_line`. Runs are cut at each new nccl-tests header, at rows after a run's footer (a
    grep or `cat` of several outputs), at a new device list after rows, at a command line that
    runs a test after rows, at a `==> file <==` line, at a change of the rank, host or file a
    launcher or grep prefix names, and where the sizes start over with another busbw/algbw
    factor (another rank count: an extract of several runs with no header between them). Text
    before the first header stays with the first run."""
    parser = RunParser(split=True)
    lines = LogLines(source)
    parser.parse(lines)
    return parser.finish(lines, file_name=file_name)


def ends_complete(parsed: ParsedNcclTests) -> bool:
    """Whether the output ends as a complete run of its tool and version ends.

    nccl-tests from 2.16.7 on print `# Collective test starting` (from 2.17.4 also the
    `# nccl-tests version ... nccl-headers=` line) and end with `# Collective test concluded`;
    newer rccl-tests (`# rccl-tests version ... rccl-headers=`, `# Collective test starting`)
    too. Older nccl-tests and rccl-tests (`rccl-tests: Version ...`, no starting line) end with
    the `# Avg bus bandwidth` footer: that is their last line of a complete run. An NCCL
    program's own log ends with every communicator destroyed (`ended_program`)."""
    if parsed.concluded:
        return True
    if not parsed.footer:
        return ended_program(parsed)
    return not expects_concluding_line(parsed)


def ended_program(parsed: ParsedNcclTests) -> bool:
    """Whether a log of an NCCL program of one's own (no nccl-tests header) ends as such a
    program ends: every communicator rank it set up torn down (`Destroy COMPLETE`)."""
    return not parsed.header and parsed.comms_destroyed > 0 and parsed.comms_open == 0


def expects_concluding_line(parsed: ParsedNcclTests) -> bool:
    """Whether the output's tool and version print `# Collective test concluded` at the end:
    it printed the version line of 2.17.4 and later (`nccl-headers=`) or the starting line
    (2.16.7 and later)."""
    return parsed.nccl_headers is not None or parsed.collective_from == "program_line"


def parse_text_runs(
    source: str | bytes | Iterable[str] | Iterable[bytes], *, file_name: str | None = None
) -> list[tuple[int, str, ParsedNcclTests]]:
    """Each run of a text output: (first line number, its text, what it says). Holds the text
    in memory: for files of any size, use `iter_runs` (line ranges) instead."""
    lines = list(raw_lines(source))
    out = []
    for run in iter_runs(lines, file_name=file_name):
        first, last = run.first_line or 1, run.last_line or len(lines)
        out.append((first, "".join(lines[first - 1 : last]), run))
    return out


class RunParser:
    """One streaming pass over a text output: `feed` each cleaned line, then `finish`. With
    `split`, a new run begins wherever the text shows one (see `iter_runs`)."""

    def __init__(self, *, split: bool) -> None:
        self.split = split
        self.runs: list[RunState] = [RunState()]
        self.carry: list[tuple[str, str]] = []  # (source, collective) seen after a run ended

    @property
    def st(self) -> RunState:
        return self.runs[-1]

    def parse(self, lines: LogLines) -> None:
        """Feed every line of `lines` (a broken reader keeps what was read before it broke)."""
        feed = self.feed
        try:
            for lineno, _raw, text, origin, _stamp in lines:
                feed(lineno, text, origin)
        except Exception as exc:  # a broken reader must not lose what was parsed so far
            self.st.warn(f"input read failed: {exc!r}")

    def feed(self, lineno: int, line: str, origin: str | None) -> None:
        """One line, launcher prefixes and paste artefacts already taken off."""
        if (" NCCL INFO " in line or " NCCL WARN " in line) and line[:1] not in ROW_FIRST:
            self.library_line(lineno, line)
            return
        self._line(lineno, line, origin)

    def library_line(self, lineno: int, line: str) -> None:
        """An NCCL log line (`host:pid:tid [dev] NCCL INFO ...`; most of an INFO log): only
        what it says of the library is ours, events.py reads the rest."""
        st = self.runs[-1]
        if st.first_line is None:
            self._touch(lineno)
        st.last_line = lineno
        lib = st.library
        if (
            "ersion" in line
            or (lib.family != "r2ccl" and ("R2CC" in line or "r2cc/" in line))
            or "libnccl" in line
        ):
            lib.feed(line)
        elif "COMPLETE" in line:
            st.comms.feed(line)

    def finish(
        self,
        lines: LogLines,
        *,
        binary_name: str | None = None,
        file_name: str | None = None,
    ) -> list[ParsedNcclTests]:
        """The runs read, settled: rows cut short by a missing last line end dropped, rows whose
        busbw/algbw no other row shares dropped, an extract of several runs split."""
        lineno = lines.last
        st = self.st
        cut_row = st.pending is not None and st.pending[0] == lineno
        last_rows = len(st.rows)
        while last_rows and st.rows[last_rows - 1].line == lineno:
            last_rows -= 1
        if not lines.ended and (last_rows < len(st.rows) or cut_row):
            # output cut mid-line: the last number may be cut short too ("10251.5" -> "102")
            st.drop_rows_from(last_rows)
            st.pending = None
            st.warn(f"line {lineno}: last line has no line end; its result row was dropped")
        if st.first_line is not None:
            st.last_line = lineno
        runs = [r for r in self.runs if r.first_line is not None] or [self.runs[0]]
        out: list[ParsedNcclTests] = []
        for run in runs:
            flush_pending(run)
            parts = split_by_ratio(run) if self.split else [run]
            for part in parts:
                check_blank_redops(part, binary_name, file_name)
                keep_consensus(part)
                layout = part.layout
                columns = layout.head if layout is not None and layout.from_header else None
                settle_collective(part, binary_name, file_name, columns)
                out.append(finish_run(part))
        return out

    def _new_run(self, lineno: int) -> None:
        if self.st.first_line is None:
            return  # nothing seen yet: this line starts the current run
        flush_pending(self.st)
        self.st.last_line = lineno - 1
        self.runs.append(RunState())

    def _line(self, lineno: int, line: str, origin: str | None) -> None:
        if len(line) > MAX_LINE:
            self.st.warn(f"line {lineno}: overlong line ({len(line)} chars) skipped")
            return
        glued = _LOG_START_RE.search(line) if "[" in line else None
        if glued is None and ": Test " in line:
            glued = _GLUED_TEST_RE.search(line)
        if glued is not None and glued.start() > 0:
            # A library log line or nccl-tests' own error message glued to half a result row
            # (the same stdout): keep the row part.
            line = line[: glued.start()]
        stripped = line.lstrip()
        if not stripped:
            if self.st.first_line is None:
                return
            self.st.last_line = lineno
            return
        kind = _line_kind(stripped)
        if kind == "other" and stripped[0].isdigit() and _size_only(self.st.layout):
            kind = "row"  # a row of a table cut to `size time algbw busbw #wrong`
        if self.split:
            self._maybe_split(lineno, stripped, kind, origin)
        st = self._touch(lineno)
        if st.pending is not None and kind != "other":
            short_row(st)
        if kind in ("comment", "header"):
            if origin is not None and st.origin is None:
                st.origin = origin
            parse_comment(st, lineno, stripped)
        elif kind == "row":
            if origin is not None and st.origin is None:
                st.origin = origin
            parse_row(st, lineno, stripped.split())
        else:
            parse_other(st, lineno, stripped, self.carry if st.ended else None)

    def _touch(self, lineno: int) -> RunState:
        """The current run, which now holds line `lineno`."""
        st = self.st
        if st.first_line is None:
            st.first_line = lineno
            for source, name in self.carry:
                st.named.setdefault(source, name)
            self.carry = []
        st.last_line = lineno
        return st

    def _maybe_split(self, lineno: int, stripped: str, kind: str, origin: str | None) -> None:
        st = self.st
        other = origin is not None and st.origin is not None and origin != st.origin
        if other and st.rows and kind in ("header", "row", "comment"):
            # another rank's, host's or (grep) file's lines: another run
            previous = st.origin
            self._new_run(lineno)
            self.st.warn(
                f"line {lineno}: a new run, its lines prefixed {origin!r} where the run "
                f"before had {previous!r} (a launcher's rank or host, or grep's file name)"
            )
            return
        if kind == "header" and RUN_START_RE.match(stripped):
            if st.header_done or st.rows or st.ended or other:
                self._new_run(lineno)
        elif kind == "row":
            if st.ended:
                self._new_run(lineno)  # rows after a footer (a grep or cat of several runs)
        elif kind == "comment":
            if st.rows and DEVICE_RE.match(stripped):
                self._new_run(lineno)  # a new device list after rows
            elif (st.rows or st.ended) and is_column_line(stripped):
                self._new_run(lineno)  # another table's column names: the next run's
        elif st.rows and (
            (stripped[:4] == "==> " and stripped.endswith(" <=="))
            or ("_perf" in stripped and COMMAND_RE.search(stripped) is not None)
        ):
            # `tail`'s next file, or a command line that runs a test after rows: the context
            # of the next run
            self._new_run(lineno)


def _size_only(layout: Layout | None) -> bool:
    """Whether the run's table names no count and no type (`columns.SIZE_ONLY`)."""
    return layout is not None and layout.head == SIZE_ONLY


def _line_kind(stripped: str) -> str:
    """`header` (a line that opens a run), `comment` (any other `#` line), `row`, `other`."""
    if stripped[0] == "#":
        return "header" if RUN_START_RE.match(stripped) else "comment"
    if stripped[0].isdigit():
        tokens = stripped.split(None, 3)
        if looks_like_row(tokens):
            return "row"
    return "other"
