"""The lines of one run of nccl-tests' text output: its `#` header and footer lines and its
result rows (also rows printed in pieces, or commented out in a paste), read into a
`RunState`.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from r2bench.parse.models import Device, Placement, ResultRow
from r2bench.parse.nccltests.collective import (
    NCCL_TESTS_COLLECTIVES,
    collective_from_binary,
    name_collective,
)
from r2bench.parse.nccltests.columns import (
    DEFAULT_LAYOUT,
    INT_RE,
    NAME_RE,
    Layout,
    is_number,
    layout_from_header,
    layout_from_row,
    looks_like_row,
    read_timestamp,
    to_float,
    to_int,
)
from r2bench.parse.nccltests.salvage import (
    blank_redop,
    inconsistent,
    partial_group_differs,
    ratio_range,
    short_row,
)
from r2bench.parse.nccltests.state import PLACEMENTS, RunState, next_cycle, unreadable
from r2bench.parse.numbers import BadNumber, bounded_int, id_or_none, shown

_VERIFY_BANNER = "# r2bench verification workload"
_VERIFY_VERSIONS_RE = re.compile(r"\(library (\d{1,9}), headers (\d{1,9})\)")
_VERSION_RE = re.compile(
    r"([nr])c{2,3}l-tests version (\S+)(?: [nr]c{2,3}l-headers=(\d+))?(?: [nr]c{2,3}l-library=(\d+))?"
)
_RCCL_TESTS_RE = re.compile(r"^rc{2,3}l-tests: Version\s*(\S*)")
DEVICE_RE = re.compile(
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
RUN_START_RE = re.compile(
    r"^#\s*(?:Writing JSON output to|[nr]ccl-tests version|Collective test starting|nThread \d)"
)
_NTHREAD_RE = re.compile(r"^#\s*nThread \d")
# A line that runs a test: a shell, mpirun or srun command naming `<test>_perf` (also quoted,
# as a script sets it: `BIN="./build/all_reduce_perf_mpi"`).
COMMAND_RE = re.compile(r"(?:^|[\s/=>$#])(?P<test>[a-z_]+)_perf(?:_mpi)?(?=[\"']?(?:\s|$))(?!\.)")
# Failure lines naming the test's source file: `Test failure all_reduce.cu:90`,
# `NCCL failure all_reduce.cu:95 'unhandled cuda error'` (old releases).
_FAILURE_FILE_RE = re.compile(r"(?:NCCL|CUDA)? ?failure (?P<test>[a-z_]+)\.cu:\d+")
_MEASURES = ("time", "algbw", "busbw")
_REDOPS = frozenset({"sum", "prod", "min", "max", "avg", "mulsum", "premulsum", "none"})
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


def parse_other(st: RunState, lineno: int, line: str, carry: list[tuple[str, str]] | None) -> None:
    """Lines that are not nccl-tests' own: numbers of a row printed in pieces, the library's
    version line, a command line or failure line naming the test. `carry` collects what a
    line after a run's footer names (it belongs to the next run)."""
    tokens = line.split()
    if st.pending is not None and _looks_like_continuation(tokens):
        _continue_row(st, lineno, tokens)
        return
    if (
        "ersion" in line or "R2CC" in line or "r2cc/" in line or "libnccl" in line
    ) and st.library.feed(line):
        m = _RCCL_TESTS_RE.match(line)
        if m is not None and m.group(1) and m.group(1) != ":+":
            st.fields.setdefault("nccl_tests_version", m.group(1))
        return
    if "_perf" in line and (m := COMMAND_RE.search(line)) is not None:
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
    if st.in_table and not st.ended and tokens and INT_RE.match(tokens[0]):
        if len(tokens) < 4:
            st.warn(f"line {lineno}: result row cut short (no measurements)")
        else:  # a row's start with a column missing or doubled before its type
            unreadable(st, lineno, "size, count and type are not where the header has them")


def _looks_like_continuation(tokens: list[str]) -> bool:
    return len(tokens) >= 4 and all(is_number(t) for t in tokens[:4])


def _continue_row(st: RunState, lineno: int, tokens: list[str]) -> None:
    """A row printed in pieces (a library logging to stdout between nccl-tests' printfs):
    gather pieces until both placements are there; the row ends on its last piece."""
    assert st.pending is not None
    _, ptoks = st.pending
    st.pending = None
    combined = ptoks + tokens
    layout = st.layout or DEFAULT_LAYOUT
    if len(combined) < layout.width and read_timestamp(combined[-2:]) is None:
        st.pending = (lineno, combined)
    else:
        parse_row(st, lineno, combined)


