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
    r"nccl-tests version (\S+)(?: nccl-headers=(\d+))?(?: nccl-library=(\d+))?"
)
_LOG_START_RE = re.compile(r"[A-Za-z][\w.-]*:\d+:\d+ \[\d+\] ")
"""The start of an NCCL log line (`host:pid:tid [rank] `), wherever it is in a line."""
_DEVICE_RE = re.compile(
    r"^#\s*Rank\s+(\d+)\s+(?:Group\s+(\d+)\s+)?Pid\s+(\d+)\s+on\s+(\S+)\s+device\s+(\d+)"
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
_AVG_RE = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*([-+0-9.eE]+|nan|inf)")
_STARTING_RE = re.compile(r"^#\s*Collective test starting:\s*(\S+)")
_CONCLUDED_RE = re.compile(r"^#\s*Collective test concluded:?\s*(\S*)")
# Lines that open a run's header, in the order nccl-tests prints them (all optional but nThread).
_RUN_START_RE = re.compile(
    r"^#\s*(?:Writing JSON output to|nccl-tests version|Collective test starting|nThread \d)"
)
_NTHREAD_RE = re.compile(r"^#\s*nThread \d")
_TYPE_BYTES = {
    "int8": 1, "char": 1, "uint8": 1, "int32": 4, "int": 4, "uint32": 4, "int64": 8,
    "uint64": 8, "half": 2, "float16": 2, "float": 4, "float32": 4, "double": 8,
    "float64": 8, "bfloat16": 2, "f8e4m3": 1, "f8e5m2": 1,
}  # fmt: skip
_DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_TIME_RE = re.compile(r"^\d{2}:\d{2}:\d{2}$")
_INT_RE = re.compile(r"^[-+]?\d+$")
_ITER_COLUMNS = ("iter_min_us", "iter_max_us", "iter_p99_us", "iter_cv_pct")


# nccl-tests' tests (BIN_FILES_LIST of its src/Makefile, 2.13 to 2.19), longest first: at one
# place in a name the search then takes `all_reduce` before the `reduce` inside it.
NCCL_TESTS_COLLECTIVES = (
    "all_reduce", "all_gather", "broadcast", "reduce_scatter", "reduce", "alltoall",
    "alltoallv", "scatter", "gather", "sendrecv", "hypercube",
)  # fmt: skip
_BINARY_RE = re.compile(
    "(" + "|".join(sorted(NCCL_TESTS_COLLECTIVES, key=len, reverse=True)) + ")_perf"
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
    """int of a token; floats like `0e+00` (old #wrong columns) are accepted when integral."""
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


@dataclass
class _Columns:
    """Row layout, learned from the column header line (defaults fit nccl-tests 2.x)."""

    has_root: bool = True
    per_iter: bool = False

    @property
    def group_width(self) -> int:
        return 8 if self.per_iter else 4


@dataclass
class _State:
    """Mutable accumulator; frozen into a ParsedNcclTests at the end."""

    fields: dict[str, Any] = field(default_factory=dict)
    devices: list[Device] = field(default_factory=list)
    rows: list[ResultRow] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    dropped_warnings: int = 0
    columns: _Columns = field(default_factory=_Columns)
    in_table: bool = False  # the column header line was seen
    pending: tuple[int, list[str]] | None = None  # (line number, preamble tokens)
    last_size: dict[tuple[str, str, int], int] = field(default_factory=dict)
    cycle: dict[tuple[str, str, int], int] = field(default_factory=dict)

    def warn(self, msg: str) -> None:
        if len(self.warnings) < MAX_WARNINGS:
            self.warnings.append(msg[:300])
        else:
            self.dropped_warnings += 1


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
    """Parse nccl-tests stdout/stderr (possibly interleaved with NCCL logs, truncated, garbage).

    The collective is taken from what the output says (the program name line, then the
    redop/root/count columns), then `binary_name` (the test binary that was run), then the
    `file_name` as a last resort; `collective_from` says which. An iterable should yield lines
    with their line ends (as a file does): a last line without one is taken as cut short and
    its row is dropped. `first_line` numbers the lines of a run cut out of a longer file.
    """
    st = _State()
    lineno, raw, rows_before = 0, "\n", 0
    try:
        for lineno, raw in enumerate(_raw_lines(source), start=first_line):
            rows_before = len(st.rows)
            _parse_line(st, lineno, raw.rstrip("\r\n"))
    except Exception as exc:  # a broken reader must not lose what was parsed so far
        st.warn(f"input read failed: {exc!r}")
    if not raw.endswith(("\n", "\r")) and len(st.rows) > rows_before:
        # output cut mid-line: the last number may be cut short too ("10251.5" -> "102")
        del st.rows[rows_before:]
        st.warn(f"line {lineno}: last line has no line end; its result row was dropped")
    _flush_pending(st)
    _settle_collective(st, binary_name, file_name)
    return _finish(st)


def _settle_collective(st: _State, binary_name: str | None, file_name: str | None) -> None:
    if st.fields.get("collective"):
        return
    named: tuple[CollectiveSource, str | None] = (
        ("run_spec", collective_from_binary(binary_name))
        if binary_name
        else ("file_name", collective_from_file_name(file_name))
    )
    candidates = collectives_from_columns(st.rows, len({d.rank for d in st.devices}))
    if named[1] and (not candidates or named[1] in candidates):
        st.fields.update(collective=named[1], collective_from=named[0])
    elif len(candidates) == 1:
        st.fields.update(collective=candidates[0], collective_from="columns")
    elif candidates:
        st.warn(f"collective not named; its columns fit {' or '.join(candidates)}")


def _name_collective(st: _State, collective: str | None, source: CollectiveSource) -> None:
    """Record the collective and how it was known; a source that names none changes nothing
    (the columns or the file name may still tell)."""
    if collective:
        st.fields.update(collective=collective, collective_from=source)


def collective_from_file_name(name: str | None) -> str | None:
    """`logs/v2-all_reduce_perf.socket.c1.txt` -> `all_reduce`: the binary's name in the file's
    name, before its first dot; names without one tell nothing."""
    if not name:
        return None
    return collective_from_binary(_base_name(name).split(".")[0])


def collectives_from_columns(rows: list[ResultRow], ranks: int) -> tuple[str, ...]:
    """The collectives whose nccl-tests rows look like these: redop (none or an operation),
    root (-1 or a rank) and size / (count x type size) (1, or the number of ranks)."""
    if not rows:
        return ()
    row = rows[-1]
    width = _TYPE_BYTES.get(row.type)
    ratio = row.size_bytes / (row.count * width) if width and row.count else None
    reduces, rooted = row.redop != "none", row.root >= 0
    per_rank = ratio is not None and ranks > 1 and abs(ratio - ranks) < 1e-9
    if rooted:
        return ("reduce",) if reduces else () if per_rank else ("broadcast",)
    if reduces:
        return ("reduce_scatter",) if per_rank else ("all_reduce", "sendrecv")
    return ("all_gather", "alltoall") if per_rank else ()


def split_runs(source: str | bytes | Iterable[str] | Iterable[bytes]) -> list[tuple[int, str]]:
    """Cut a text output into runs at each new nccl-tests header (the output of a shell loop
    that ran several tests into one file). Returns (first line number, text) per run; text
    before the first header stays with the first run."""
    runs: list[tuple[int, list[str]]] = [(1, [])]
    header_done = False
    for lineno, raw in enumerate(_raw_lines(source), start=1):
        if _RUN_START_RE.match(raw.lstrip()):
            if header_done:
                runs.append((lineno, []))
                header_done = False
            if _NTHREAD_RE.match(raw.lstrip()):
                header_done = True
        runs[-1][1].append(raw)
    return [(start, "".join(lines)) for start, lines in runs if lines]


def parse_text_runs(
    source: str | bytes | Iterable[str] | Iterable[bytes], *, file_name: str | None = None
) -> list[tuple[int, str, ParsedNcclTests]]:
    """Each run of a text output: (first line number, its text, what it says)."""
    return [
        (start, text, parse_text(text, file_name=file_name, first_line=start))
        for start, text in split_runs(source)
    ]


def _finish(st: _State) -> ParsedNcclTests:
    if st.dropped_warnings:
        st.warnings.append(f"... {st.dropped_warnings} more warnings not shown")
    ranks = len({d.rank for d in st.devices}) or None
    return ParsedNcclTests(
        devices=st.devices, rows=st.rows, warnings=st.warnings, ranks=ranks, **st.fields
    )


def _parse_line(st: _State, lineno: int, line: str) -> None:
    if len(line) > MAX_LINE:
        st.warn(f"line {lineno}: overlong line ({len(line)} chars) skipped")
        return
    glued = _LOG_START_RE.search(line)
    if glued is not None and glued.start() > 0:
        # A library log line glued to half a result row (the same stdout): keep the row part.
        line = line[: glued.start()]
    stripped = line.lstrip()
    if not stripped:
        return
    if stripped.startswith("#"):
        _parse_comment(st, lineno, stripped)
        return
    tokens = stripped.split()
    if _looks_like_row(tokens):
        _flush_pending(st)
        _parse_row(st, lineno, tokens)
    elif st.pending is not None and _looks_like_continuation(tokens):
        # A row printed in pieces (a library logging to stdout between nccl-tests' printfs):
        # gather pieces until both placements are there; the row ends on its last piece.
        _, ptoks = st.pending
        st.pending = None
        combined = ptoks + tokens
        head = 5 if st.columns.has_root else 4
        if len(combined) - head < 2 * st.columns.group_width:
            st.pending = (lineno, combined)
        else:
            _parse_row(st, lineno, combined)
    elif st.in_table and len(tokens) < 4 and _INT_RE.match(tokens[0]):
        st.warn(f"line {lineno}: result row cut short (no measurements)")
    # anything else (NCCL logs, mpirun text, garbage) is not ours: events.py reads it


def _looks_like_row(tokens: list[str]) -> bool:
    return (
        len(tokens) >= 4
        and _INT_RE.match(tokens[0]) is not None
        and _INT_RE.match(tokens[1]) is not None
        and not _is_number(tokens[2])
    )


def _looks_like_continuation(tokens: list[str]) -> bool:
    return len(tokens) >= 4 and all(_is_number(t) for t in tokens[:4])


def _flush_pending(st: _State) -> None:
    """A pending row ends: keep whatever placements it got (a row missing its second piece is
    still a measurement of the first), or say it was cut short."""
    if st.pending is None:
        return
    line, tokens = st.pending
    st.pending = None
    head = 5 if st.columns.has_root else 4
    if len(tokens) > head:
        _parse_row(st, line, tokens)
    else:
        st.warn(f"line {line}: result row cut short (no measurements)")


def _parse_comment(st: _State, lineno: int, line: str) -> None:
    if "nccl-tests version" in line:
        m = _VERSION_RE.search(line)
        if m:
            st.fields["nccl_tests_version"] = m.group(1)
            st.fields["nccl_headers"] = int(m.group(2)) if m.group(2) else None
            st.fields["nccl_library"] = int(m.group(3)) if m.group(3) else None
    elif line.startswith("# nThread"):
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
        st.fields["avg_busbw_gbps"] = _to_float(m.group(1))
        st.fields["footer"] = True
    elif (m := _CONCLUDED_RE.match(line)) is not None:
        st.fields["concluded"] = True
        if not st.fields.get("collective"):
            _name_collective(st, collective_from_binary(m.group(1)), "program_line")
    elif "redop" in line and "size" in line:
        names = line.lstrip("#").split()
        st.columns = _Columns(has_root="root" in names, per_iter="i_min" in names)
        st.in_table = True


def _parse_args_line(st: _State, line: str) -> None:
    for key, rx in _ARG_RES.items():
        m = rx.search(line)
        if m:
            st.fields[key] = bool(int(m.group(1))) if key == "validation" else int(m.group(1))


def _device(m: re.Match[str]) -> Device:
    return Device(
        rank=int(m.group(1)),
        group=int(m.group(2)) if m.group(2) is not None else None,
        pid=int(m.group(3)),
        host=m.group(4),
        device=int(m.group(5)),
        bus_id=m.group(6) or None,
        name=m.group(7).strip() or None,
    )


def _parse_row(st: _State, lineno: int, tokens: list[str]) -> None:
    cols = st.columns
    head = 5 if cols.has_root else 4
    root = _to_int(tokens[4]) if cols.has_root and len(tokens) > 4 else -1
    if len(tokens) <= head or root is None:
        if len(tokens) == head:
            st.pending = (lineno, tokens)  # preamble printed; numbers may follow on a later line
        else:
            st.warn(f"line {lineno}: result row cut short (no measurements)")
        return
    size, count = int(tokens[0]), int(tokens[1])
    key = (tokens[2], tokens[3], root)
    if size <= st.last_size.get(key, -1):
        st.cycle[key] = st.cycle.get(key, 0) + 1
    st.last_size[key] = size
    base = {
        "size_bytes": size,
        "count": count,
        "type": tokens[2],
        "redop": tokens[3],
        "root": root,
        "cycle": st.cycle.get(key, 0),
        "line": lineno,
    }
    rest = tokens[head:]
    width = cols.group_width
    groups = [rest[i * width : (i + 1) * width] for i in range(2)]
    timestamp = _timestamp(rest[2 * width :])
    for placement, group in zip(PLACEMENTS, groups, strict=True):
        row = _placement_row(group, width, base, placement, timestamp)
        if row is None:
            st.warn(f"line {lineno}: {placement} columns missing or malformed")
            return
        st.rows.append(row)


def _placement_row(
    group: list[str],
    width: int,
    base: dict[str, Any],
    placement: Placement,
    timestamp: datetime | None,
) -> ResultRow | None:
    if len(group) < width or not all(_is_number(t) for t in group):
        return None
    nums = [_to_float(t) for t in group]
    values: dict[str, Any] = dict(base)
    values.update(time_us=nums[0], algbw_gbps=nums[1], busbw_gbps=nums[2])
    if width == 8:
        values.update(zip(_ITER_COLUMNS, nums[4:], strict=True))
    return ResultRow(placement=placement, wrong=_to_int(group[3]), timestamp=timestamp, **values)


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
