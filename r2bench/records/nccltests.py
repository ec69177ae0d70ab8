"""Pure parsers of nccl-tests output: the text printed on stdout and the `-J` JSON file.

Public API:

- `parse_text(source, binary_name=None)`: text output (str, bytes or an iterable of lines,
  e.g. an open file) -> `ParsedNcclTests`. Streams line by line in linear time.
- `parse_json(data)`: `-J` JSON (str or bytes) -> `ParsedNcclTests`; salvages the results of a
  JSON file cut short by a crash.
- `combine(text, json)`: text result completed with what only the JSON has (per-iteration times).
- `collective_from_binary(name)`: `".../all_reduce_perf"` -> `"all_reduce"`.
- `split_runs(source)`: the runs of a text output holding several (a shell loop's output),
  split at each new nccl-tests header; `parse_text_runs` parses each.

None of them raise on bad input: whatever was understood is returned, and what was not is
listed in `ParsedNcclTests.warnings`.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from r2bench.records.logprefix import clean_lines
from r2bench.records.models import (
    CollectiveSource,
    Device,
    ParsedNcclTests,
    PerIteration,
    Placement,
    ResultRow,
)

MAX_LINE = 8192  # longer lines are not nccl-tests lines (binary garbage, runaway logs)
MAX_WARNINGS = 50
PLACEMENTS: tuple[Placement, Placement] = ("out_of_place", "in_place")

_VERSION_RE = re.compile(
    r"([nr])ccl-tests version (\S+)(?: [nr]ccl-headers=(\d+))?(?: [nr]ccl-library=(\d+))?"
)
_RCCL_TESTS_RE = re.compile(r"^rccl-tests: Version\s*(\S*)")
_LIBRARY_RE = re.compile(r"^(?P<lib>NCCL|RCCL) version\s*:?\s*(?P<version>\S+)")
_LOG_START_RE = re.compile(r"[A-Za-z][\w.-]*:\d+:\d+ \[\d+\] ")
"""The start of an NCCL log line (`host:pid:tid [rank] `), wherever it is in a line."""
_GLUED_TEST_RE = re.compile(r"(?<=\d)[A-Za-z_][\w.-]*: Test ")
"""nccl-tests' `host: Test timeout` message right after a row's last printed number."""
_DEVICE_RE = re.compile(
    r"^#\s*Rank\s+(\d+)\s+(?:Group\s+(\d+)\s+)?(?:Pid\s+(\d+)\s+)?on\s+(\S+)\s+device\s+(\d+)"
    r"\s+\[([^\]]*)\]\s*(.*)$"
)
_ARG_RES = {
    "n_threads": re.compile(r"nThread (\d+)"),
    "n_gpus": re.compile(r"nGpus (\d+)"),
    "warmup_iters": re.compile(r"warmup iters: (\d+)"),
    "iters": re.compile(r"(?<!warmup )(?<!agg )iters: (\d+)"),
    "validation": re.compile(r"validation: (\d+)"),
}
_OOB_RE = re.compile(r"^#\s*Out of bounds values\s*:\s*(\d+)\s*(OK|FAILED)?")
_AVG_RE = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(\S+)")
_STARTING_RE = re.compile(r"^#\s*Collective test starting:\s*(\S+)")
_CONCLUDED_RE = re.compile(r"^#\s*Collective test concluded:?\s*(\S*)")
# Lines that open a run's header, in the order nccl-tests prints them (all optional but nThread).
_RUN_START_RE = re.compile(
    r"^#\s*(?:Writing JSON output to|[nr]ccl-tests version|Collective test starting|nThread \d)"
)
_NTHREAD_RE = re.compile(r"^#\s*nThread \d")
# A line that runs a test: a shell, mpirun or srun command naming `<test>_perf`.
_COMMAND_RE = re.compile(r"(?:^|[\s/=>$#])(?P<test>[a-z_]+)_perf(?:_mpi)?(?=\s|$)(?!\.)")
# Failure lines naming the test's source file: `Test failure all_reduce.cu:90`,
# `NCCL failure all_reduce.cu:95 'unhandled cuda error'` (old releases).
_FAILURE_FILE_RE = re.compile(r"(?:NCCL|CUDA)? ?failure (?P<test>[a-z_]+)\.cu:\d+")
_TYPE_BYTES = {
    "int8": 1, "char": 1, "uint8": 1, "int32": 4, "int": 4, "uint32": 4, "int64": 8,
    "uint64": 8, "half": 2, "float16": 2, "float": 4, "float32": 4, "double": 8,
    "float64": 8, "bfloat16": 2, "f8e4m3": 1, "f8e5m2": 1,
}  # fmt: skip
_DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_TIME_RE = re.compile(r"^\d{2}:\d{2}:\d{2}$")
_INT_RE = re.compile(r"^[-+]?\d+$")
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_ITER_COLUMNS = ("iter_min_us", "iter_max_us", "iter_p99_us", "iter_cv_pct")
# Column names of every nccl-tests / rccl-tests generation -> one name each.
_COLUMN_NAMES = {
    "size": "size", "bytes": "size", "count": "count", "n": "count", "type": "type",
    "redop": "redop", "op": "redop", "root": "root", "time": "time", "algbw": "algbw",
    "busbw": "busbw", "#wrong": "wrong", "wrong": "wrong", "error": "error", "res": "error",
    "i_min": "iter_min_us", "i_max": "iter_max_us", "i_p99": "iter_p99_us",
    "i_cv%": "iter_cv_pct", "i_cv": "iter_cv_pct",
}  # fmt: skip
_HEAD_COLUMNS = ("size", "count", "type", "redop", "root")
_MEASURES = ("time", "algbw", "busbw")
_REDOPS = frozenset({"sum", "prod", "min", "max", "avg", "mulsum", "premulsum", "none"})


# nccl-tests' tests (BIN_FILES_LIST of its src/Makefile, 2.13 to 2.19), longest first: at one
# place in a name the search then takes `all_reduce` before the `reduce` inside it.
NCCL_TESTS_COLLECTIVES = (
    "all_reduce", "all_gather", "broadcast", "reduce_scatter", "reduce", "alltoall",
    "alltoallv", "scatter", "gather", "sendrecv", "hypercube",
)  # fmt: skip
_BINARY_RE = re.compile(
    "(" + "|".join(sorted(NCCL_TESTS_COLLECTIVES, key=len, reverse=True)) + ")_perf"
)
_TEST_NAME_RE = re.compile(
    r"(?:^|[_\W])(" + "|".join(sorted(NCCL_TESTS_COLLECTIVES, key=len, reverse=True)) + r")$"
)


def collective_from_binary(name: str | None) -> str | None:
    """The collective of an nccl-tests binary, wherever its `<test>_perf` stands in the name:
    `/x/build/all_reduce_perf_mpi`, `v213-all_reduce_perf` -> `all_reduce`; a name with no
    nccl-tests test in it names none."""
    if not name:
        return None
    found = _BINARY_RE.search(_base_name(name))
    return found.group(1) if found else None


def _base_name(path: str) -> str:
    """The last part of a path, `/` or `\\` separated."""
    return path.replace("\\", "/").rsplit("/", 1)[-1]


def _to_int(tok: str) -> int | None:
    """int of a token; floats like `0e+00` or `4.1943e+06` (#wrong printed with %g) are
    accepted when integral."""
    if _INT_RE.match(tok):
        return int(tok)
    val = _to_float(tok)
    if val is None or val != val or val in (float("inf"), float("-inf")):
        return None
    return int(val) if val.is_integer() else None


def _to_float(tok: str) -> float | None:
    try:
        return float(tok)
    except ValueError:
        return None


def _is_number(tok: str) -> bool:
    return tok == "N/A" or _to_float(tok) is not None


@dataclass(frozen=True)
class _Layout:
    """The columns of a result row: the row's own (size, count, type, [redop], [root]) and,
    twice (out-of-place, in-place), the placement's (time, algbw, busbw, #wrong or error,
    [per-iteration columns]). Learned from the column-name line of the table, or from the shape
    of the first full row when a paste has no such line."""

    head: tuple[str, ...] = _HEAD_COLUMNS
    group: tuple[str, ...] = ("time", "algbw", "busbw", "wrong")
    from_header: bool = False

    @property
    def width(self) -> int:
        return len(self.head) + 2 * len(self.group)


_DEFAULT_LAYOUT = _Layout()


def layout_from_header(names: list[str]) -> _Layout | None:
    """The layout a column-name line declares (`size count type redop root time algbw busbw
    #wrong time ...`); None when the line is not a complete one."""
    # `timestamp` (-S) and unknown extras are left out
    canon = [c for c in (_COLUMN_NAMES.get(n.lower()) for n in names) if c is not None]
    if "time" not in canon:
        return None
    first = canon.index("time")
    head = tuple(canon[:first])
    rest = canon[first:]
    second = rest.index("time", 1) if "time" in rest[1:] else len(rest)
    group = tuple(rest[:second])
    if head[:3] != ("size", "count", "type") or not {"algbw", "busbw"} <= set(group):
        return None
    return _Layout(head=head, group=group, from_header=True)


def layout_from_row(tokens: list[str]) -> _Layout | None:
    """The layout of a full row when no column-name line was seen: (size, count, type), a
    redop when the next token is a name, a root when the count of the rest says so."""
    if len(tokens) < 4 or not (_INT_RE.match(tokens[0]) and _INT_RE.match(tokens[1])):
        return None
    redop = _NAME_RE.match(tokens[3]) is not None and tokens[3] != "N/A"
    rest = len(tokens) - (4 if redop else 3)
    if _timestamp(tokens[-2:]) is not None:
        rest -= 2
    head: tuple[str, ...]
    if rest in (8, 16):
        head = ("size", "count", "type", "redop") if redop else ("size", "count", "type")
    elif redop and rest - 1 in (8, 16) and _INT_RE.match(tokens[4]):
        head = _HEAD_COLUMNS
        rest -= 1
    else:
        return None
    group = ("time", "algbw", "busbw", "wrong") + (_ITER_COLUMNS if rest == 16 else ())
    return _Layout(head=head, group=group)


@dataclass
class _State:
    """Mutable accumulator of one run; frozen into a ParsedNcclTests at the end."""

    fields: dict[str, Any] = field(default_factory=dict)
    devices: list[Device] = field(default_factory=list)
    rows: list[ResultRow] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    dropped_warnings: int = 0
    layout: _Layout | None = None
    in_table: bool = False  # the column header line was seen
    pending: tuple[int, list[str]] | None = None  # (line number, a row printed in pieces)
    last_size: dict[tuple[str, str, int], int] = field(default_factory=dict)
    cycle: dict[tuple[str, str, int], int] = field(default_factory=dict)
    named: dict[str, str] = field(default_factory=dict)  # source -> collective it names
    origin: str | None = None  # the rank/host prefix the header lines carried
    bus_ratio: tuple[float, float] | None = None  # busbw/algbw of the rows read so far
    first_line: int | None = None
    last_line: int | None = None

    def warn(self, msg: str) -> None:
        if len(self.warnings) < MAX_WARNINGS:
            self.warnings.append(msg[:300])
        else:
            self.dropped_warnings += 1

    @property
    def header_done(self) -> bool:
        return bool(self.fields.get("header"))

    @property
    def ended(self) -> bool:
        """The footer or the concluding line was seen: more rows belong to another run."""
        return bool(self.fields.get("footer") or self.fields.get("concluded"))


def _raw_lines(source: str | bytes | Iterable[str] | Iterable[bytes]) -> Iterator[str]:
    if isinstance(source, bytes):
        source = source.decode("utf-8", errors="replace")
    if isinstance(source, str):
        source = io.StringIO(source)
    for raw in source:
        yield raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw


def iter_lines(source: str | bytes | Iterable[str] | Iterable[bytes]) -> Iterator[str]:
    """Lines of a text source without their line ends; bytes are decoded leniently (UTF-8)."""
    for raw in _raw_lines(source):
        yield raw.rstrip("\r\n")


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
    runs = _Parser(split=False, first_line=first_line).parse(source)
    return _settled(runs[0], binary_name, file_name)


def iter_runs(
    source: str | bytes | Iterable[str] | Iterable[bytes], *, file_name: str | None = None
) -> list[ParsedNcclTests]:
    """Every run of a text output, in one streaming pass (see `split_runs` for where runs are
    cut); each knows its `first_line` and `last_line`."""
    return [_settled(st, None, file_name) for st in _Parser(split=True).parse(source)]


def _settled(st: _State, binary_name: str | None, file_name: str | None) -> ParsedNcclTests:
    _flush_pending(st)
    _settle_collective(st, binary_name, file_name)
    return _finish(st)


# What names the collective, most direct first.
_NAMING_ORDER: tuple[CollectiveSource, ...] = ("program_line", "command_line", "failure_line")


def _settle_collective(st: _State, binary_name: str | None, file_name: str | None) -> None:
    if st.fields.get("collective"):
        return
    candidates = collectives_from_columns(st.rows, len({d.rank for d in st.devices}))
    named: list[tuple[CollectiveSource, str | None]] = [
        (src, st.named.get(src)) for src in _NAMING_ORDER
    ]
    if binary_name:
        named.append(("run_spec", collective_from_binary(binary_name)))
    named.append(("file_name", collective_from_file_name(file_name)))
    for source, name in named:
        if name and (not candidates or name in candidates):
            st.fields.update(collective=name, collective_from=source)
            return
    if len(candidates) == 1:
        st.fields.update(collective=candidates[0], collective_from="columns")
    elif candidates:
        st.warn(f"collective not named; its columns fit {' or '.join(candidates)}")


def collective_from_file_name(name: str | None) -> str | None:
    """`logs/v2-all_reduce_perf.socket.c1.txt` -> `all_reduce`: the binary's name in the file's
    name, before its first dot; else a test's name closing that part (`old_all_reduce.txt`)."""
    if not name:
        return None
    stem = _base_name(name).split(".")[0]
    found = collective_from_binary(stem)
    if found:
        return found
    m = _TEST_NAME_RE.search(stem)
    return m.group(1) if m else None


