"""One run folder, parsed once: the model every analysis reads.

A `ParsedRun` holds a run's nccl-tests results, its log events, its outcome, the transport
NCCL set up, and everything put on the controller's clock once (`RunClock`: each node's
offset, measured before the run, is subtracted here and nowhere else): the time of every
result row, the fault windows (`fault_windows`) and the completed measurements
(`measurement_samples`) that the recovery metrics are computed on. Tables, recovery metrics,
the report and the figures all start from this module; it needs neither pandas nor numpy, so
the sweep parses a run with it on a node without the `report` extra.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import timezone
from operator import attrgetter
from pathlib import Path
from typing import Any

from r2bench.analysis.armed import MAX_KEPT_LINES, is_failover_line
from r2bench.analysis.attempts import last_attempt_events
from r2bench.analysis.decision import JobFacts, decide, revisit
from r2bench.analysis.evidence import (
    FaultEvidence,
    Iterations,
    IterationTraffic,
    cap_rates,
    fault_evidence,
    iteration_traffic,
)
from r2bench.analysis.jobend import JobEnd, job_end
from r2bench.analysis.recovery_cost import parse_attempts
from r2bench.analysis.training import FaultHit, fault_hit, update_windows
from r2bench.analysis.windows import FaultWindow, fault_windows
from r2bench.parse.bandwidth import bus_factor_of, precise_results
from r2bench.parse.events import parse_events
from r2bench.parse.iterlines import LoggedBlock, logged_blocks
from r2bench.parse.models import (
    Event,
    Outcome,
    ParsedNcclTests,
    PerIteration,
    ResultRow,
)
from r2bench.parse.nccltests.jsonfile import parse_json
from r2bench.parse.nccltests.runs import combine
from r2bench.parse.nccltests.text import parse_text
from r2bench.parse.nictraffic import (
    CounterLines,
    NicKey,
    NicSeries,
    read_counter_lines,
    series_of,
)
from r2bench.parse.r2ccl_artifact import ArtifactError, looks_like_artifact, read_artifact
from r2bench.parse.training import TAG as TRAINING_TAG
from r2bench.parse.training import TrainingLog, read_training
from r2bench.parse.verify import Verification, read_verification
from r2bench.runfolder import runformat, runmodel
from r2bench.safeio import JSON_RECORD_LIMIT, InputRefused, read_text_bounded

LAST_IN_SECOND = 0.999  # a row stamped ts ended before ts + 1
LINE_STAMP_RESOLUTION = 0.001  # a row stamped when its line was written ended just before
ARRIVAL_RESOLUTION_S = 1e-3  # a line stamped on arrival: pipe and mpirun forwarding, ~1 ms
STDERR_TIMES = "stderr.times"
TIMES_LIMIT = 64 << 20
"""Largest arrival-times file read (about 3.5 million lines, under 250 MB parsed); a larger one
is not used: the rows' own stamps are."""
RESULT_VALUES = ("time_us", "algbw_gbps", "busbw_gbps", "wrong")
# `via NET/Socket/0`, `via P2P/CUMEM`, `via SHM/direct/direct`: NCCL INFO channel set-up lines.
_VIA_RE = re.compile(rb"\] via ([A-Za-z][A-Za-z0-9_]*(?:/[A-Za-z][A-Za-z0-9_]*)?)")
# The emulator's banner (`r2bench.workloads.ring_allreduce.banner`): it logs no `via` line.
_EMULATED_RE = re.compile(rb"^# r2bench emulated .*: (TCP) over \d+ NIC")
EMULATED_TRANSPORT = "TCP (emulated)"
_OWN_STAMP_RE = re.compile(r"^\[(?P<ts>[^\]]{1,64})\]")
_EPOCH_STAMP_RE = re.compile(r"^\d{9,11}(?:\.(?P<frac>\d+))?$")
_DATE_STAMP_RE = re.compile(r"^\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,](?P<frac>\d{1,9}))?")