def flush_pending(st: RunState) -> None:
    """A pending row ends: keep whatever placements it got (a row missing its second piece is
    still a measurement of the first), or say it was cut short."""
    if st.pending is None:
        return
    line, tokens = st.pending
    st.pending = None
    parse_row(st, line, tokens, final=True)


def parse_comment(st: RunState, lineno: int, line: str) -> None:
    """A `#` line: the version, arguments, device, column-name, footer and concluding
    lines, and a result row an author commented out."""
    if line.startswith(_VERIFY_BANNER):
        # r2b_verify's banner: `... NCCL version 2.23.4 (library 22304, headers 22304)`
        m = _VERIFY_VERSIONS_RE.search(line)
        if m:
            st.fields["nccl_library"], st.fields["nccl_headers"] = int(m[1]), int(m[2])
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
        _parse_args_line(st, lineno, line)
    elif (m := DEVICE_RE.match(line)) is not None:
        device = _device(st, lineno, m)
        if device is not None:
            st.devices.append(device)
        st.n_ranks = len({d.rank for d in st.devices})
    elif (m := _STARTING_RE.match(line)) is not None:
        name_collective(st, collective_from_binary(m.group(1)), "program_line")
    elif (m := _OOB_RE.match(line)) is not None:
        oob = _header_int(st, lineno, "out of bounds values", m.group(1))
        if oob is not None:
            st.fields["oob_values"] = oob
            st.fields["oob_failed"] = m.group(2) == "FAILED" or oob > 0
    elif (m := _AVG_RE.match(line)) is not None:
        st.fields["avg_busbw_gbps"] = _measure(st, lineno, "avg busbw", m.group(1))
        st.fields["footer"] = True
    elif (m := _CONCLUDED_RE.match(line)) is not None:
        st.fields["concluded"] = True
        if not st.fields.get("collective"):
            name_collective(st, collective_from_binary(m.group(1)), "program_line")
    elif ("size" in line or "bytes" in line) and ("time" in line or "redop" in line):
        layout = layout_from_header(line.lstrip("#").split())
        if layout is not None:
            st.layout = layout
            st.fields["error_column"] = "error" in layout.group
            st.in_table = True
    elif st.in_table and not st.ended and line[1:].lstrip()[:1].isdigit():
        tokens = line[1:].split()
        layout = st.layout or DEFAULT_LAYOUT
        if looks_like_row(tokens) and len(tokens) >= len(layout.head) + len(layout.group):
            # A result row an author commented out in a pasted table: still the measurement
            # the table printed; read, and said
            st.commented_rows += 1
            if st.pending is not None:
                short_row(st)
            parse_row(st, lineno, tokens, final=True)
    elif "ersion" in line or "libnccl" in line:  # r2b_verify's `loaded NCCL from <file>` too
        st.library.feed(line)


def _header_int(st: RunState, lineno: int, what: str, tok: str) -> int | None:
    """A whole number of a header line, or None after a located warning when out of range."""
    try:
        return bounded_int(tok, what)
    except BadNumber as refused:
        st.warn(f"line {lineno}: {refused}; not read")
        return None


def _parse_args_line(st: RunState, lineno: int, line: str) -> None:
    for key, rx in _ARG_RES.items():
        m = rx.search(line)
        if m and (value := _header_int(st, lineno, key, m.group(1))) is not None:
            st.fields[key] = bool(value) if key == "validation" else value


def _device(st: RunState, lineno: int, m: re.Match[str]) -> Device | None:
    """The device a `#  Rank` line names, or None (warned) when one of its ids is out of range."""
    ids: dict[str, int | None] = {}
    for name, group in (("rank", 1), ("group", 2), ("pid", 3), ("device", 5)):
        ids[name], why = id_or_none(m.group(group), name) if m.group(group) else (None, None)
        if why is not None:
            st.warn(f"line {lineno}: {why}; device line not read")
            return None
    return Device(
        rank=ids["rank"] or 0,
        group=ids["group"],
        pid=ids["pid"],
        host=m.group(4) or "",
        device=ids["device"],
        bus_id=m.group(6) or None,
        name=m.group(7).strip() or None,
    )