def collectives_from_columns(rows: list[ResultRow], ranks: int) -> tuple[str, ...]:
    """The collectives whose nccl-tests rows look like these: redop (none or an operation),
    root (-1 or a rank), size / (count x type size) (1, or the number of ranks) and busbw /
    algbw (2(n-1)/n > 1 only for all_reduce; 1 for the rooted ones and sendrecv)."""
    if not rows:
        return ()
    row = rows[-1]
    width = _TYPE_BYTES.get(row.type)
    ratio = row.size_bytes / (row.count * width) if width and row.count else None
    reduces, rooted = row.redop not in ("none", ""), row.root >= 0
    if not row.redop:  # old tables without a redop column: only all_gather lacked one
        return ()
    per_rank = ratio is not None and ranks > 1 and abs(ratio - ranks) < 1e-9
    bus = _bus_ratio(rows)
    if rooted:
        return ("reduce",) if reduces else () if per_rank else ("broadcast",)
    if reduces:
        if per_rank:
            return ("reduce_scatter",)
        if bus is not None and bus > 1.05:
            return ("all_reduce",)
        if bus is not None and ranks > 2:
            return ("sendrecv",)
        return ("all_reduce", "sendrecv")  # at 2 ranks both have busbw = algbw
    return ("all_gather", "alltoall") if per_rank else ()


