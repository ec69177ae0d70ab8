"""Pure parsers of nccl-tests output: the text printed on stdout and the `-J` JSON file.

Public API:

- `parse_text(source, binary_name=None)`: text output (str, bytes or an iterable of lines,
  e.g. an open file) -> `ParsedNcclTests`. Streams line by line in linear time.
- `parse_json(data)`: `-J` JSON (str or bytes) -> `ParsedNcclTests`; salvages the results of a
  JSON file cut short by a crash.
- `combine(text, json)`: text result completed with what only the JSON has (per-iteration times).
- `collective_from_binary(name)`: `".../all_reduce_perf"` -> `"all_reduce"`.
- `split_runs(source)`: the runs of a text output holding several (a shell loop's output, a
  grep of several logs), split where a new run shows; `parse_text_runs` parses each.
- `ends_complete(parsed)`: whether the output ends as a complete run of its tool's version.
- `LogLines(source)`, `RunParser`: the streaming reader and parser behind them, for a caller
  that reads a log once for several things (`events.read_log`).

None of them raise on bad input: whatever was understood is returned, and what was not is
listed in `ParsedNcclTests.warnings`.
"""

from __future__ import annotations

import heapq
import io
import itertools
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from r2bench.records.logprefix import DETECT_LINES, LineCleaner
from r2bench.records.models import (
    CollectiveSource,
    Device,
    ParsedNcclTests,
    PerIteration,
    Placement,
    ResultRow,
)
from r2bench.records.provenance import LibraryEvidence

MAX_LINE = 8192  # longer lines are not nccl-tests lines (binary garbage, runaway logs)
MAX_WARNINGS = 50
PLACEMENTS: tuple[Placement, Placement] = ("out_of_place", "in_place")