RowKey = tuple[int, str, int]
"""(size in bytes, placement, cycle): one result row of a run."""


# --------------------------------------------------------------------------- the clock


@dataclass(frozen=True)
class RunClock:
    """Puts a run's node times on the controller's clock.

    `offsets`: node clock minus controller clock per node, measured before the run (the
    `clock_offset_s` of faults.jsonl); `launch_node`: where mpirun ran (stdout.times and
    stderr.times are its arrival times); `utc_offset_s`: what the node's local-time `-S` and
    `[%F %T]` stamps differ from UTC by (provenance `node_utc_offset_s`)."""

    offsets: Mapping[str, float] = field(default_factory=dict)
    launch_node: str | None = None
    utc_offset_s: float = 0.0

    @classmethod
    def of_record(cls, record: runmodel.RunRecord) -> RunClock:
        """The clock of a run folder: offsets from its fault events, the launch node from
        spec.json, the UTC offset from provenance.json."""
        offsets = {f.node: f.clock_offset_s for f in record.faults if f.clock_offset_s is not None}
        nodes = record.spec.nodes
        utc = float(record.provenance.get("node_utc_offset_s") or 0.0)
        return cls(offsets, str(nodes[0]) if nodes else None, utc)

    @property
    def launch_offset(self) -> float:
        """The launch node's offset (0 when not measured)."""
        return self.offsets.get(self.launch_node or "", 0.0)

    def offset(self, node: str | None) -> float:
        """A node's offset; the launch node's for a node not measured."""
        return self.offsets.get(node or "", self.launch_offset)

    def of_row(self, row: ResultRow, stamps: list[float] | None) -> float:
        """When a result row's line was written, on the controller clock: its arrival on the
        launch node (a sweep's `stdout.times`), else its `-S` stamp; NaN when neither."""
        if stamps and row.line and row.line <= len(stamps):
            return stamps[row.line - 1] - self.launch_offset
        if row.timestamp is None:
            return math.nan
        epoch = row.timestamp.replace(tzinfo=timezone.utc).timestamp() - self.utc_offset_s
        return float(epoch - self.launch_offset)

    def of_event(self, event: Event) -> tuple[float, float] | None:
        """(controller time, resolution in s) of a log line's own stamp, or None: `[epoch]`
        stamps are UTC, `[%F %T]` stamps the node's local time."""
        stamp = stamp_resolution(event.text)
        if event.time is None or stamp is None:
            return None
        epoch, resolution = stamp
        utc = 0.0 if epoch else self.utc_offset_s
        return event.time - utc - self.offset(event.host), resolution


def stamp_resolution(text: str) -> tuple[bool, float] | None:
    """(epoch form, resolution in s) of a line's own `[...]` stamp, or None."""
    m = _OWN_STAMP_RE.match(text)
    if m is None:
        return None
    ts = m.group("ts").strip()
    for rx, epoch in ((_EPOCH_STAMP_RE, True), (_DATE_STAMP_RE, False)):
        if (mm := rx.match(ts)) is not None:
            frac = mm.group("frac")
            return epoch, 10.0 ** -len(frac) if frac else 1.0
    return None


def read_times(record: runmodel.RunRecord, name: str) -> list[float] | None:
    """The arrival time of every line of a log (`stdout.times`, `stderr.times`), or None."""
    path = record.file(name)
    if path is None:
        return None
    try:
        text = read_text_bounded(path, TIMES_LIMIT, name)
        return [float(x) for x in text.split()]
    except (OSError, ValueError, InputRefused):
        return None  # no arrival times: the rows' own stamps are used


# --------------------------------------------------------------------------- samples


@dataclass(frozen=True)
class Sample:
    """One completed measurement (an iteration with -I 1, else a result row)."""

    start: float
    end: float
    size: int
    busbw: float


# --------------------------------------------------------------------------- parsing


