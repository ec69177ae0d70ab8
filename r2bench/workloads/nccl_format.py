"""nccl-tests' text and JSON (``-J``) output formats, for the emulated collective.

The column layout, number formatting and JSON keys follow nccl-tests 2.19.6 (``src/util.cu``)
so that the same parsers read both; the header says plainly that the numbers come from the
r2bench emulator, not from NCCL.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from r2bench.safeio import atomic_write

TIME_FORMAT = "%Y-%m-%d %H:%M:%S"
JSON_FILE_VERSION = 3
SIZE_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_size(text: str) -> int:
    """Parse an nccl-tests size: ``8``, ``1K``, ``64M``, ``1G`` (binary units, any case)."""
    text = text.strip()
    unit = text[-1:].upper() if text[-1:].isalpha() else ""
    if unit not in SIZE_UNITS:
        raise ValueError(f"invalid size {text!r}")
    number = float(text[: len(text) - len(unit)])
    if number < 0:
        raise ValueError(f"invalid size {text!r}")
    return int(number * SIZE_UNITS[unit])


def float_str(value: float, width: int) -> str:
    """nccl-tests' ``getFloatStr``: the most precise of %.2f/%.1f/%.0f that fits ``width``."""
    for fmt in ("{:>{w}.2f}", "{:>{w}.1f}", "{:>{w}.0f}"):
        text = fmt.format(value, w=width)
        if len(text) <= width:
            return text
    return (f"{value:>{width}.1e}" if width >= 7 else f"{value:>{width}.0e}")[:width]


def now_string() -> str:
    """Local time as nccl-tests prints it."""
    return time.strftime(TIME_FORMAT)


def bus_bandwidth(nbytes: int, seconds: float, nranks: int) -> tuple[float, float]:
    """AllReduce (algbw, busbw) in GB/s, nccl-tests' formula: busbw = algbw * 2(n-1)/n."""
    algbw = nbytes / 1.0e9 / seconds if seconds > 0 else 0.0
    return algbw, algbw * (2.0 * (nranks - 1)) / nranks


@dataclass(frozen=True)
class DeviceInfo:
    """One ``#  Rank ...`` line of the ``# Using devices`` block."""

    rank: int
    pid: int
    hostname: str
    device_info: str
    group: int = 0
    device: int = 0
    device_hex: str = "0000:00:00"

    def line(self) -> str:
        """The text line, as nccl-tests prints it."""
        return (
            f"#  Rank {self.rank:2d} Group {self.group:2d} Pid {self.pid:6d} on "
            f"{self.hostname:>10s} device {self.device:2d} [{self.device_hex}] {self.device_info}"
        )

    def as_json(self) -> dict[str, Any]:
        """The JSON ``config.devices`` entry."""
        return {
            "rank": self.rank,
            "group": self.group,
            "pid": self.pid,
            "hostname": self.hostname,
            "device": self.device,
            "device_hex": self.device_hex,
            "device_info": self.device_info,
        }


@dataclass(frozen=True)
class RunConfig:
    """The run parameters shown in the header and in JSON ``config``."""

    program: str
    banner: str
    min_bytes: int
    max_bytes: int
    step_factor: int
    step_bytes: int
    warmup_iters: int
    iters: int
    check: int
    per_iter: bool

    def step_text(self) -> str:
        """``2(factor)`` or ``1048576(bytes)``."""
        if self.step_factor > 1:
            return f"{self.step_factor}(factor)"
        return f"{self.step_bytes}(bytes)"


def header_lines(cfg: RunConfig, devices: list[DeviceInfo]) -> list[str]:
    """Everything printed before the column header."""
    lines = [
        f"# {cfg.banner}",
        f"# Collective test starting: {cfg.program}",
        f"# nThread 1 nGpus 1 minBytes {cfg.min_bytes} maxBytes {cfg.max_bytes} "
        f"step: {cfg.step_text()} warmup iters: {cfg.warmup_iters} iters: {cfg.iters} "
        f"agg iters: 1 validation: {cfg.check} graph: 0 unalign: 0",
    ]
    if cfg.per_iter:
        lines.append(
            "# Per-Iteration Report: wall-clock timing (emulator); i_* uses max over process rows "
        )
    lines += ["#", "# Using devices", *(d.line() for d in devices)]
    return lines