def _measure(st: RunState, lineno: int, what: str, tok: str) -> float | None:
    """A bandwidth or time as printed; NaN, infinite or negative values are flagged, not
    taken (nccl-tests prints none of them for a real measurement)."""
    val = to_float(tok)
    if val is None:
        return None
    if val != val or val in (float("inf"), float("-inf")) or val < 0:
        st.warn(f"line {lineno}: {what} {tok!r} is not a measurement (NaN, infinite or negative)")
        return None
    return val


def _fits_head(layout: Layout, tokens: list[str]) -> str | None:
    """Why the row's own columns do not fit their types, or None when they do."""
    for name, tok in zip(layout.head, tokens, strict=False):
        if name in ("size", "count") and not (INT_RE.match(tok) and not tok.startswith("-")):
            return f"{name} {tok!r} is not a count"
        if name in ("size", "count", "root") and to_int(tok) is None:
            return f"{name} {shown(tok)} is out of range (more than int64 holds)"
        if name == "type" and (NAME_RE.match(tok) is None or tok == "N/A"):
            return f"{name} {tok!r} is not a name"
        if name == "redop" and tok and (NAME_RE.match(tok) is None or tok == "N/A"):
            return f"{name} {tok!r} is not a name"
        if name == "root" and (INT_RE.match(tok) is None or int(tok) < -1):
            return f"root {tok!r} is not a rank or -1"
    if len(tokens) > 2 and tokens[2] in _REDOPS:
        return f"type {tokens[2]!r} is a reduction: a column is missing"
    return None


def parse_row(st: RunState, lineno: int, tokens: list[str], *, final: bool = False) -> None:
    """A result row's tokens: its placements added to the run, held while its numbers may
    still follow on a later line (unless `final`), or counted as not read and said why."""
    if st.layout is None:
        st.layout = layout_from_row(tokens)
        if st.layout is None:
            if not final and len(tokens) >= 3:
                # the row's start; its numbers may follow on a later line (see _continue_row)
                st.pending = (lineno, tokens)
            else:
                unreadable(st, lineno, "no column header and the row's shape fits no release")
            return
    layout = st.layout
    head_n = len(layout.head)
    unblanked = blank_redop(layout, tokens)
    if unblanked is not None:
        tokens = unblanked
    if len(tokens) < head_n:
        st.warn(f"line {lineno}: result row cut short (no measurements)")
        return
    why = _fits_head(layout, tokens[:head_n])
    if why is not None:
        unreadable(st, lineno, why)
        return
    timestamp = read_timestamp(tokens[-2:]) if len(tokens) >= head_n + 2 else None
    rest = tokens[head_n : len(tokens) - 2] if timestamp is not None else tokens[head_n:]
    final = final or timestamp is not None  # `-S` prints the stamp where the row ends
    measured = layout.placements * len(layout.group)
    if len(rest) > measured:
        unreadable(st, lineno, f"{len(tokens)} columns where the header has {layout.width}")
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


def _add_row(
    st: RunState, lineno: int, head: list[str], rest: list[str], timestamp: datetime | None
) -> None:
    layout = st.layout or DEFAULT_LAYOUT
    named = dict(zip(layout.head, head, strict=True))
    # a table cut to `size time algbw busbw #wrong` prints no count and no type: none is
    # made up (0 elements, no type)
    size, count = _shared_int(int(named["size"])), _shared_int(int(named.get("count", "0")))
    why = partial_group_differs(layout, size, rest)
    if why is not None:
        unreadable(st, lineno, why)
        return
    root = int(named.get("root", "-1"))
    redop = _interned(named.get("redop", ""))
    rtype = _interned(named.get("type", ""))
    key = (rtype, redop, root)
    base = {
        "size_bytes": size,
        "count": count,
        "type": rtype,
        "redop": redop,
        "root": root,
        "cycle": next_cycle(st, key, size),
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
        unreadable(st, lineno, "no placement's columns fit")


_PLACEMENT_KEYS = {"time": "time_us", "algbw": "algbw_gbps", "busbw": "busbw_gbps"}


def _placement_row(
    st: RunState,
    lineno: int,
    layout: Layout,
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
            wrong = to_int(tok) if not fixed else None
            if wrong is None or wrong < 0:
                st.warn(f"line {lineno}: #wrong {shown(tok)} is not a count")
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
    why = inconsistent(
        base["size_bytes"], group[names.index("time")], values, exact=exact, ranks=st.n_ranks
    )
    if why is not None:
        st.warn(f"line {lineno}: {placement} columns do not fit each other ({why}): not read")
        return None
    return _new_row(values), ratio_range(group, names, values)