def parse_outputs(
    text_path: Path | None,
    json_path: Path | None,
    collective: str | None = None,
    transports: TransportTap | None = None,
) -> ParsedNcclTests:
    """nccl-tests results of a run from its text output and/or -J JSON (either may be None);
    `transports` gathers what the text output says of them on the same pass."""
    text = _parse_text_file(text_path, collective, transports) if text_path else None
    try:
        js = _parse_json_file(json_path) if json_path else None
    except runmodel.RecordError as exc:
        if text is None:
            raise
        # a -J twin r2bench refuses costs the run nothing its text holds
        text.warnings.append(f"{exc}; the text output's results are used")
        js = None
    if text is not None and js is not None:
        return combine(text, js)
    return text or js or ParsedNcclTests()


def _parse_json_file(path: Path) -> ParsedNcclTests:
    """A `-J` file, size-capped; too deep a nesting is a RecordError naming the file (a file
    cut short is no error: its complete results are salvaged)."""
    try:
        text = read_text_bounded(path, JSON_RECORD_LIMIT, path.name)
    except InputRefused as exc:
        raise runmodel.RecordError(str(exc)) from None
    try:
        return parse_json(text)
    except RecursionError:
        raise runmodel.RecordError(f"{path}: nested too deeply to read") from None
    except (ValueError, TypeError, OverflowError, KeyError, IndexError) as exc:
        # a value of a type or size the file cannot mean: this run only, never the sweep
        raise runmodel.RecordError(f"{path}: a value it cannot hold ({exc})") from None


def _parse_text_file(
    path: Path, collective: str | None, transports: TransportTap | None
) -> ParsedNcclTests:
    binary = f"{collective}_perf" if collective else None
    with path.open("rb") as handle:
        lines = (transports or TransportTap()).passing(handle)
        parsed = parse_text(without_training(lines), binary_name=binary)
        _to_end(lines)
    if not parsed.rows and looks_like_artifact(path):
        # R-2CCL's own hot-repair program (its artifact harness): iterations, ranks, devices
        try:
            runs = read_artifact(path).hot_repair_runs
        except ArtifactError:
            return parsed  # a contradicting log: `import` and `parse` say where and why
        if runs:
            return runs[0].as_parsed()
    return parsed


def log_events(
    paths: Iterable[Path], transports: TransportTap | None = None
) -> list[tuple[str, Event]]:
    """(source file name, event) of every log, streamed line by line; `transports` gathers
    what the logs say of them on the same pass."""
    out: list[tuple[str, Event]] = []
    tap = transports or TransportTap()
    for path in paths:
        with path.open("rb") as handle:
            lines = tap.passing(handle)
            out.extend((path.name, ev) for ev in parse_events(without_training(lines)))
            _to_end(lines)
    return out


def without_training(lines: Iterable[bytes]) -> Iterator[bytes]:
    """The lines, a training workload's `#train` lines blanked (kept, empty, so every other
    line keeps its number): they are `parse.training`'s, nothing nccl-tests' or the events'
    parsers look for, and a long job prints 100,000 of them."""
    for line in lines:
        yield b"\n" if TRAINING_TAG in line else line


def _to_end(lines: Iterator[bytes]) -> None:
    """Read what is left of a tapped log: the tap sees every line, wherever its reader
    stopped."""
    for _ in lines:
        pass


