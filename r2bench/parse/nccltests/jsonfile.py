"""The `-J` JSON file of an nccl-tests run (`parse_json`), including one cut short by a
crash: the results it completed are kept.
"""

from __future__ import annotations

import math
import re
from typing import Any

from r2bench.parse.models import Device, ParsedNcclTests, PerIteration, Placement, ResultRow
from r2bench.parse.nccltests.collective import collective_from_binary, name_collective
from r2bench.parse.nccltests.salvage import inconsistent, salvage_json_results
from r2bench.parse.nccltests.state import PLACEMENTS, RunState, finish_run, next_cycle
from r2bench.parse.numbers import (
    ID_MAX,
    INT64_MAX,
    MEASURE_MAX,
    BadNumber,
    bounded_float,
    bounded_int,
    shown,
)
from r2bench.safeio import TooDeep, json_loads


def parse_json(data: str | bytes) -> ParsedNcclTests:
    """Parse a `-J` JSON file. A file cut short (killed run) yields the results it completed."""
    st = RunState()
    if isinstance(data, bytes):
        data = data.decode("utf-8", errors="replace")
    try:
        doc = json_loads(data)
    except TooDeep:
        raise  # nothing to salvage: the caller refuses the file, named
    except ValueError as exc:
        st.warn(f"JSON is incomplete or invalid ({exc}); salvaging complete results")
        doc = {"results": salvage_json_results(data)}
        if re.search(r'^\s*\{\s*"(?:version|start_time|results)"\s*:', data):
            st.fields["header"] = True  # the start of an nccl-tests -J file, cut short
    if not isinstance(doc, dict):
        st.warn("JSON top level is not an object")
        return finish_run(st)
    per_iter = _json_document(st, doc)
    parsed = finish_run(st)
    return parsed.model_copy(update={"per_iteration": per_iter})


def _json_document(st: RunState, doc: dict[str, Any]) -> list[PerIteration]:
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
            per_iter.extend(_json_result(st, res, f"results[{i}]"))
        except (TypeError, ValueError, KeyError) as exc:  # BadNumber is a ValueError
            st.warn(f"results[{i}] malformed: {exc}; not read")
    return per_iter


def _json_header(st: RunState, doc: dict[str, Any], cfg: dict[str, Any]) -> None:
    args = doc.get("args")
    if isinstance(args, list) and args and isinstance(args[0], str):
        name_collective(st, collective_from_binary(args[0]), "json_args")
        st.fields["header"] = True
    lib = doc.get("nccl_version")
    if isinstance(lib, int):
        _header_int(st, "nccl_library", lib, "nccl_version")
    for src, dst in (
        ("nthreads", "n_threads"),
        ("ngpus", "n_gpus"),
        ("iterations", "iters"),
        ("warmup_iters", "warmup_iters"),
    ):
        if isinstance(cfg.get(src), int):
            _header_int(st, dst, cfg[src], f"config.{src}")
    if isinstance(cfg.get("validation"), int):
        st.fields["validation"] = bool(cfg["validation"])
    for dev in cfg.get("devices") or []:
        if isinstance(dev, dict):
            _json_device(st, dev)
    oob = doc.get("out_of_bounds")
    if (
        isinstance(oob, dict)
        and isinstance(oob.get("count"), int)
        and _header_int(st, "oob_values", oob["count"], "out_of_bounds.count")
    ):
        st.fields["oob_failed"] = oob["count"] > 0 or str(oob.get("okay")) == "false"
    avg = doc.get("average_bus_bandwidth")
    if isinstance(avg, dict) and isinstance(avg.get("bandwidth"), (int, float)):
        try:
            st.fields["avg_busbw_gbps"] = bounded_float(avg["bandwidth"], "bandwidth")
            st.fields["footer"] = True
        except BadNumber as refused:
            st.warn(f"average_bus_bandwidth: {refused}; not read")
    st.fields["concluded"] = "end_time" in doc
    version = doc.get("nccl_tests_version")
    if isinstance(version, str):
        st.fields["nccl_tests_version"] = version


def _header_int(st: RunState, field: str, value: int, where: str) -> bool:
    """Keep a whole number of the header in `field`, or warn (located) and leave it out."""
    try:
        st.fields[field] = bounded_int(value, where)
    except BadNumber as refused:
        st.warn(f"{refused}; not read")
        return False
    return True


def _device_id(dev: dict[str, Any], key: str) -> int | None:
    """A device entry's id (rank, pid...), None when absent; BadNumber when out of range."""
    if dev.get(key) is None:
        return None
    return bounded_int(dev[key], f"device {key}", low=-1, high=ID_MAX)