def column_header(per_iter: bool, timestamps: bool) -> list[str]:
    """The ``#`` line and the two column-title lines."""
    ts_label, ts_fmt = ("timestamp", TIME_FORMAT) if timestamps else ("", "")
    pad = 19 if timestamps else 0
    lead = "# {:>10s}  {:>12s}  {:>8s}  {:>6s}  {:>6s}"
    if per_iter:
        titles = lead.format("", "", "", "", "") + (
            "              out-of-place (+ per-iteration)"
            "                                in-place (+ per-iteration)"
        )
        block = "  {:>7s}  {:>6s}  {:>6s}  {:>6s}  {:>7s}  {:>7s}  {:>7s}  {:>7s}"
        names: tuple[str, ...] = ("time", "algbw", "busbw", "#wrong")
        names += ("i_min", "i_max", "i_p99", "i_cv%")
        units: tuple[str, ...] = ("(us)", "(GB/s)", "(GB/s)", "", "(us)", "(us)", "(us)", "(%)")
    else:
        titles = lead.format("", "", "", "", "") + (
            "           out-of-place                       in-place          "
        )
        block = "  {:>7s}  {:>6s}  {:>6s}  {:>6s}"
        names = ("time", "algbw", "busbw", "#wrong")
        units = ("(us)", "(GB/s)", "(GB/s)", "")
    row1 = lead.format("size", "count", "type", "redop", "root") + block.format(*names) * 2
    row2 = lead.format("(B)", "(elements)", "", "", "") + block.format(*units) * 2
    return ["#", titles, f"{row1} {ts_label:>{pad}s}", f"{row2} {ts_fmt:>{pad}s}"]