def _bus_ratio(rows: list[ResultRow]) -> float | None:
    """busbw / algbw of the row with the largest algbw (the most digits), when it is large
    enough to tell 1 from 2(n-1)/n."""
    best = max(
        (r for r in rows if r.algbw_gbps and r.busbw_gbps is not None),
        key=lambda r: r.algbw_gbps or 0.0,
        default=None,
    )
    if best is None or best.algbw_gbps is None or best.busbw_gbps is None:
        return None
    if best.algbw_gbps < 0.2:
        return None
    return best.busbw_gbps / best.algbw_gbps


def split_runs(source: str | bytes | Iterable[str] | Iterable[bytes]) -> list[tuple[int, str]]:
    """Cut a text output into runs (first line number, text): at each new nccl-tests header,
    at rows after a run's footer (a grep or `cat` of several outputs), at a new device list
    after rows, and at a change of the rank or host a launcher prefix names. Text before the
    first header stays with the first run. Holds the text in memory: for files of any size,
    use `iter_runs` (line ranges) instead."""
    lines = list(_raw_lines(source))
    out = []
    for run in iter_runs(lines):
        first, last = run.first_line or 1, run.last_line or len(lines)
        out.append((first, "".join(lines[first - 1 : last])))
    return out or [(1, "")]


def parse_text_runs(
    source: str | bytes | Iterable[str] | Iterable[bytes], *, file_name: str | None = None
) -> list[tuple[int, str, ParsedNcclTests]]:
    """Each run of a text output: (first line number, its text, what it says)."""
    lines = list(_raw_lines(source))
    out = []
    for run in iter_runs(lines, file_name=file_name):
        first, last = run.first_line or 1, run.last_line or len(lines)
        out.append((first, "".join(lines[first - 1 : last]), run))
    return out


