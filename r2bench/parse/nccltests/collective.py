"""Which collective an nccl-tests output measured: from the binary's or file's name, from
what the output says (program, command or failure lines), or from the shape of its rows.
"""

from __future__ import annotations

import re

from r2bench.parse.models import CollectiveSource, ResultRow
from r2bench.parse.nccltests.state import RunState

# Bytes per element of each type name nccl-tests prints.
_TYPE_BYTES = {
    "int8": 1, "char": 1, "uint8": 1, "int32": 4, "int": 4, "uint32": 4, "int64": 8,
    "uint64": 8, "half": 2, "float16": 2, "float": 4, "float32": 4, "double": 8,
    "float64": 8, "bfloat16": 2, "f8e4m3": 1, "f8e5m2": 1,
}  # fmt: skip

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


def settle_collective(
    st: RunState, binary_name: str | None, file_name: str | None, columns: tuple[str, ...] | None
) -> None:
    """Name the run's collective when nothing in its output did: by what the output, the
    binary's name or the file's name says, where the rows' shape allows it, else by the shape
    alone when it fits one collective only."""
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
        if columns is None or "type" not in columns:
            # a table without its column names, or one cut to `size time algbw busbw
            # #wrong`: a blank redop says nothing
            return ()
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


def name_collective(st: RunState, collective: str | None, source: CollectiveSource) -> None:
    """Record the collective and how it was known; a source that names none changes nothing
    (the columns or the file name may still tell)."""
    if collective:
        st.fields.update(collective=collective, collective_from=source)