@dataclass(frozen=True)
class IterStats:
    """Per-iteration summary (seconds), as nccl-tests' ``computeIterStats``."""

    min: float
    max: float
    avg: float
    p50: float
    p95: float
    p99: float
    stdev: float

    @staticmethod
    def of(times: list[float]) -> IterStats:
        """Summarise a non-empty list of per-iteration times."""
        ordered = sorted(times)
        n = len(ordered)

        def pct(p: int) -> float:
            return ordered[min(n - 1, (n * p + 99) // 100 - 1)]

        avg = sum(ordered) / n
        stdev = math.sqrt(sum((t - avg) ** 2 for t in ordered) / n)
        return IterStats(ordered[0], ordered[-1], avg, ordered[n // 2], pct(95), pct(99), stdev)

    def cv_pct(self) -> float:
        """Coefficient of variation in percent."""
        return self.stdev / self.avg * 100.0 if self.avg > 0 else 0.0


@dataclass
class Measure:
    """One out-of-place or in-place result of one row."""

    time_us: float
    algbw: float
    busbw: float
    wrong: int | None
    iter_times: list[float] | None = None  # seconds, max over ranks per iteration
    per_process: list[list[float]] | None = None  # seconds, [rank][iteration]

    def text(self) -> str:
        """The time/algbw/busbw/#wrong columns (+ per-iteration columns)."""
        out = f"  {float_str(self.time_us, 7)}  {float_str(self.algbw, 6)}  "
        out += f"{float_str(self.busbw, 6)}  "
        out += f"{float(self.wrong):6g}" if self.wrong is not None else "   N/A"
        if self.iter_times:
            st = IterStats.of(self.iter_times)
            cols = (st.min * 1e6, st.max * 1e6, st.p99 * 1e6, st.cv_pct())
            out += "".join(f"  {float_str(v, 7)}" for v in cols)
        return out

    def as_json(self) -> dict[str, Any]:
        """The ``out_of_place``/``in_place`` JSON object."""
        return {
            "time": self.time_us,
            "alg_bw": self.algbw,
            "bus_bw": self.busbw,
            "nwrong": None if self.wrong is None else float(self.wrong),
        }

    def per_iter_json(self) -> dict[str, Any] | None:
        """The ``*_per_iter`` JSON object, or None without ``-I 1``."""
        if not self.iter_times:
            return None
        st = IterStats.of(self.iter_times)
        doc: dict[str, Any] = {"skipped_iterations": 0}
        for key in ("min", "max", "avg", "p50", "p95", "p99", "stdev"):
            doc[f"{key}_us"] = getattr(st, key) * 1e6
        doc["cv_pct"] = st.cv_pct()
        doc["times_us"] = [t * 1e6 for t in self.iter_times]
        if self.per_process and len(self.per_process) > 1:
            doc["per_process_max_times_us"] = [[t * 1e6 for t in row] for row in self.per_process]
        return doc


@dataclass
class Row:
    """One result line: size, count, type, redop, root and the two measures."""

    nbytes: int
    count: int
    out_of_place: Measure
    in_place: Measure
    dtype: str = "float"
    redop: str = "sum"
    root: int = -1

    def text(self, timestamps: bool) -> str:
        """The full text line."""
        line = f"{self.nbytes:12d}  {self.count:12d}  {self.dtype:>8s}  {self.redop:>6s}  "
        line += f"{self.root:6d}{self.out_of_place.text()}{self.in_place.text()}"
        return line + (f"{now_string():>21s}" if timestamps else "")

    def as_json(self, iterations: int) -> dict[str, Any]:
        """The ``results`` entry."""
        doc: dict[str, Any] = {
            "size": self.nbytes,
            "count": self.count,
            "type": self.dtype,
            "redop": self.redop,
            "root": f"{self.root:6d}",
        }
        for key, measure in (("out_of_place", self.out_of_place), ("in_place", self.in_place)):
            doc[key] = measure.as_json()
            per_iter = measure.per_iter_json()
            if per_iter is not None:
                doc[f"{key}_per_iter"] = per_iter
        doc["actual_iterations"] = iterations
        doc["experiment_name"] = ""
        return doc


def footer_lines(
    errors: int, avg_busbw: float, program: str, verification: list[str] | None = None
) -> list[str]:
    """Lines after the last row (nccl-tests' footer, without a min-bandwidth check), with a
    verifying workload's summary lines (`verification_lines`) before the concluding line."""
    return [
        f"# {'Out of bounds values':<20s} : {errors} {'FAILED' if errors else 'OK'}",
        f"# {'Avg bus bandwidth':<20s} : {avg_busbw:g} ",
        "#",
        *(verification or []),
        f"# Collective test concluded: {program}",
        "#",
        "",
    ]


# ---- the verification records (docs/verify.md; read by r2bench.parse.verify) -------------
ITER_TAG = "#iter"
SUMMARY_TAG = "#verify"
CORRUPT_VAR = "R2B_VERIFY_CORRUPT"


@dataclass(frozen=True)
class IterationLine:
    """One timed iteration: the `#iter` JSON line a verifying workload prints on rank 0."""

    iter: int  # timed iterations counted from 0 over all sizes, placements and cycles
    cycle: int
    size: int
    start: float  # rank 0's wall clock (unix s) when it launched the collective
    end: float  # ... and when it completed there
    seconds: float  # the iteration's time (rank 0's)
    wrong: int | None  # mismatches summed over ranks; None with the check off (-c 0)
    elements: int  # elements checked per rank
    ranks: int
    check_s: float | None = None  # the check's own time (slowest rank)

    def text(self) -> str:
        """`#iter {...}`: one JSON object, keys in a fixed order."""
        doc = {
            "iter": self.iter,
            "cycle": self.cycle,
            "size": self.size,
            "start": round(self.start, 6),
            "end": round(self.end, 6),
            "seconds": self.seconds,
            "check_s": self.check_s,
            "wrong": self.wrong,
            "elements": self.elements,
            "ranks": self.ranks,
        }
        return f"{ITER_TAG} {json.dumps(doc)}"


def verification_lines(
    program: str,
    collective: str,
    checked: bool,
    ranks: int,
    iterations: int,
    elements: int,
    wrong_by_iteration: dict[int, int],
) -> list[str]:
    """The human summary line and the `#verify {...}` JSON line (`wrong_by_iteration`: the
    iterations with wrong elements and how many)."""
    wrong = sum(wrong_by_iteration.values())
    listed = sorted(wrong_by_iteration)
    if checked:
        where = f" in iterations {listed}" if listed else ""
        human = (
            f"# Verification: every element of each of the {iterations} timed iterations "
            f"checked on all {ranks} ranks (up to {elements} elements per rank): "
            f"{wrong} wrong{where}"
        )
    else:
        human = f"# Verification: off (-c 0): none of the {iterations} timed iterations was checked"
    doc = {
        "program": program,
        "collective": collective,
        "checked": checked,
        "ranks": ranks,
        "iterations": iterations,
        "elements": elements,
        "wrong": wrong,
        "wrong_iterations": listed,
    }
    return [human, f"{SUMMARY_TAG} {json.dumps(doc)}"]


def parse_corrupt(text: str | None, ranks: int) -> tuple[int, int] | None:
    """The self-test's target from `R2B_VERIFY_CORRUPT` / `--corrupt`: `ITER` or `ITER:RANK`
    (timed iteration from 0; rank default the last) -> (iteration, rank); None when unset."""
    if text is None or not text.strip():
        return None
    it, _, rank = text.strip().partition(":")
    if not it.isdigit() or (rank and not rank.isdigit()):
        raise ValueError(f"{CORRUPT_VAR}={text!r}: expected ITER or ITER:RANK (0-based)")
    victim = int(rank) if rank else ranks - 1
    if victim >= ranks:
        raise ValueError(f"{CORRUPT_VAR}={text!r}: rank {victim} of {ranks} ranks")
    return int(it), victim


def _claim_path(path: str) -> str | None:
    """Create ``path`` exclusively, else ``path.0``, ``path.1``... (nccl-tests' probing)."""
    candidate, tries = path, 0
    while True:
        try:
            with open(candidate, "x"):
                return candidate
        except FileExistsError:
            candidate = f"{path}.{tries}"
            tries += 1
        except OSError:
            return None


@dataclass
class JsonReport:
    """The ``-J`` JSON document, rewritten atomically as rows arrive (at most once a second)."""

    path: str
    doc: dict[str, Any] = field(default_factory=dict)
    last_write: float = 0.0

    @staticmethod
    def open(path: str, argv: list[str], env: dict[str, str]) -> tuple[JsonReport | None, str]:
        """Claim the output file; returns the report (None if not writable) and a status line."""
        claimed = _claim_path(path)
        if claimed is None:
            return None, f"# skipping json output; {path} not accessible"
        doc: dict[str, Any] = {
            "version": JSON_FILE_VERSION,
            "start_time": now_string(),
            "args": list(argv),
            "env": [f"{k}={v}" for k, v in env.items()],
            "nccl_version": 0,
            "emulator": "r2bench ring_allreduce (emulated collective over TCP, not NCCL)",
        }
        return JsonReport(claimed, doc), f"# Writing JSON output to {claimed}"

    def set_config(self, cfg: RunConfig, devices: list[DeviceInfo]) -> None:
        """Fill ``config`` (with ``devices``) and open ``results``."""
        step = {"step_factor": cfg.step_factor} if cfg.step_factor > 1 else {}
        self.doc["config"] = {
            "nthreads": 1,
            "ngpus": 1,
            "minimum_bytes": cfg.min_bytes,
            "maximum_bytes": cfg.max_bytes,
            **(step or {"step_bytes": cfg.step_bytes}),
            "warmup_iters": cfg.warmup_iters,
            "iterations": cfg.iters,
            "aggregated_iterations": 1,
            "validation": cfg.check,
            "graph": 0,
            "blocking_collectives": "false",
            "per_iter_timing": "true" if cfg.per_iter else "false",
            "per_iter_skip": 0,
            "parallel_init": "false",
            "devices": [d.as_json() for d in devices],
        }
        self.doc["results"] = []
        self.flush()

    def add_row(self, row: Row, iterations: int) -> None:
        """Append a result and rewrite the file if a second has passed."""
        self.doc["results"].append(row.as_json(iterations))
        if time.monotonic() - self.last_write >= 1.0:
            self.flush()

    def finish(self, errors: int, avg_busbw: float, error_text: str | None = None) -> None:
        """Add the summary, ``errors`` and ``end_time``, and write the final file."""
        self.doc["out_of_bounds"] = {"count": errors, "okay": "true" if errors == 0 else "false"}
        self.doc["average_bus_bandwidth"] = {"bandwidth": avg_busbw, "okay": "unchecked"}
        self.doc["errors"] = [error_text] if error_text else []
        self.doc["end_time"] = now_string()
        self.flush()

    def flush(self) -> None:
        """Write the document atomically (temporary file + rename)."""
        atomic_write(Path(self.path), json.dumps(self.doc, indent=1), durable=False)
        self.last_write = time.monotonic()