def _finish(st: _State) -> ParsedNcclTests:
    if st.dropped_warnings:
        st.warnings.append(f"... {st.dropped_warnings} more warnings not shown")
    ranks = len({d.rank for d in st.devices}) or None
    return ParsedNcclTests(
        devices=st.devices,
        rows=st.rows,
        warnings=st.warnings,
        ranks=ranks,
        first_line=st.first_line,
        last_line=st.last_line,
        **st.fields,
    )


class _Parser:
    """One streaming pass over a text output; with `split`, a new `_State` per run."""

    def __init__(self, *, split: bool, first_line: int = 1) -> None:
        self.split = split
        self.first_line = first_line
        self.runs: list[_State] = [_State()]
        self.carry: list[tuple[str, str]] = []  # (source, collective) seen after a run ended

    @property
    def st(self) -> _State:
        return self.runs[-1]

    def parse(self, source: str | bytes | Iterable[str] | Iterable[bytes]) -> list[_State]:
        lineno, raw, rows_before = self.first_line - 1, "\n", 0
        try:
            cleaned = clean_lines(_raw_lines(source))
            for lineno, clean in enumerate(cleaned, start=self.first_line):
                raw, rows_before = clean.text, len(self.st.rows)
                self._line(lineno, raw.rstrip("\r\n"), clean.origin)
        except Exception as exc:  # a broken reader must not lose what was parsed so far
            self.st.warn(f"input read failed: {exc!r}")
        st = self.st
        cut_row = st.pending is not None and st.pending[0] == lineno
        if not raw.endswith(("\n", "\r")) and (len(st.rows) > rows_before or cut_row):
            # output cut mid-line: the last number may be cut short too ("10251.5" -> "102")
            del st.rows[rows_before:]
            st.pending = None
            st.warn(f"line {lineno}: last line has no line end; its result row was dropped")
        for run in self.runs:
            if run.last_line is None or run is st:
                run.last_line = lineno if run is st else run.last_line
        return [r for r in self.runs if r.first_line is not None] or [self.runs[0]]

    def _new_run(self, lineno: int) -> None:
        if self.st.first_line is None:
            return  # nothing seen yet: this line starts the current run
        _flush_pending(self.st)
        self.st.last_line = lineno - 1
        self.runs.append(_State())

    def _line(self, lineno: int, line: str, origin: str | None) -> None:
        if (" NCCL INFO " in line or " NCCL WARN " in line) and not line.lstrip()[:1].isdigit():
            self._touch(lineno)  # a library log line (most of an INFO log): events.py reads it
            return
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
        if self.split:
            self._maybe_split(lineno, stripped, kind, origin)
        st = self._touch(lineno)
        if st.pending is not None and kind != "other":
            _short_row(st)
        if kind in ("comment", "header"):
            if origin is not None and st.origin is None and kind == "header":
                st.origin = origin
            _parse_comment(st, lineno, stripped)
        elif kind == "row":
            _parse_row(st, lineno, stripped.split())
        else:
            _parse_other(st, lineno, stripped, self.carry if st.ended else None)

    def _touch(self, lineno: int) -> _State:
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
        if kind == "header" and _RUN_START_RE.match(stripped):
            starts = st.header_done or st.rows or st.ended
            other = origin is not None and st.origin is not None and origin != st.origin
            if starts or other:
                self._new_run(lineno)
        elif (kind == "row" and st.ended) or (
            kind == "comment" and st.rows and _DEVICE_RE.match(stripped)
        ):
            self._new_run(lineno)  # rows after a footer, or a new device list after rows


def _line_kind(stripped: str) -> str:
    """`header` (a line that opens a run), `comment` (any other `#` line), `row`, `other`."""
    if stripped[0] == "#":
        return "header" if _RUN_START_RE.match(stripped) else "comment"
    if stripped[0].isdigit():
        tokens = stripped.split(None, 3)
        if _looks_like_row(tokens):
            return "row"
    return "other"


def _looks_like_row(tokens: list[str]) -> bool:
    return (
        len(tokens) >= 3
        and _INT_RE.match(tokens[0]) is not None
        and _INT_RE.match(tokens[1]) is not None
        and not _is_number(tokens[2])
        and _NAME_RE.match(tokens[2]) is not None
    )