class TransportTap:
    """The transports NCCL said it set up (`... via NET/Socket/0`, `via P2P/CUMEM`), or the
    emulator's banner says it uses (`TCP over 4 NIC(s)`), gathered from log lines as another
    reader passes over them: each log is read once."""

    def __init__(self) -> None:
        self.found: set[str] = set()
        self.failover_lines: list[str] = []
        """The lines `analysis.armed` reads (a fused device, a single-device warning, ...)."""

    def passing(self, lines: Iterable[bytes]) -> Iterator[bytes]:
        """The lines, unchanged, each looked at on the way."""
        for line in lines:
            if len(self.failover_lines) < MAX_KEPT_LINES and is_failover_line(line):
                self.failover_lines.append(line.decode("utf-8", "replace").rstrip())
            if b"] via " in line:
                for match in _VIA_RE.finditer(line):
                    name = match.group(1).decode("ascii", "replace")
                    head, _, sub = name.partition("/")
                    self.found.add(f"{head}/{sub}" if head == "NET" and sub else head)
            elif line.startswith(b"# r2bench emulated ") and _EMULATED_RE.match(line):
                self.found.add(EMULATED_TRANSPORT)
            yield line

    def read(self, path: Path) -> None:
        """Look at every line of a log no other reader passes over."""
        with path.open("rb") as handle:
            _to_end(self.passing(handle))

    @property
    def transport(self) -> str | None:
        """`NET/Socket`, `NET/IB`, `P2P`, `SHM` (or the emulator's `TCP (emulated)`) joined by
        `+`; None when the logs say none: not logged (NCCL_DEBUG=INFO prints them)."""
        return "+".join(sorted(self.found)) or None


@dataclass
class ParsedRun:
    """One run folder, parsed once: results (values no measurement can have emptied), events,
    outcome, transport, and the run's times on the controller clock."""

    record: runmodel.RunRecord
    parsed: ParsedNcclTests
    events: list[tuple[str, Event]]
    outcome: Outcome | None
    transport: str | None = None
    """What the logs say NCCL set up (`TransportTap`); None: not logged."""
    clock: RunClock = field(default_factory=RunClock)
    stdout_times: list[float] | None = None
    """Arrival of every stdout line on the launch node (a sweep's `stdout.times`)."""
    row_times: dict[RowKey, tuple[float, float]] = field(default_factory=dict)
    """Per result row: (when its line was written on the controller clock, busbw/algbw)."""
    windows: list[FaultWindow] = field(default_factory=list)
    refused_values: int = 0
    """Result values not finite or negative, emptied (never averaged)."""
    evidence: list[FaultEvidence] = field(default_factory=list)
    """Per NIC fault window: did it hit live traffic (`analysis.evidence`)."""
    traffic: list[IterationTraffic] = field(default_factory=list)
    """Of a run with a NIC fault: bytes each NIC moved in each measured collective."""
    counter_lines: CounterLines = field(default_factory=dict)
    """Each node's NIC counter samples (`counters.tsv`), read once."""
    measured: tuple[list[Sample], str, float] | None = field(default=None, repr=False)
    """`measurement_samples` of this run, computed once (evidence and metrics share it)."""
    verification: Verification | None = None
    """What a verifying workload checked (its `#iter` and `#verify` lines, `parse.verify`)."""
    logged: list[LoggedBlock] = field(default_factory=list)
    """Per-iteration times of the sizes the `-J` results lack, from the workload's `#iter`
    lines (`parse.iterlines`): a crashed run's last size, whose row never printed."""
    job_end: JobEnd | None = None
    """When the job ended (`analysis.jobend`): its fault windows end no later."""
    bus_factor: float | None = None
    """busbw/algbw of the run's collective at its rank count (None when either is unknown)."""
    training: TrainingLog | None = None
    """A training workload's log (`parse.training`): its updates are the run's iterations."""
    training_hit: FaultHit | None = None
    """Of a training run dealt a fault: the update its first fault hit (`analysis.training`)."""
    failover_lines: tuple[str, ...] = ()
    """The log lines that say whether failover could work (`analysis.armed`)."""

    @property
    def outcome_status(self) -> str | None:
        """The outcome's status value (None for an incomplete run)."""
        return self.outcome.status.value if self.outcome else None