_VERSION_RE = re.compile(
    r"([nr])ccl-tests version (\S+)(?: [nr]ccl-headers=(\d+))?(?: [nr]ccl-library=(\d+))?"
)
_RCCL_TESTS_RE = re.compile(r"^rccl-tests: Version\s*(\S*)")
_LOG_START_RE = re.compile(r"[A-Za-z][\w.-]*:\d+:\d+ \[\d+\] ")
"""The start of an NCCL log line (`host:pid:tid [rank] `), wherever it is in a line."""
_GLUED_TEST_RE = re.compile(r"(?<=\d)[A-Za-z_][\w.-]*: Test ")
"""nccl-tests' `host: Test timeout` message right after a row's last printed number."""
_DEVICE_RE = re.compile(
    r"^#\s*Rank\s+(\d+)\s+(?:Group\s+(\d+)\s+)?(?:Pid\s+(\d+)\s+)?(?:on\s+(\S+)|\.\.\.|…)"
    r"\s+device\s+(\d+)"
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
# A line that runs a test: a shell, mpirun or srun command naming `<test>_perf` (also quoted,
# as a script sets it: `BIN="./build/all_reduce_perf_mpi"`).
_COMMAND_RE = re.compile(r"(?:^|[\s/=>$#])(?P<test>[a-z_]+)_perf(?:_mpi)?(?=[\"']?(?:\s|$))(?!\.)")
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
    """The columns of a result row: the row's own (size, count, type, [redop], [root]) and, once
    per placement (out-of-place, then in-place), the placement's (time, algbw, busbw, #wrong or
    error, [per-iteration columns]). Learned from the column-name line of the table, or from the
    shape of the first full row when a paste has no such line. A table an author condensed to
    one placement (`size count type redop root time algbw busbw`) has `placements` 1."""

    head: tuple[str, ...] = _HEAD_COLUMNS
    group: tuple[str, ...] = ("time", "algbw", "busbw", "wrong")
    from_header: bool = False
    placements: int = 2

    @property
    def width(self) -> int:
        return len(self.head) + self.placements * len(self.group)


_DEFAULT_LAYOUT = _Layout()


def layout_from_header(names: list[str]) -> _Layout | None:
    """The layout a column-name line declares (`size count type redop root time algbw busbw
    #wrong time ...`); None when the line is not a complete one. A line naming one placement's
    columns only (a condensed table) declares one placement."""
    # `timestamp` (-S), `...` and unknown extras are left out
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
    return _Layout(
        head=head, group=group, from_header=True, placements=1 if second == len(rest) else 2
    )


def layout_from_row(tokens: list[str]) -> _Layout | None:
    """The layout of a full row when no column-name line was seen: (size, count, type), a
    redop when the next token is a name, a root when the count of the rest says so (also a
    root after a blank redop: `8 2 float -1 ...`)."""
    if len(tokens) < 4 or not (_INT_RE.match(tokens[0]) and _INT_RE.match(tokens[1])):
        return None
    redop = _NAME_RE.match(tokens[3]) is not None and tokens[3] != "N/A"
    rest = len(tokens) - (4 if redop else 3)
    if _timestamp(tokens[-2:]) is not None:
        rest -= 2
    head: tuple[str, ...]
    if rest in (8, 16):
        head = ("size", "count", "type", "redop") if redop else ("size", "count", "type")
    elif rest - 1 in (8, 16) and _INT_RE.match(tokens[4 if redop else 3]):
        head = _HEAD_COLUMNS if redop else ("size", "count", "type", "root")
        rest -= 1
    else:
        return None
    group = ("time", "algbw", "busbw", "wrong") + (_ITER_COLUMNS if rest == 16 else ())
    return _Layout(head=head, group=group)


ROW_FIRST = frozenset(" \t0123456789")
"""First characters of a line that may be a result row with a library log line glued on."""
_STRINGS: dict[str, str] = {}
_ROW_DEFAULTS = {
    name: info.default for name, info in ResultRow.model_fields.items() if not info.is_required()
}
_ROW_FIELDS = set(ResultRow.model_fields)
_set = object.__setattr__


def _built_row(values: dict[str, Any]) -> ResultRow:
    """A ResultRow of values this module checked itself, built without pydantic's validation
    (several µs a row, a large share of a dense log's parse) and sharing one set of field
    names (hundreds of bytes a row): what `model_construct` does, less its per-call work."""
    row = ResultRow.__new__(ResultRow)
    _set(row, "__dict__", {**_ROW_DEFAULTS, **values})
    _set(row, "__pydantic_fields_set__", _ROW_FIELDS)
    _set(row, "__pydantic_extra__", None)
    _set(row, "__pydantic_private__", None)
    return row


def _validated_row(values: dict[str, Any]) -> ResultRow:
    return ResultRow(**values)


def _row_builder() -> Any:
    """`_built_row` where it builds what validation builds (this pydantic), else validation."""
    probe = {
        "size_bytes": 8, "count": 2, "type": "float", "redop": "sum", "root": -1,
        "cycle": 0, "line": 1, "timestamp": None, "placement": "in_place",
        "time_us": 1.5, "algbw_gbps": 0.0, "busbw_gbps": 0.0, "wrong": 0,
    }  # fmt: skip
    try:
        fast = _built_row(dict(probe))
        same = fast == ResultRow(**probe) and fast.model_dump() == ResultRow(**probe).model_dump()
    except Exception:  # another pydantic: validate instead
        same = False
    return _built_row if same else _validated_row


_new_row = _row_builder()


_INTS: dict[int, int] = {}


def _shared_int(value: int) -> int:
    """One int object per distinct size or count (the rows of each -N cycle repeat them)."""
    if len(_INTS) > 65536:
        return value
    return _INTS.setdefault(value, value)


def _interned(tok: str) -> str:
    """One string object per distinct type/redop name (millions of rows share a few)."""
    if len(_STRINGS) > 4096:
        return tok
    return _STRINGS.setdefault(tok, tok)


@dataclass
class _State:
    """Mutable accumulator of one run; frozen into a ParsedNcclTests at the end."""

    fields: dict[str, Any] = field(default_factory=dict)
    devices: list[Device] = field(default_factory=list)
    rows: list[ResultRow] = field(default_factory=list)
    ratios: list[tuple[float, float] | None] = field(default_factory=list)  # busbw/algbw per row
    restarts: list[int] = field(default_factory=list)  # indices of rows that restart the sizes
    warnings: list[str] = field(default_factory=list)
    dropped_warnings: int = 0
    layout: _Layout | None = None
    in_table: bool = False  # the column header line was seen
    pending: tuple[int, list[str]] | None = None  # (line number, a row printed in pieces)
    last_size: dict[tuple[str, str, int], int] = field(default_factory=dict)
    cycle: dict[tuple[str, str, int], int] = field(default_factory=dict)
    named: dict[str, str] = field(default_factory=dict)  # source -> collective it names
    origin: str | None = None  # the rank/host/file the header or row lines' prefix named
    library: LibraryEvidence = field(default_factory=LibraryEvidence)
    commented_rows: int = 0  # result rows an author commented out with `#` (read)
    n_ranks: int = 0  # distinct ranks in `devices`
    blank_redop_lines: set[int] = field(default_factory=set)  # rows read with a blank redop
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

    def drop_rows_from(self, index: int) -> None:
        """Forget the rows from `index` on (a last line cut short)."""
        del self.rows[index:]
        del self.ratios[index:]
        self.restarts = [i for i in self.restarts if i < index]


# --------------------------------------------------------------------------- reading lines

_CHUNK = 1 << 20
_LONGEST = 1 << 20  # a "line" held longer than this is cut: it is never one of ours


class LineReader:
    """The lines of a text source without their line ends (`\\n`, and a `\\r` before it).

    A binary file is read in 1 MiB chunks, each decoded once (UTF-8, leniently), so the cost
    per line does not depend on how lines are mixed; a str or bytes is split at once; any other
    iterable is taken line by line. `ended` says, once read, whether the last line had its line
    end (a line without one may have been cut mid-way)."""

    def __init__(self, source: str | bytes | Iterable[str] | Iterable[bytes]) -> None:
        self.source = source
        self.ended = True

    def __iter__(self) -> Iterator[str]:
        src = self.source
        if isinstance(src, bytes):
            src = src.decode("utf-8", errors="replace")
        if isinstance(src, str):
            yield from self._split(src)
            return
        read = getattr(src, "read", None)
        if read is not None and not isinstance(src, io.TextIOBase):
            yield from self._chunks(read)
            return
        last = ""
        for raw in src:
            text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw
            last = text
            if "\n" in text[:-1]:  # a block of lines (stdin read whole), not one line
                yield from self._split(text)
                continue
            yield text.rstrip("\r\n")
        self.ended = last.endswith(("\n", "\r")) or last == ""

    def _split(self, text: str) -> Iterator[str]:
        lines = text.split("\n")
        tail = lines.pop()
        for line in lines:
            yield line[:-1] if line[-1:] == "\r" else line
        if tail:
            self.ended = tail.endswith("\r")
            yield tail.rstrip("\r")

    def _chunks(self, read: Any) -> Iterator[str]:
        held = b""
        overlong = False  # `held` is the start of a line longer than any of ours
        while True:
            chunk = read(_CHUNK)
            if not chunk:
                break
            if isinstance(chunk, str):
                chunk = chunk.encode("utf-8", errors="replace")
            cut = chunk.rfind(b"\n")
            if cut < 0:
                if not overlong:
                    held += chunk
                    if len(held) > _LONGEST:
                        held, overlong = held[: MAX_LINE + 1], True
                continue
            if overlong:
                block = held + chunk[chunk.find(b"\n") : cut + 1]
                overlong = False
            else:
                block = held + chunk[: cut + 1]
            held = chunk[cut + 1 :]
            for line in block.decode("utf-8", errors="replace")[:-1].split("\n"):
                yield line[:-1] if line[-1:] == "\r" else line
        if held:
            self.ended = held.endswith(b"\r")
            yield held.decode("utf-8", errors="replace").rstrip("\r")


class LogLines:
    """(line number, the line as written, the line cleaned, the rank/host/file its prefix
    named, the time stamp a log collector put before it) for every line of a source: launcher
    prefixes and paste artefacts taken off (`logprefix.LineCleaner`)."""

    def __init__(
        self, source: str | bytes | Iterable[str] | Iterable[bytes], first_line: int = 1
    ) -> None:
        self.reader = LineReader(source)
        self.first_line = first_line
        self.last = first_line - 1

    @property
    def ended(self) -> bool:
        return self.reader.ended

    def __iter__(self) -> Iterator[tuple[int, str, str, str | None, str | None]]:
        cleaner = LineCleaner()
        it = iter(self.reader)
        held: list[str] = []
        for line in it:
            held.append(line)
            if len(held) >= DETECT_LINES:
                break
        cleaner.decide(held)
        split = cleaner.split
        count = 0
        try:
            for count, line in enumerate(held, self.first_line):
                yield (count, line, *split(line))
            for count, line in enumerate(it, self.first_line + len(held)):
                yield (count, line, *split(line))
        finally:
            self.last = count if count else self.first_line - 1


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
    parser = RunParser(split=False)
    lines = LogLines(source, first_line)
    parser.parse(lines)
    return parser.finish(lines, binary_name=binary_name, file_name=file_name)[0]


def iter_runs(
    source: str | bytes | Iterable[str] | Iterable[bytes], *, file_name: str | None = None
) -> list[ParsedNcclTests]:
    """Every run of a text output, in one streaming pass (see `split_runs` for where runs are
    cut); each knows its `first_line` and `last_line`."""
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
    the `# Avg bus bandwidth` footer: that is their last line of a complete run."""
    if parsed.concluded:
        return True
    if not parsed.footer:
        return False
    return not expects_concluding_line(parsed)


def expects_concluding_line(parsed: ParsedNcclTests) -> bool:
    """Whether the output's tool and version print `# Collective test concluded` at the end:
    it printed the version line of 2.17.4 and later (`nccl-headers=`) or the starting line
    (2.16.7 and later)."""
    return parsed.nccl_headers is not None or parsed.collective_from == "program_line"


def _settle_collective(
    st: _State, binary_name: str | None, file_name: str | None, columns: tuple[str, ...] | None
) -> None:
    if st.fields.get("collective"):
        return
    candidates = collectives_from_columns(st.rows, len({d.rank for d in st.devices}), columns)
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


# What names the collective, most direct first.
_NAMING_ORDER: tuple[CollectiveSource, ...] = ("program_line", "command_line", "failure_line")


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


def collectives_from_columns(
    rows: list[ResultRow], ranks: int, columns: tuple[str, ...] | None = None
) -> tuple[str, ...]:
    """The collectives whose nccl-tests rows look like these: redop (none or an operation),
    root (-1 or a rank), size / (count x type size) (1, or the number of ranks) and busbw /
    algbw (2(n-1)/n > 1 only for all_reduce; 1 for the rooted ones and sendrecv).

    `columns` are the row columns a column-name line declared (None without one). A redop
    column left blank is a collective that does not reduce (releases before 2.13 printed
    nothing there for all_gather, alltoall, broadcast, scatter and gather); in the oldest
    releases each test printed its own columns, and only all_gather had neither redop nor
    root, only broadcast a root without a redop."""
    if not rows:
        return ()
    row = rows[-1]
    if not row.redop:
        if columns is None:
            return ()  # a table without its column names: a blank redop says nothing
        if "redop" not in columns:
            return ("broadcast",) if "root" in columns else ("all_gather",)
    width = _TYPE_BYTES.get(row.type)
    ratio = row.size_bytes / (row.count * width) if width and row.count else None
    reduces, rooted = row.redop not in ("none", ""), row.root >= 0
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
    after rows, at a command line that runs a test after rows, at a `==> file <==` line, at a
    change of the rank, host or file a launcher or grep prefix names, and where the sizes
    start over with another busbw/algbw factor (another rank count: an extract of several
    runs with no header between them). Text before the first header stays with the first run.
    Holds the text in memory: for files of any size, use `iter_runs` (line ranges) instead."""
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
    if st.commented_rows:
        st.warn(
            f"{st.commented_rows} result row(s) commented out with '#' in the table: read as "
            "the rows they are"
        )
    if st.dropped_warnings:
        st.warnings.append(f"... {st.dropped_warnings} more warnings not shown")
    ranks = len({d.rank for d in st.devices}) or None
    fields = dict(st.fields)
    if st.library.family is not None:
        fields["library_family"] = st.library.family
    if st.library.version is not None:
        fields["library_version"] = st.library.version
    return ParsedNcclTests(
        devices=st.devices,
        rows=st.rows,
        warnings=st.warnings,
        ranks=ranks,
        first_line=st.first_line,
        last_line=st.last_line,
        **fields,
    )


# --------------------------------------------------------------------------- the parser


class RunParser:
    """One streaming pass over a text output: `feed` each cleaned line, then `finish`. With
    `split`, a new run begins wherever the text shows one (see `split_runs`)."""

    def __init__(self, *, split: bool) -> None:
        self.split = split
        self.runs: list[_State] = [_State()]
        self.carry: list[tuple[str, str]] = []  # (source, collective) seen after a run ended

    @property
    def st(self) -> _State:
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
        if "ersion" in line or (lib.family != "r2ccl" and ("R2CC" in line or "r2cc/" in line)):
            lib.feed(line)

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
            _flush_pending(run)
            parts = _split_by_ratio(run) if self.split else [run]
            for part in parts:
                _check_blank_redops(part, binary_name, file_name)
                _keep_consensus(part)
                layout = part.layout
                columns = layout.head if layout is not None and layout.from_header else None
                _settle_collective(part, binary_name, file_name, columns)
                out.append(_finish(part))
        return out

    def _new_run(self, lineno: int) -> None:
        if self.st.first_line is None:
            return  # nothing seen yet: this line starts the current run
        _flush_pending(self.st)
        self.st.last_line = lineno - 1
        self.runs.append(_State())

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
        if self.split:
            self._maybe_split(lineno, stripped, kind, origin)
        st = self._touch(lineno)
        if st.pending is not None and kind != "other":
            _short_row(st)
        if kind in ("comment", "header"):
            if origin is not None and st.origin is None:
                st.origin = origin
            _parse_comment(st, lineno, stripped)
        elif kind == "row":
            if origin is not None and st.origin is None:
                st.origin = origin
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
        if kind == "header" and _RUN_START_RE.match(stripped):
            if st.header_done or st.rows or st.ended or other:
                self._new_run(lineno)
        elif kind == "row":
            if st.ended:
                self._new_run(lineno)  # rows after a footer (a grep or cat of several runs)
        elif kind == "comment":
            if st.rows and _DEVICE_RE.match(stripped):
                self._new_run(lineno)  # a new device list after rows
            elif (st.rows or st.ended) and _is_column_line(stripped):
                self._new_run(lineno)  # another table's column names: the next run's
        elif st.rows and (
            (stripped[:4] == "==> " and stripped.endswith(" <=="))
            or ("_perf" in stripped and _COMMAND_RE.search(stripped) is not None)
        ):
            # `tail`'s next file, or a command line that runs a test after rows: the context
            # of the next run
            self._new_run(lineno)


def _is_column_line(line: str) -> bool:
    """Whether a `#` line names a table's columns (`#  size  count  type ... busbw ...`)."""
    return (
        ("size" in line or "bytes" in line)
        and ("time" in line or "redop" in line)
        and layout_from_header(line.lstrip("#").split()) is not None
    )


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
    if ("ersion" in line or "R2CC" in line or "r2cc/" in line) and st.library.feed(line):
        m = _RCCL_TESTS_RE.match(line)
        if m is not None and m.group(1) and m.group(1) != ":+":
            st.fields.setdefault("nccl_tests_version", m.group(1))
        return
    if "_perf" in line and (m := _COMMAND_RE.search(line)) is not None:
        name = collective_from_binary(m.group("test") + "_perf")
        if name:
            if carry is not None:
                carry.append(("command_line", name))
            else:
                st.named["command_line"] = name
        return
    if "failure" in line and (m := _FAILURE_FILE_RE.search(line)) is not None:
        name = m.group("test")
        if name in NCCL_TESTS_COLLECTIVES:
            st.named.setdefault("failure_line", name)
        return
    if st.in_table and not st.ended and tokens and _INT_RE.match(tokens[0]):
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
                st.library.feed(line)
            elif m.group(4) and st.library.family is None:
                st.library.family = "nccl"  # nccl-tests built against an NCCL of that code
    elif _NTHREAD_RE.match(line):
        st.fields["header"] = True
        _parse_args_line(st, line)
    elif (m := _DEVICE_RE.match(line)) is not None:
        st.devices.append(_device(m))
        st.n_ranks = len({d.rank for d in st.devices})
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
    elif st.in_table and not st.ended and line[1:].lstrip()[:1].isdigit():
        tokens = line[1:].split()
        layout = st.layout or _DEFAULT_LAYOUT
        if _looks_like_row(tokens) and len(tokens) >= len(layout.head) + len(layout.group):
            # A result row an author commented out in a pasted table: still the measurement
            # the table printed; read, and said
            st.commented_rows += 1
            if st.pending is not None:
                _short_row(st)
            _parse_row(st, lineno, tokens, final=True)
    elif "ersion" in line:
        st.library.feed(line)


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
        host=m.group(4) or "",
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
        if name == "type" and (_NAME_RE.match(tok) is None or tok == "N/A"):
            return f"{name} {tok!r} is not a name"
        if name == "redop" and tok and (_NAME_RE.match(tok) is None or tok == "N/A"):
            return f"{name} {tok!r} is not a name"
        if name == "root" and (_INT_RE.match(tok) is None or int(tok) < -1):
            return f"root {tok!r} is not a rank or -1"
    if len(tokens) > 2 and tokens[2] in _REDOPS:
        return f"type {tokens[2]!r} is a reduction: a column is missing"
    return None


def _blank_redop(layout: _Layout, tokens: list[str]) -> list[str] | None:
    """The row with its blank redop column given back, or None when its redop is not blank:
    releases before 2.13.4 printed nothing under `redop` for the collectives that do not
    reduce, so a number stands where the redop's name should (`0  0  float  1.63 ...`,
    `8  2  float  -1  ...`). Whether the table may have one is settled when the run ends
    (`_check_blank_redops`): a row that lost its redop looks the same."""
    if "redop" not in layout.head:
        return None
    i = layout.head.index("redop")
    if len(tokens) > i and _to_float(tokens[i]) is not None:
        return [*tokens[:i], "", *tokens[i:]]
    return None


# Collectives that print a redop's name in every release: a blank one is a lost column.
_NAMED_REDOP = frozenset({"all_reduce", "reduce", "reduce_scatter", "sendrecv"})


def _check_blank_redops(st: _State, binary_name: str | None, file_name: str | None) -> None:
    """Rows read with a blank redop stay only where the table may have one: no row of the
    run names a redop, and nothing names a collective that reduces. Otherwise they are rows
    that lost a column (which one cannot be told): not read."""
    if not st.blank_redop_lines:
        return
    named = (
        st.fields.get("collective")
        or st.named.get("command_line")
        or st.named.get("failure_line")
        or collective_from_binary(binary_name)
        or collective_from_file_name(file_name)
    )
    blank = st.blank_redop_lines
    # busbw above algbw is a reduction's (2(n-1)/n); the others move at most what they send
    reduces = any(
        q is not None and q[0] > 1.01
        for r, q in zip(st.rows, st.ratios, strict=True)
        if r.line in blank
    )
    if (
        named not in _NAMED_REDOP
        and not reduces
        and not any(r.redop for r in st.rows if r.line not in blank)
    ):
        return
    why = (
        f"{named} always prints its redop"
        if named in _NAMED_REDOP
        else "busbw above algbw is a reduction's"
        if reduces
        else "the table's other rows name a redop"
    )
    kept = [(r, q) for r, q in zip(st.rows, st.ratios, strict=True) if r.line not in blank]
    for line in sorted({r.line for r in st.rows if r.line in blank}):
        _unreadable(st, line or 0, f"its redop column is blank and {why}: a column is missing")
    st.rows = [r for r, _ in kept]
    st.ratios = [q for _, q in kept]


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
    unblanked = _blank_redop(layout, tokens)
    if unblanked is not None:
        tokens = unblanked
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
    measured = layout.placements * len(layout.group)
    if len(rest) > measured:
        _unreadable(st, lineno, f"{len(tokens)} columns where the header has {layout.width}")
        return
    if len(rest) < measured and not final:
        st.pending = (lineno, tokens)  # the rest may follow (pieces), or the output ends here
        return
    if not rest:
        st.warn(f"line {lineno}: result row cut short (no measurements)")
        return
    if unblanked is not None:
        st.blank_redop_lines.add(lineno)
    _add_row(st, lineno, tokens[:head_n], rest, timestamp)


def _unreadable(st: _State, lineno: int, why: str) -> None:
    st.fields["unreadable_rows"] = st.fields.get("unreadable_rows", 0) + 1
    st.warn(f"line {lineno}: result row not read: {why}")


def _next_cycle(st: _State, key: tuple[str, str, int], size: int) -> int:
    """The size sweep (`-N` cycle) a row of this size belongs to: a smaller size than the
    last starts the next one, so does the same size again (`-b X -e X -N 5`), except size 0:
    the smallest sizes of a sweep over many ranks all print as 0 B (8, 16, 32 B over 8 ranks
    hold no whole element), one row after another in one sweep."""
    last = st.last_size.get(key)
    st.last_size[key] = size
    if last is not None and (size < last or (size == last and size > 0)):
        st.cycle[key] = st.cycle.get(key, 0) + 1
        st.restarts.append(len(st.rows))
    return st.cycle.get(key, 0)


def _add_row(
    st: _State, lineno: int, head: list[str], rest: list[str], timestamp: datetime | None
) -> None:
    layout = st.layout or _DEFAULT_LAYOUT
    named = dict(zip(layout.head, head, strict=True))
    size, count = _shared_int(int(named["size"])), _shared_int(int(named["count"]))
    why = _partial_group_differs(layout, size, rest)
    if why is not None:
        _unreadable(st, lineno, why)
        return
    root = int(named.get("root", "-1"))
    redop = _interned(named.get("redop", ""))
    rtype = _interned(named["type"])
    key = (rtype, redop, root)
    base = {
        "size_bytes": size,
        "count": count,
        "type": rtype,
        "redop": redop,
        "root": root,
        "cycle": _next_cycle(st, key, size),
        "line": lineno,
        "timestamp": timestamp,
    }
    width = len(layout.group)
    added = 0
    for index, placement in enumerate(PLACEMENTS[: layout.placements]):
        group = rest[index * width : (index + 1) * width]
        if not group:
            st.warn(f"line {lineno}: {placement} columns missing (the output ends here)")
            break
        found = _placement_row(st, lineno, layout, group, base, placement)
        if found is None:
            st.warn(f"line {lineno}: {placement} columns missing or malformed")
            break
        st.rows.append(found[0])
        st.ratios.append(found[1])
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


_PLACEMENT_KEYS = {"time": "time_us", "algbw": "algbw_gbps", "busbw": "busbw_gbps"}


def _placement_row(
    st: _State,
    lineno: int,
    layout: _Layout,
    group: list[str],
    base: dict[str, Any],
    placement: Placement,
) -> tuple[ResultRow, tuple[float, float] | None] | None:
    """One placement's row and the busbw/algbw range its printed digits allow (None when
    too few digits tell), or None when its numbers cannot be one measurement."""
    names = layout.group
    if len(group) < len(names):
        return None
    numbers: list[float | None] = []
    for tok in group:
        if tok == "N/A":
            numbers.append(None)
            continue
        try:
            numbers.append(float(tok))
        except ValueError:
            return None
    values: dict[str, Any] = dict(base)
    values["placement"] = placement
    any_na = False
    all_na = True
    for name, tok, num in zip(names, group, numbers, strict=False):
        if name == "wrong":
            # a count prints as `0`, `12` or, large, `4.1943e+06`; never as `144.00`
            if num is None:
                values["wrong"] = None
                continue
            fixed = "." in tok and "e" not in tok and "E" not in tok
            wrong = _to_int(tok) if not fixed else None
            if wrong is None or wrong < 0:
                st.warn(f"line {lineno}: #wrong {tok!r} is not a count")
                return None
            values["wrong"] = wrong
        elif name == "error":
            continue  # a maximum error, not a count of wrong elements
        elif name in _MEASURES:
            if num is None:
                any_na = True
                values[_PLACEMENT_KEYS[name]] = None
                continue
            all_na = False
            if "e" in tok or "E" in tok:
                # times and bandwidths print in fixed point; `0e+00` is an error or #wrong
                st.warn(f"line {lineno}: {placement} has an exponent in {'/'.join(_MEASURES)}")
                return None
            if num != num or num in (float("inf"), float("-inf")) or num < 0:
                st.warn(
                    f"line {lineno}: {name} {tok!r} is not a measurement (NaN, infinite or "
                    "negative)"
                )
                return None
            values[_PLACEMENT_KEYS[name]] = num
        else:
            values[name] = num  # per-iteration columns
    if any_na and not all_na:
        # nccl-tests prints N/A for all of a placement it did not run, or for #wrong alone
        st.warn(f"line {lineno}: {placement} has N/A beside numbers in {'/'.join(_MEASURES)}")
        return None
    exact = "root" in layout.head
    why = _inconsistent(
        base["size_bytes"], group[names.index("time")], values, exact=exact, ranks=st.n_ranks
    )
    if why is not None:
        st.warn(f"line {lineno}: {placement} columns do not fit each other ({why}): not read")
        return None
    return _new_row(values), _ratio_range(group, names, values)


def _ratio_range(
    group: list[str], names: tuple[str, ...], values: dict[str, Any]
) -> tuple[float, float] | None:
    """busbw / algbw is one factor for a whole run (set by collective and rank count): the
    range the printed digits of one placement allow, or None when they allow too much."""
    alg, bus = values.get("algbw_gbps"), values.get("busbw_gbps")
    if alg is None or bus is None or alg < 0.05:
        return None  # too few digits to tell
    da = _half_ulp(group[names.index("algbw")])
    db = _half_ulp(group[names.index("busbw")])
    return max(bus - db, 0.0) / (alg + da), (bus + db) / (alg - da)


def _consensus(
    ranges: list[tuple[float, float] | None],
) -> tuple[float, float, int] | None:
    """(low, high, count): the busbw/algbw range most rows' ranges share (at a tie, the one
    the earliest row is in), or None when no row tells. A sweep over the ranges' ends:
    O(n log n)."""
    told = [rng for rng in ranges if rng is not None]
    if not told:
        return None
    low, high = max(r[0] for r in told), min(r[1] for r in told)
    if low <= high:
        return low, high, len(told)  # they all agree: the common case, O(n)
    points: list[tuple[float, int, int]] = []
    for index, rng in enumerate(ranges):
        if rng is not None:
            points.append((rng[0], 0, index))
            points.append((rng[1], 1, index))
    if not points:
        return None
    points.sort()
    next_end = [0.0] * len(points)  # the value of the first range end at or after each point
    upcoming = points[-1][0]
    for i in range(len(points) - 1, -1, -1):
        if points[i][1]:
            upcoming = points[i][0]
        next_end[i] = upcoming
    inside: set[int] = set()
    earliest: list[int] = []  # heap of the rows inside (lazily pruned)
    best: tuple[int, int, float, float] | None = None  # (count, -earliest row, low, high)
    for i, (value, end, index) in enumerate(points):
        if end:
            inside.discard(index)
            continue
        inside.add(index)
        heapq.heappush(earliest, index)
        while earliest[0] not in inside:
            heapq.heappop(earliest)
        score = (len(inside), -earliest[0])
        if best is None or score > best[:2]:
            best = (*score, value, next_end[i])
    assert best is not None
    return best[2], best[3], best[0]


def _keep_consensus(st: _State) -> None:
    """Drop the placements whose busbw/algbw no majority of the run's rows share: one shifted
    column, or one number edited by hand, is outvoted by the genuine rows around it (it
    never narrows the range the others must fit)."""
    agreed = _consensus(st.ratios)
    if agreed is None or agreed[2] == len([r for r in st.ratios if r is not None]):
        return
    low, high, _ = agreed
    kept: list[ResultRow] = []
    kept_ratios: list[tuple[float, float] | None] = []
    lines_before = {r.line for r in st.rows}
    for row, rng in zip(st.rows, st.ratios, strict=True):
        if rng is not None and (rng[1] < low or rng[0] > high):
            st.warn(
                f"line {row.line}: {row.placement} columns do not fit the run's other rows "
                f"(busbw/algbw {rng[0]:.4f}..{rng[1]:.4f} where the others share "
                f"{low:.4f}..{high:.4f}): not read"
            )
            continue
        kept.append(row)
        kept_ratios.append(rng)
    lost = lines_before - {r.line for r in kept}
    if lost:
        st.fields["unreadable_rows"] = st.fields.get("unreadable_rows", 0) + len(lost)
    st.rows, st.ratios = kept, kept_ratios


def _split_by_ratio(st: _State) -> list[_State]:
    """An extract of several runs with no header between them (`grep -h` of the rows of a
    1-, 2-, 4- and 8-node run): where the sizes start over and the rows after agree on
    another busbw/algbw factor than those before (another rank count), another run begins.
    Each part says it is one of an extract; one run (-N cycles, any factor) stays whole."""
    if not st.restarts or len(st.rows) < 4:
        return [st]
    bounds = sorted({0, *st.restarts, len(st.rows)})
    parts: list[tuple[int, int]] = []
    start = 0
    agreed: tuple[float, float] | None = None  # the factor the current run's sweeps share
    for a, b in itertools.pairwise(bounds):
        if b <= a:
            continue
        rng = _consensus(st.ratios[a:b])
        if rng is None or rng[2] < 2:
            continue  # a sweep whose rows do not agree among themselves tells nothing
        if agreed is not None and (rng[1] < agreed[0] or rng[0] > agreed[1]):
            parts.append((start, a))
            start, agreed = a, (rng[0], rng[1])
        elif agreed is None:
            agreed = (rng[0], rng[1])
        else:
            agreed = (max(agreed[0], rng[0]), min(agreed[1], rng[1]))
    parts.append((start, len(st.rows)))
    if len(parts) == 1:
        return [st]
    return _cut(st, parts)


def _cut(st: _State, parts: list[tuple[int, int]]) -> list[_State]:
    """The runs of `st` made of its rows cut at `parts` (row index ranges): the first keeps
    the header facts, the last the footer's, each its own cycles, line range and warning."""
    out: list[_State] = []
    footer_keys = ("oob_values", "oob_failed", "avg_busbw_gbps", "footer", "concluded")
    for n, (a, b) in enumerate(parts):
        rows = st.rows[a:b]
        first_cycle = min(r.cycle for r in rows)
        if first_cycle:
            rows = [r.model_copy(update={"cycle": r.cycle - first_cycle}) for r in rows]
        part = _State(layout=st.layout, in_table=st.in_table, named=dict(st.named))
        part.blank_redop_lines = st.blank_redop_lines
        part.rows, part.ratios = rows, st.ratios[a:b]
        part.first_line = st.first_line if n == 0 else rows[0].line
        part.last_line = st.last_line if n == len(parts) - 1 else (st.rows[b].line or 1) - 1
        if n == 0:
            part.fields = {k: v for k, v in st.fields.items() if k not in footer_keys}
            part.devices, part.library, part.n_ranks = st.devices, st.library, st.n_ranks
            part.warnings = list(st.warnings)
        elif n == len(parts) - 1:
            part.fields = {k: v for k, v in st.fields.items() if k in footer_keys}
        factor = _consensus(part.ratios)
        how = f"; busbw/algbw {factor[0]:.4f}..{factor[1]:.4f}" if factor else ""
        part.warn(
            f"run {n + 1} of {len(parts)} in an extract with no header between its runs: the "
            f"sizes start over with another busbw/algbw factor (another rank count){how}"
        )
        out.append(part)
    return out


def _half_ulp(tok: str) -> float:
    """Half the last printed digit of a number (`4366.46` -> 0.005, `10094` -> 0.5)."""
    decimals = len(tok.partition(".")[2]) if "." in tok and "e" not in tok.lower() else 0
    return 0.5 * 10.0**-decimals


def _inconsistent(
    size: int, time_tok: str, values: dict[str, Any], *, exact: bool, ranks: int
) -> str | None:
    """Why a placement's numbers cannot be one measurement, or None: nccl-tests prints
    algbw = size / time at most, and busbw = algbw x a factor of 2 at most, and of 1/2 at
    least from 2 ranks on (by collective and rank count). Tables with a root column (every
    release since 2.x added it) print algbw = size / time exactly; older all_gather printed it
    per rank, below. A column shifted into another's place breaks one of these."""
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
    cycle = _next_cycle(st, key, size)
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