def _parse_other(st: _State, lineno: int, line: str, carry: list[tuple[str, str]] | None) -> None:
    """Lines that are not nccl-tests' own: numbers of a row printed in pieces, the library's
    version line, a command line or failure line naming the test. `carry` collects what a
    line after a run's footer names (it belongs to the next run)."""
    tokens = line.split()
    if st.pending is not None and _looks_like_continuation(tokens):
        _continue_row(st, lineno, tokens)
        return
    if (m := _LIBRARY_RE.match(line)) is not None:
        family = "rccl" if m.group("lib") == "RCCL" else st.fields.get("library_family") or "nccl"
        st.fields.update(library_family=family, library_version=m.group("version"))
        return
    if (m := _RCCL_TESTS_RE.match(line)) is not None:
        st.fields["library_family"] = "rccl"
        if m.group(1) and m.group(1) != ":+":
            st.fields.setdefault("nccl_tests_version", m.group(1))
        return
    if "_perf" in line and (m := _COMMAND_RE.search(line)) is not None:
        name = collective_from_binary(m.group("test") + "_perf")
        if name:
            target = carry if carry is not None else None
            if target is not None:
                target.append(("command_line", name))
            else:
                st.named["command_line"] = name
        return
    if "failure" in line and (m := _FAILURE_FILE_RE.search(line)) is not None:
        name = m.group("test")
        if name in NCCL_TESTS_COLLECTIVES:
            st.named.setdefault("failure_line", name)
        return
    if st.in_table and tokens and _INT_RE.match(tokens[0]):
        if len(tokens) < 4:
            st.warn(f"line {lineno}: result row cut short (no measurements)")
        else:  # a row's start with a column missing or doubled before its type
            _unreadable(st, lineno, "size, count and type are not where the header has them")
    # anything else (NCCL logs, mpirun text, garbage) is not ours: events.py reads it


def _looks_like_continuation(tokens: list[str]) -> bool:
    return len(tokens) >= 4 and all(_is_number(t) for t in tokens[:4])


def _continue_row(st: _State, lineno: int, tokens: list[str]) -> None:
    """A row printed in pieces (a library logging to stdout between nccl-tests' printfs):
    gather pieces until both placements are there; the row ends on its last piece."""
    assert st.pending is not None
    _, ptoks = st.pending
    st.pending = None
    combined = ptoks + tokens
    layout = st.layout or _DEFAULT_LAYOUT
    if len(combined) < layout.width and _timestamp(combined[-2:]) is None:
        st.pending = (lineno, combined)
    else:
        _parse_row(st, lineno, combined)


def _short_row(st: _State) -> None:
    """A row with fewer columns than its table, and the table goes on (another row, the
    footer): nccl-tests prints every row whole, so a column is missing somewhere in it (a
    blank column, a paste that lost one) and which one cannot be told: not read."""
    assert st.pending is not None
    line, tokens = st.pending
    st.pending = None
    width = (st.layout or _DEFAULT_LAYOUT).width
    _unreadable(st, line, f"{len(tokens)} columns where the header has {width}, and more follow")


def _flush_pending(st: _State) -> None:
    """A pending row ends: keep whatever placements it got (a row missing its second piece is
    still a measurement of the first), or say it was cut short."""
    if st.pending is None:
        return
    line, tokens = st.pending
    st.pending = None
    _parse_row(st, line, tokens, final=True)


def _parse_comment(st: _State, lineno: int, line: str) -> None:
    if "ccl-tests version" in line:
        m = _VERSION_RE.search(line)
        if m:
            st.fields["nccl_tests_version"] = m.group(2)
            st.fields["nccl_headers"] = int(m.group(3)) if m.group(3) else None
            st.fields["nccl_library"] = int(m.group(4)) if m.group(4) else None
            if m.group(1) == "r":
                st.fields["library_family"] = "rccl"
    elif _NTHREAD_RE.match(line):
        st.fields["header"] = True
        _parse_args_line(st, line)
    elif (m := _DEVICE_RE.match(line)) is not None:
        st.devices.append(_device(m))
    elif (m := _STARTING_RE.match(line)) is not None:
        _name_collective(st, collective_from_binary(m.group(1)), "program_line")
    elif (m := _OOB_RE.match(line)) is not None:
        st.fields["oob_values"] = int(m.group(1))
        st.fields["oob_failed"] = m.group(2) == "FAILED" or int(m.group(1)) > 0
    elif (m := _AVG_RE.match(line)) is not None:
        st.fields["avg_busbw_gbps"] = _measure(st, lineno, "avg busbw", m.group(1))
        st.fields["footer"] = True
    elif (m := _CONCLUDED_RE.match(line)) is not None:
        st.fields["concluded"] = True
        if not st.fields.get("collective"):
            _name_collective(st, collective_from_binary(m.group(1)), "program_line")
    elif ("size" in line or "bytes" in line) and ("time" in line or "redop" in line):
        layout = layout_from_header(line.lstrip("#").split())
        if layout is not None:
            st.layout = layout
            st.fields["error_column"] = "error" in layout.group
            st.in_table = True


def _name_collective(st: _State, collective: str | None, source: CollectiveSource) -> None:
    """Record the collective and how it was known; a source that names none changes nothing
    (the columns or the file name may still tell)."""
    if collective:
        st.fields.update(collective=collective, collective_from=source)


def _parse_args_line(st: _State, line: str) -> None:
    for key, rx in _ARG_RES.items():
        m = rx.search(line)
        if m:
            st.fields[key] = bool(int(m.group(1))) if key == "validation" else int(m.group(1))


def _device(m: re.Match[str]) -> Device:
    return Device(
        rank=int(m.group(1)),
        group=int(m.group(2)) if m.group(2) is not None else None,
        pid=int(m.group(3)) if m.group(3) is not None else None,
        host=m.group(4),
        device=int(m.group(5)),
        bus_id=m.group(6) or None,
        name=m.group(7).strip() or None,
    )


def _measure(st: _State, lineno: int, what: str, tok: str) -> float | None:
    """A bandwidth or time as printed; NaN, infinite or negative values are flagged, not
    taken (nccl-tests prints none of them for a real measurement)."""
    val = _to_float(tok)
    if val is None:
        return None
    if val != val or val in (float("inf"), float("-inf")) or val < 0:
        st.warn(f"line {lineno}: {what} {tok!r} is not a measurement (NaN, infinite or negative)")
        return None
    return val