@dataclass(frozen=True)
class RunOutputs:
    """What a run's output files say, each file read once: its nccl-tests results (as parsed,
    before `checked_results`), its events when they come from the logs, the verifying
    workload's account and the transports NCCL set up. The sweep reads them to classify a run
    and hands them on (`parse_run`), so a run's logs are not parsed again for its rows."""

    parsed: ParsedNcclTests
    log_events: list[tuple[str, Event]] | None
    """(source file, event) parsed from stdout and stderr; None: the events are events.jsonl's."""
    verification: Verification | None
    transport: str | None
    """None: not logged."""
    training: TrainingLog | None = None
    """A training workload's log (stdout's `#train` lines, stderr's stubs called)."""
    training_read: bool = False
    """Whether `training` was read (else `parse_run` reads it from the folder)."""
    failover_lines: tuple[str, ...] = ()
    """The log lines `analysis.armed` reads (`TransportTap.failover_lines`)."""


def read_outputs(record: runmodel.RunRecord) -> RunOutputs:
    """A run folder's output files, each read once (stdout is also searched for a verifying
    workload's account)."""
    stdout, stderr = record.file(runformat.STDOUT), record.file(runformat.STDERR)
    transports = TransportTap()
    parsed = parse_outputs(
        stdout, record.file(runformat.RESULT_JSON), record.spec.collective, transports
    )
    events = None
    if not record.file(runformat.EVENTS):
        events = log_events([p for p in (stdout, stderr) if p], transports)
    elif stderr:
        transports.read(stderr)
    return RunOutputs(
        parsed, events, read_verification(stdout, _workload(record)), transports.transport,
        read_training(stdout, stderr), training_read=True,
        failover_lines=tuple(transports.failover_lines),
    )  # fmt: skip


def _workload(record: runmodel.RunRecord) -> str | None:
    """The workload the run's spec names (its recipe), None when it names none."""
    benchmark = record.spec.benchmark
    return benchmark.recipe if benchmark is not None else None


def parse_run(
    record: runmodel.RunRecord, outputs: RunOutputs | None = None, job: JobFacts | None = None
) -> ParsedRun:
    """Parse a run folder once (its output files as `outputs` says, when given). The outcome
    is outcome.json's (`decision.revisit`); without one it is decided here (`decision.decide`)
    for a complete run, and for a run the sweep just finished (`job`: what the sweep saw of
    it); an incomplete run's stays None."""
    if outputs is None:
        outputs = read_outputs(record)
    parsed, refused = checked_results(outputs.parsed)
    collective = record.spec.collective or parsed.collective
    ranks = parsed.ranks or (outputs.verification.ranks if outputs.verification else None)
    factor = bus_factor_of(collective, ranks)
    parsed = precise_results(parsed, collective, ranks)
    events = outputs.log_events
    if events is None:
        events = [(runformat.EVENTS, ev) for ev in record.events()]
    clock = RunClock.of_record(record)
    stamps = read_times(record, runformat.STDOUT_TIMES)
    end = record.end
    ended_at = end.ended_at if end else (job.ended_at if job else None)
    run = ParsedRun(
        record,
        parsed,
        events,
        None,
        outputs.transport,
        clock,
        stamps,
        {key_of(r): (clock.of_row(r, stamps), factor or bus_factor(r)) for r in parsed.rows},
        fault_windows(record.faults, ended_at),
        refused,
    )
    run.bus_factor = factor
    run.verification = outputs.verification
    run.failover_lines = outputs.failover_lines
    run.training = (
        outputs.training
        if outputs.training_read
        else read_training(record.file(runformat.STDOUT), record.file(runformat.STDERR))
    )
    options = record.spec.options
    run.logged = logged_blocks(
        run.verification,
        (key_of(p) for p in parsed.per_iteration),
        (options.iterations if options else None) or parsed.iters,
        clock.launch_offset,
    )
    run.counter_lines = read_counter_lines(record.node_files())
    if any(w.nic for w in run.windows):
        series = counter_series(run)
        # Without counters every verdict is `unknown`: no need to place the iterations.
        iterations = iteration_windows(run) if series else []
        run.evidence = fault_evidence(
            run.windows,
            series,
            iterations,
            ended_at,
            cap_rates(record.spec.faults or []),
            finished=(run.verification is not None and run.verification.complete)
            or (run.training is not None and run.training.complete),
        )
        run.traffic = iteration_traffic(series, iterations, run.windows, ended_at)
    if run.training is not None and run.windows:
        updates = update_windows(run.training, clock.launch_offset)
        run.training_hit = fault_hit(run.windows, run.evidence, updates, run.training.complete)
    if end is not None:
        run.outcome = revisit(end.outcome, run.verification, run.evidence, run.training)
    elif record.complete or job is not None:
        run.outcome = decide(
            parsed,
            deciding_events(record, events, stamps),
            env=record.spec.env,
            verification=run.verification,
            evidence=run.evidence,
            job=job,
            training=run.training,
        )
    run.job_end = job_end(
        ended_at,
        run.outcome.status if run.outcome else None,
        ranks_last_seen(run),
        (w.applied for w in run.windows),
    )
    return run