def _json_device(st: RunState, dev: dict[str, Any]) -> None:
    try:
        st.devices.append(
            Device(
                rank=_device_id(dev, "rank"),  # absent: refused by Device
                group=_device_id(dev, "group"),
                pid=_device_id(dev, "pid"),
                host=str(dev.get("hostname", "")),
                device=_device_id(dev, "device"),
                bus_id=dev.get("device_hex"),
                name=dev.get("device_info"),
            )
        )
    except (KeyError, ValueError) as exc:
        st.warn(f"device entry malformed: {exc}")


def _json_result(st: RunState, res: dict[str, Any], where: str) -> list[PerIteration]:
    size = bounded_int(res["size"], "size")
    root = bounded_int(res.get("root", -1), "root", low=-1)
    count = bounded_int(res.get("count", 0), "count")
    key = (str(res.get("type", "")), str(res.get("redop", "")), root)
    cycle = next_cycle(st, key, size)
    out: list[PerIteration] = []
    rows = []
    for placement in PLACEMENTS:
        meas = res.get(placement)
        if meas is not None and not isinstance(meas, dict):
            raise BadNumber(f"{placement} is not an object")
        if isinstance(meas, dict):
            row = _json_row(res, meas, placement, size, root, cycle, count)
            why = inconsistent(size, _time_text(row.time_us), _measured(row), exact=False,
                               ranks=st.n_ranks)  # fmt: skip
            if why is not None:
                # what the text reader refuses, the -J reader refuses too: the whole result,
                # as a text row whose columns do not fit is not read
                raise BadNumber(f"{placement} columns do not fit each other ({why})")
            rows.append(row)
        it = res.get(f"{placement}_per_iter")
        if isinstance(it, dict) and isinstance(it.get("times_us"), list):
            out.append(
                PerIteration(
                    size_bytes=size,
                    placement=placement,
                    times_us=tuple(
                        bounded_float(t, "times_us", low=-MEASURE_MAX) for t in it["times_us"]
                    ),
                    skipped_iterations=bounded_int(
                        it.get("skipped_iterations") or 0, "skipped_iterations"
                    ),
                    cycle=cycle,
                )
            )
    st.rows.extend(rows)
    return out


def _time_text(time_us: float | None) -> str:
    """A time as the text would print it (its last digit bounds the slack of the check)."""
    return "0" if time_us is None else f"{time_us:.6g}"


def _measured(row: ResultRow) -> dict[str, Any]:
    """The row's numbers the fit check reads: a NaN, infinite or negative one is left out
    (the tables empty and name it per run, `analysis.parsedrun`), the others checked."""
    values = {"time_us": row.time_us, "algbw_gbps": row.algbw_gbps, "busbw_gbps": row.busbw_gbps}
    return {
        k: v if v is not None and math.isfinite(v) and v >= 0 else None for k, v in values.items()
    }


def _json_row(
    res: dict[str, Any],
    meas: dict[str, Any],
    placement: Placement,
    size: int,
    root: int,
    cycle: int,
    count: int,
) -> ResultRow:
    """One placement's row. A number written as a string (`"nwrong": "3"`) is read as the
    number it spells; any other value that is not a number is refused (BadNumber, named)."""

    def num(key: str) -> float | None:
        val = meas.get(key)
        if val is None or (isinstance(val, str) and val.strip() in ("", "N/A")):
            return None  # not printed: N/A, as in the text
        if isinstance(val, float):
            # kept as written: NaN, infinite or negative ones are emptied and named per run
            # by the tables (analysis.parsedrun), never averaged
            return val
        return bounded_float(val, f"{placement}.{key}", low=-MEASURE_MAX)

    raw_wrong = meas.get("nwrong")
    if isinstance(raw_wrong, str) and raw_wrong.strip() not in ("", "N/A"):
        raw_wrong = bounded_float(raw_wrong, f"{placement}.nwrong", low=-MEASURE_MAX)
    elif raw_wrong is not None and not isinstance(raw_wrong, (int, float, str)):
        raise BadNumber(f"{placement}.nwrong {shown(raw_wrong)} is not a number")
    wrong = (
        bounded_int(raw_wrong, f"{placement}.nwrong", low=-INT64_MAX)  # negative: named later
        if isinstance(raw_wrong, (int, float)) and math.isfinite(raw_wrong)
        else None  # NaN, infinite or not printed: no count, as N/A in the text
    )
    return ResultRow(
        size_bytes=size,
        count=count,
        type=str(res.get("type", "")),
        redop=str(res.get("redop", "")),
        root=root,
        placement=placement,
        time_us=num("time"),
        algbw_gbps=num("alg_bw"),
        busbw_gbps=num("bus_bw"),
        wrong=wrong,
        cycle=cycle,
    )