def _fits_head(layout: _Layout, tokens: list[str]) -> str | None:
    """Why the row's own columns do not fit their types, or None when they do."""
    for name, tok in zip(layout.head, tokens, strict=False):
        if name in ("size", "count") and not (_INT_RE.match(tok) and not tok.startswith("-")):
            return f"{name} {tok!r} is not a count"
        if name in ("type", "redop") and (_NAME_RE.match(tok) is None or tok == "N/A"):
            return f"{name} {tok!r} is not a name"
        if name == "root" and (_INT_RE.match(tok) is None or int(tok) < -1):
            return f"root {tok!r} is not a rank or -1"
    if len(tokens) > 2 and tokens[2] in _REDOPS:
        return f"type {tokens[2]!r} is a reduction: a column is missing"
    return None


def _parse_row(st: _State, lineno: int, tokens: list[str], *, final: bool = False) -> None:
    if st.layout is None:
        st.layout = layout_from_row(tokens)
        if st.layout is None:
            if not final and len(tokens) >= 3:
                # the row's start; its numbers may follow on a later line (see _continue_row)
                st.pending = (lineno, tokens)
            else:
                _unreadable(st, lineno, "no column header and the row's shape fits no release")
            return
    layout = st.layout
    head_n = len(layout.head)
    if len(tokens) < head_n:
        st.warn(f"line {lineno}: result row cut short (no measurements)")
        return
    why = _fits_head(layout, tokens[:head_n])
    if why is not None:
        _unreadable(st, lineno, why)
        return
    timestamp = _timestamp(tokens[-2:]) if len(tokens) >= head_n + 2 else None
    rest = tokens[head_n : len(tokens) - 2] if timestamp is not None else tokens[head_n:]
    final = final or timestamp is not None  # `-S` prints the stamp where the row ends
    if len(rest) > 2 * len(layout.group):
        _unreadable(st, lineno, f"{len(tokens)} columns where the header has {layout.width}")
        return
    if len(rest) < 2 * len(layout.group) and not final:
        st.pending = (lineno, tokens)  # the rest may follow (pieces), or the output ends here
        return
    if not rest:
        st.warn(f"line {lineno}: result row cut short (no measurements)")
        return
    _add_row(st, lineno, tokens[:head_n], rest, timestamp)


def _unreadable(st: _State, lineno: int, why: str) -> None:
    st.fields["unreadable_rows"] = st.fields.get("unreadable_rows", 0) + 1
    st.warn(f"line {lineno}: result row not read: {why}")


def _add_row(
    st: _State, lineno: int, head: list[str], rest: list[str], timestamp: datetime | None
) -> None:
    layout = st.layout or _DEFAULT_LAYOUT
    named = dict(zip(layout.head, head, strict=True))
    size, count = int(named["size"]), int(named["count"])
    why = _partial_group_differs(layout, size, rest)
    if why is not None:
        _unreadable(st, lineno, why)
        return
    root = int(named.get("root", "-1"))
    redop = named.get("redop", "")
    key = (named["type"], redop, root)
    if size <= st.last_size.get(key, -1):
        st.cycle[key] = st.cycle.get(key, 0) + 1
    st.last_size[key] = size
    base = {
        "size_bytes": size,
        "count": count,
        "type": named["type"],
        "redop": redop,
        "root": root,
        "cycle": st.cycle.get(key, 0),
        "line": lineno,
        "timestamp": timestamp,
    }
    width = len(layout.group)
    added = 0
    for index, placement in enumerate(PLACEMENTS):
        group = rest[index * width : (index + 1) * width]
        if not group:
            st.warn(f"line {lineno}: {placement} columns missing (the output ends here)")
            break
        row = _placement_row(st, lineno, layout.group, group, base, placement)
        if row is None:
            st.warn(f"line {lineno}: {placement} columns missing or malformed")
            break
        st.rows.append(row)
        added += 1
    if not added:
        _unreadable(st, lineno, "no placement's columns fit")