def deciding_events(
    record: runmodel.RunRecord, events: list[tuple[str, Event]], stdout_times: list[float] | None
) -> list[tuple[str, Event]]:
    """The events the outcome is decided on: a restarted job's last start's (`analysis.attempts`)."""
    path = record.file(runformat.ATTEMPTS)
    if path is None:
        return events
    launches = [a.launched_at for a in parse_attempts(path.read_text(errors="replace"))]
    arrivals = {
        runformat.STDOUT: stdout_times,
        runformat.STDERR: read_times(record, runformat.STDERR_TIMES),
    }
    return last_attempt_events(events, launches, arrivals)


def ranks_last_seen(run: ParsedRun) -> list[float]:
    """Times the run's ranks were heard from, on the controller clock: the arrival of their
    last stdout line, and every NCCL log line with its own stamp and a process id."""
    seen = [run.stdout_times[-1] - run.clock.launch_offset] if run.stdout_times else []
    for _, event in run.events:
        when = run.clock.of_event(event) if event.pid is not None else None
        if when is not None:
            seen.append(when[0])
    return seen


def verified_iterations(verification: Verification | None, offset: float) -> Iterations:
    """The workload's own iteration times on the controller clock (`offset`: the launch
    node's), in time order; empty without a verifying workload."""
    records = verification.samples if verification is not None else ()
    return Iterations.of(((r.start - offset, r.end - offset, r.size) for r in records), exact=True)


def counter_series(run: ParsedRun) -> dict[NicKey, NicSeries]:
    """Every NIC's counter series of the run (`node/<node>/counters.tsv`), controller clock."""
    return series_of(run.counter_lines, run.clock.offset)


def iteration_windows(run: ParsedRun) -> Iterations:
    """The run's measured collectives in time order, on the controller clock: a training
    run's updates (each numbered by its update), the verification workload's own iteration
    times where it printed them, else the completed measurements (`measurement_samples`)."""
    if run.training is not None and len(run.training.updates):
        return update_windows(run.training, run.clock.launch_offset)
    exact = verified_iterations(run.verification, run.clock.launch_offset)
    if exact:
        return exact
    samples = measurement_samples(run)[0]
    starts, ends, sizes = (list(map(attrgetter(a), samples)) for a in ("start", "end", "size"))
    return Iterations.columns(starts, ends, sizes)


def empty_run(record: runmodel.RunRecord) -> ParsedRun:
    """A run with nothing parsed (an incomplete or unreadable one): its record and the fault
    windows it was dealt (the runs table says which NIC went down even when the run did not
    finish)."""
    end = record.end
    windows = fault_windows(record.faults, end.ended_at if end else None)
    return ParsedRun(record, ParsedNcclTests(), [], None, windows=windows)


def key_of(row: ResultRow | PerIteration) -> RowKey:
    """A result row's (or per-iteration block's) key: (size, placement, cycle)."""
    return (row.size_bytes, row.placement, row.cycle)


def bus_factor(row: ResultRow) -> float:
    """busbw/algbw of a row (the collective's bus factor), 1 when either is missing."""
    return (row.busbw_gbps / row.algbw_gbps) if row.busbw_gbps and row.algbw_gbps else 1.0


def checked_results(parsed: ParsedNcclTests) -> tuple[ParsedNcclTests, int]:
    """The results with values no measurement can have (NaN, infinite, negative) emptied, and
    how many there were: a figure or a comparison must not average them."""
    rows, refused = [], 0
    for row in parsed.rows:
        row, bad = _checked_row(row)
        rows.append(row)
        refused += bad
    return (parsed.model_copy(update={"rows": rows}), refused) if refused else (parsed, 0)


def _checked_row(row: ResultRow) -> tuple[ResultRow, int]:
    bad = {
        name: None
        for name in (*RESULT_VALUES, "iter_min_us", "iter_max_us", "iter_p99_us")
        if (value := getattr(row, name, None)) is not None
        and not (math.isfinite(value) and value >= 0)
    }
    return (row.model_copy(update=bad), len(bad)) if bad else (row, 0)


# --------------------------------------------------------------------------- row and iteration times


def block_end_times(run: ParsedRun, resolution: float) -> dict[RowKey, float]:
    """Estimated end of each per-iteration block, on the controller clock.

    `-S 1` stamps have one-second resolution and are printed when a row (out-of-place, then
    in-place iterations) ends, so a row ends in [ts, ts + 1). Summed iteration times bound it
    further: a forward pass from the launch gives the earliest possible end of every row, a
    backward pass from the job's end the latest; the estimate is the middle of the two.
    """
    parsed, row_times, job = run.parsed, run.row_times, run.record.end
    span = (job.started_at, job.ended_at) if job else (None, None)
    totals: dict[RowKey, float] = {
        (p.size_bytes, p.placement, p.cycle): sum(p.times_us) / 1e6 for p in parsed.per_iteration
    }
    rows = []  # (in-place key, row time, in-place time, printed second)
    for r in parsed.rows:
        ts = row_times[(r.size_bytes, r.placement, r.cycle)][0]
        if r.placement == "in_place" and ts == ts:
            oop, inp = (r.size_bytes, "out_of_place", r.cycle), (r.size_bytes, "in_place", r.cycle)
            rows.append(
                (inp, totals.get(oop, 0.0) + totals.get(inp, 0.0), totals.get(inp, 0.0), ts)
            )
    earliest, latest = _row_bounds(rows, span, resolution)
    ends: dict[RowKey, float] = {}
    for (inp, _, t_in, _), lo, hi in zip(rows, earliest, latest, strict=True):
        end = (lo + hi) / 2 if lo <= hi else lo
        ends[inp] = end
        ends[(inp[0], "out_of_place", inp[2])] = end - t_in
    return ends


def _row_bounds(
    rows: list[tuple[Any, float, float, float]],
    span: tuple[float | None, float | None],
    resolution: float,
) -> tuple[list[float], list[float]]:
    """Earliest and latest end of each row, from its stamp (a row ends in [ts, ts + resolution])
    and the rows around it."""
    earliest, latest = [], []
    clock = -math.inf if span[0] is None else span[0]
    for _, total, _, ts in rows:
        clock = min(max(clock + total, ts), ts + resolution)
        earliest.append(clock)
    clock = math.inf if span[1] is None else span[1]
    next_total = 0.0
    for _, total, _, ts in reversed(rows):
        clock = max(min(clock - next_total, ts + resolution), ts)
        latest.append(clock)
        next_total = total
    return earliest, latest[::-1]


def measurement_samples(run: ParsedRun) -> tuple[list[Sample], str, float]:
    """Completed measurements on the controller clock, the basis text and the resolution
    (computed once per parsed run: `_measure_samples`)."""
    if run.measured is None:
        run.measured = _measure_samples(run)
    samples, basis, resolution = run.measured
    return list(samples), basis, resolution