def _partial_group_differs(layout: _Layout, size: int, rest: list[str]) -> str | None:
    """A row cut short ends inside a placement: the part there is must still read as that
    placement's first columns (time, then algbw = size/time). When it does not, a column
    went missing earlier in the row and every value after it sits one place off."""
    width = len(layout.group)
    part = rest[(len(rest) // width) * width :]
    if len(part) < 2 or "root" not in layout.head or layout.group[:2] != ("time", "algbw"):
        return None
    time, algbw = _to_float(part[0]), _to_float(part[1])
    if time is None or algbw is None or time <= 0:
        return "the columns after the last full placement are not a time and an algbw"
    values = {"time_us": time, "algbw_gbps": algbw}
    why = _inconsistent(size, part[0], values, exact=True, ranks=0)
    return f"a column is missing before the cut ({why})" if why else None


def _placement_row(
    st: _State,
    lineno: int,
    names: tuple[str, ...],
    group: list[str],
    base: dict[str, Any],
    placement: Placement,
) -> ResultRow | None:
    if len(group) < len(names) or not all(_is_number(t) for t in group):
        return None
    measured = [tok for name, tok in zip(names, group, strict=True) if name in _MEASURES]
    if "N/A" in measured and set(measured) != {"N/A"}:
        # nccl-tests prints N/A for all of a placement it did not run, or for #wrong alone
        st.warn(f"line {lineno}: {placement} has N/A beside numbers in {'/'.join(_MEASURES)}")
        return None
    if any("e" in tok.lower() and tok != "N/A" for tok in measured):
        # times and bandwidths print in fixed point; `0e+00` is an error or #wrong column
        st.warn(f"line {lineno}: {placement} has an exponent in {'/'.join(_MEASURES)}")
        return None
    values: dict[str, Any] = dict(base)
    for name, tok in zip(names, group, strict=True):
        if name == "wrong":
            # a count prints as `0`, `12` or, large, `4.1943e+06`; never as `144.00`
            fixed = "." in tok and "e" not in tok.lower()
            wrong = _to_int(tok) if tok != "N/A" and not fixed else None
            if tok != "N/A" and (wrong is None or wrong < 0):
                st.warn(f"line {lineno}: #wrong {tok!r} is not a count")
                return None
            values["wrong"] = wrong
        elif name == "error":
            continue  # a maximum error, not a count of wrong elements
        else:
            key = {"time": "time_us", "algbw": "algbw_gbps", "busbw": "busbw_gbps"}.get(name, name)
            values[key] = _measure(st, lineno, name, tok) if tok != "N/A" else None
            if tok != "N/A" and values[key] is None:
                return None
    exact = "root" in (st.layout or _DEFAULT_LAYOUT).head
    ranks = len({d.rank for d in st.devices})
    why = _inconsistent(
        base["size_bytes"], group[names.index("time")], values, exact=exact, ranks=ranks
    )
    if why is None:
        why = _bus_ratio_differs(st, group, names)
    if why is not None:
        st.warn(f"line {lineno}: {placement} columns do not fit each other ({why}): not read")
        return None
    return ResultRow(placement=placement, **values)


def _bus_ratio_differs(st: _State, group: list[str], names: tuple[str, ...]) -> str | None:
    """busbw / algbw is one factor for a whole run (set by collective and rank count): the
    range the printed digits allow must overlap the run's so far (which it then narrows)."""
    alg_tok, bus_tok = group[names.index("algbw")], group[names.index("busbw")]
    alg, bus = _to_float(alg_tok), _to_float(bus_tok)
    if alg is None or bus is None or alg < 0.05:
        return None  # too few digits to tell
    da, db = _half_ulp(alg_tok), _half_ulp(bus_tok)
    low, high = max(bus - db, 0.0) / (alg + da), (bus + db) / (alg - da)
    if st.bus_ratio is None:
        st.bus_ratio = (low, high)
        return None
    known_low, known_high = st.bus_ratio
    if high < known_low or low > known_high:
        return f"busbw/algbw {bus / alg:.3g} where the run's other rows have {known_low:.3g}"
    st.bus_ratio = (max(low, known_low), min(high, known_high))
    return None


def _half_ulp(tok: str) -> float:
    """Half the last printed digit of a number (`4366.46` -> 0.005, `10094` -> 0.5)."""
    decimals = len(tok.partition(".")[2]) if "." in tok and "e" not in tok.lower() else 0
    return 0.5 * 10.0**-decimals


def _inconsistent(
    size: int, time_tok: str, values: dict[str, Any], *, exact: bool, ranks: int
) -> str | None:
    """Why a placement's numbers cannot be one measurement, or None: nccl-tests prints
    algbw = size / time at most, and busbw = algbw x a factor of 2 at most, and of 1/2 at
    least from 2 ranks on (by collective and rank count). Tables with a root column (every release since 2.x added it) print algbw =
    size / time exactly; older all_gather printed it per rank, below. A column shifted into
    another's place breaks one of these."""
    time, algbw, busbw = values.get("time_us"), values.get("algbw_gbps"), values.get("busbw_gbps")
    if time is None or algbw is None:
        return None
    slack = _half_ulp(time_tok)
    if time == 0 and size > 0:
        return "no time for a non-empty message"
    if time - slack > 0:
        low, high = size / ((time + slack) * 1e3), size / ((time - slack) * 1e3)
        if algbw > high + 0.0051 + 1e-3 * high:
            return f"algbw {algbw:g} is more than size/time ({high:.3g})"
        if exact and algbw < low - 0.0051 - 1e-3 * low:
            return f"algbw {algbw:g} is less than size/time ({low:.3g})"
    if busbw is not None and busbw > 2 * algbw + 0.0151:
        return f"busbw {busbw:g} is more than twice algbw {algbw:g}"
    if busbw is not None and ranks >= 2 and algbw >= 0.05 and busbw < algbw / 2 - 0.0151:
        return f"busbw {busbw:g} is less than half algbw {algbw:g} at {ranks} ranks"
    return None


def _timestamp(tokens: list[str]) -> datetime | None:
    if len(tokens) >= 2 and _DATE_RE.match(tokens[0]) and _TIME_RE.match(tokens[1]):
        try:
            return datetime.strptime(f"{tokens[0]} {tokens[1]}", "%Y-%m-%d %H:%M:%S")
        except ValueError:
            return None
    return None


# --------------------------------------------------------------------------- JSON (-J)


def parse_json(data: str | bytes) -> ParsedNcclTests:
    """Parse a `-J` JSON file. A file cut short (killed run) yields the results it completed."""
    st = _State()
    if isinstance(data, bytes):
        data = data.decode("utf-8", errors="replace")
    try:
        doc = json.loads(data)
    except ValueError as exc:
        st.warn(f"JSON is incomplete or invalid ({exc}); salvaging complete results")
        doc = {"results": _salvage_results(data)}
        if re.search(r'^\s*\{\s*"(?:version|start_time|results)"\s*:', data):
            st.fields["header"] = True  # the start of an nccl-tests -J file, cut short
    if not isinstance(doc, dict):
        st.warn("JSON top level is not an object")
        return _finish(st)
    per_iter = _json_document(st, doc)
    parsed = _finish(st)
    return parsed.model_copy(update={"per_iteration": per_iter})


def _salvage_results(text: str) -> list[Any]:
    """Decode the complete objects of a truncated `"results":[...]` list."""
    start = text.find('"results"')
    start = text.find("[", start) if start >= 0 else -1
    if start < 0:
        return []
    decoder = json.JSONDecoder()
    out: list[Any] = []
    pos = start + 1
    while True:
        while pos < len(text) and text[pos] in " \t\r\n,":
            pos += 1
        try:
            obj, pos = decoder.raw_decode(text, pos)
        except ValueError:
            return out
        out.append(obj)


def _json_document(st: _State, doc: dict[str, Any]) -> list[PerIteration]:
    raw_cfg = doc.get("config")
    cfg: dict[str, Any] = raw_cfg if isinstance(raw_cfg, dict) else {}
    _json_header(st, doc, cfg)
    per_iter: list[PerIteration] = []
    results = doc.get("results")
    if not isinstance(results, list):
        return per_iter
    for i, res in enumerate(results):
        if not isinstance(res, dict):
            st.warn(f"results[{i}] is not an object")
            continue
        try:
            per_iter.extend(_json_result(st, res))
        except (TypeError, ValueError, KeyError) as exc:
            st.warn(f"results[{i}] malformed: {exc}")
    return per_iter


def _json_header(st: _State, doc: dict[str, Any], cfg: dict[str, Any]) -> None:
    args = doc.get("args")
    if isinstance(args, list) and args and isinstance(args[0], str):
        _name_collective(st, collective_from_binary(args[0]), "json_args")
        st.fields["header"] = True
    lib = doc.get("nccl_version")
    if isinstance(lib, int):
        st.fields["nccl_library"] = lib
    for src, dst in (
        ("nthreads", "n_threads"),
        ("ngpus", "n_gpus"),
        ("iterations", "iters"),
        ("warmup_iters", "warmup_iters"),
    ):
        if isinstance(cfg.get(src), int):
            st.fields[dst] = cfg[src]
    if isinstance(cfg.get("validation"), int):
        st.fields["validation"] = bool(cfg["validation"])
    for dev in cfg.get("devices") or []:
        if isinstance(dev, dict):
            _json_device(st, dev)
    oob = doc.get("out_of_bounds")
    if isinstance(oob, dict) and isinstance(oob.get("count"), int):
        st.fields["oob_values"] = oob["count"]
        st.fields["oob_failed"] = oob["count"] > 0 or str(oob.get("okay")) == "false"
    avg = doc.get("average_bus_bandwidth")
    if isinstance(avg, dict) and isinstance(avg.get("bandwidth"), (int, float)):
        st.fields["avg_busbw_gbps"] = float(avg["bandwidth"])
        st.fields["footer"] = True
    st.fields["concluded"] = "end_time" in doc
    version = doc.get("nccl_tests_version")
    if isinstance(version, str):
        st.fields["nccl_tests_version"] = version


def _json_device(st: _State, dev: dict[str, Any]) -> None:
    try:
        st.devices.append(
            Device(
                rank=dev["rank"],
                group=dev.get("group"),
                pid=dev.get("pid"),
                host=str(dev.get("hostname", "")),
                device=dev.get("device"),
                bus_id=dev.get("device_hex"),
                name=dev.get("device_info"),
            )
        )
    except (KeyError, ValueError) as exc:
        st.warn(f"device entry malformed: {exc}")


def _json_result(st: _State, res: dict[str, Any]) -> list[PerIteration]:
    size, root = int(res["size"]), int(str(res.get("root", -1)).strip())
    key = (str(res.get("type", "")), str(res.get("redop", "")), root)
    if size <= st.last_size.get(key, -1):
        st.cycle[key] = st.cycle.get(key, 0) + 1
    st.last_size[key] = size
    cycle = st.cycle.get(key, 0)
    out: list[PerIteration] = []
    for placement in PLACEMENTS:
        meas = res.get(placement)
        if isinstance(meas, dict):
            st.rows.append(_json_row(res, meas, placement, size, root, cycle))
        it = res.get(f"{placement}_per_iter")
        if isinstance(it, dict) and isinstance(it.get("times_us"), list):
            out.append(
                PerIteration(
                    size_bytes=size,
                    placement=placement,
                    times_us=tuple(float(t) for t in it["times_us"]),
                    skipped_iterations=int(it.get("skipped_iterations") or 0),
                    cycle=cycle,
                )
            )
    return out


def _json_row(
    res: dict[str, Any],
    meas: dict[str, Any],
    placement: Placement,
    size: int,
    root: int,
    cycle: int,
) -> ResultRow:
    def num(key: str) -> float | None:
        val = meas.get(key)
        return float(val) if isinstance(val, (int, float)) else None

    wrong = num("nwrong")
    return ResultRow(
        size_bytes=size,
        count=int(res.get("count", 0)),
        type=str(res.get("type", "")),
        redop=str(res.get("redop", "")),
        root=root,
        placement=placement,
        time_us=num("time"),
        algbw_gbps=num("alg_bw"),
        busbw_gbps=num("bus_bw"),
        wrong=int(wrong) if wrong is not None and wrong == wrong else None,
        cycle=cycle,
    )


def combine(text: ParsedNcclTests, json_result: ParsedNcclTests) -> ParsedNcclTests:
    """The text result, with per-iteration times and any header field it lacks from the JSON.

    Rows come from the text (they carry line numbers and timestamps) unless it has none.
    """
    update: dict[str, Any] = {
        name: getattr(json_result, name)
        for name in ParsedNcclTests.model_fields
        if getattr(text, name) in (None, []) and getattr(json_result, name) not in (None, [])
    }
    update["warnings"] = text.warnings + json_result.warnings
    return text.model_copy(update=update)