def _measure_samples(run: ParsedRun) -> tuple[list[Sample], str, float]:
    """Completed measurements on the controller clock, the basis text and the resolution.

    With -I 1: one sample per iteration (its end estimated as the runs table estimates
    iteration timestamps); otherwise one per result row (start = end - iterations x time)."""
    parsed, row_times, stamps = run.parsed, run.row_times, run.stdout_times
    clock = "stdout.times (line arrival, ~1 ms)" if stamps else "-S 1 stamps (1 s)"
    resolution = ARRIVAL_RESOLUTION_S if stamps else 1.0
    out: list[Sample] = []
    if parsed.per_iteration and stamps:
        out = _spread_iterations(parsed, row_times)
        basis = (
            "per iteration (-I 1); iteration ends placed between row prints (stdout.times, "
            "~1 ms) with each row's untimed time spread evenly over its iterations"
        )
    elif parsed.per_iteration:
        ends = block_end_times(run, LAST_IN_SECOND)
        for p in parsed.per_iteration:
            key = (p.size_bytes, p.placement, p.cycle)
            block_end = ends.get(key)
            if block_end is None or block_end != block_end:
                continue
            factor = row_times.get(key, (0.0, 1.0))[1]
            t_end = block_end - sum(p.times_us) / 1e6
            for t_us in p.times_us:
                start, t_end = t_end, t_end + t_us / 1e6
                if t_us > 0:
                    out.append(
                        Sample(start, t_end, p.size_bytes, _busbw(p.size_bytes, t_us, factor))
                    )
        basis = f"per iteration (-I 1), ends estimated from {clock} and the iteration times"
    else:
        iters = (
            parsed.iters
            or (options.iterations if (options := run.record.spec.options) else None)
            or 1
        )
        for r in parsed.rows:
            ts = row_times[key_of(r)][0]
            if ts == ts and r.time_us and r.busbw_gbps is not None:
                out.append(Sample(ts - iters * r.time_us / 1e6, ts, r.size_bytes, r.busbw_gbps))
        basis = f"per result row (no -I: the mean of {iters} iterations), row ends from {clock}"
    out.sort(key=lambda s: s.end)
    return out, basis, resolution


def _busbw(size: int, t_us: float, factor: float) -> float:
    return size / t_us / 1e3 * factor


def _spread_iterations(
    parsed: ParsedNcclTests, row_times: dict[RowKey, tuple[float, float]]
) -> list[Sample]:
    """Iterations placed between the print of the previous row and their own row's print.

    A row's iterations (out-of-place, then in-place) ran between the two prints; the time
    there that no iteration accounts for (warm-up, buffer fill, check, the print) is spread
    evenly before each iteration. The first row has no previous print: its iterations are
    packed back to back before its own print."""
    blocks: dict[tuple[int, int], dict[str, tuple[float, ...]]] = {}
    for p in parsed.per_iteration:
        blocks.setdefault((p.size_bytes, p.cycle), {})[p.placement] = p.times_us
    rows = sorted(
        {
            (row_times[(size, pl, cy)][0], size, cy)
            for size, pl, cy in row_times
            if (size, cy) in blocks
        }
    )
    out: list[Sample] = []
    previous: float | None = None
    for printed, size, cycle in rows:
        if printed != printed:
            continue
        block = blocks[(size, cycle)]
        times = [(pl, t) for pl in ("out_of_place", "in_place") for t in block.get(pl, ()) if t > 0]
        total = sum(t for _, t in times) / 1e6
        span = printed - previous if previous is not None else total
        slack = max(0.0, span - total) / len(times) if times else 0.0
        cursor = printed - max(span, total)
        for pl, t_us in times:
            start = cursor + slack
            cursor = start + t_us / 1e6
            factor = row_times[(size, pl, cycle)][1]
            out.append(Sample(start, cursor, size, _busbw(size, t_us, factor)))
        previous = printed
    return out
