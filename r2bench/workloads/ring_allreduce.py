"""Emulated resilient ring AllReduce: nccl-tests' ``all_reduce_perf`` look-alike, no GPU.

This is an EMULATOR of the system under test (R2CCL + nccl-tests), not NCCL: a float32
sum AllReduce (reduce-scatter then all-gather around the ring) between MPI ranks, its data
striped over several "NICs" (local IPv4 addresses) with plain TCP sockets. mpi4py is used for
the control plane only (rank/size, address exchange, barriers, gathering the timings and
error counts to print); the data moves over :mod:`r2bench.workloads.transport`.

Run: ``mpirun -np 2 -x R2CC_MODE python -m r2bench.workloads.ring_allreduce -b 8 -e 64M -f 2``

Flags (nccl-tests'): ``-b/-e`` min/max bytes (``8``, ``1K``, ``64M``, ``1G``), ``-f`` step
factor, ``-i`` step bytes, ``-n`` iterations, ``-w`` warm-up iterations, ``-c`` check (every
timed iteration is verified against a closed form), ``-N`` cycles (0 = forever), ``-S 1``
timestamp column, ``-I 1`` per-iteration timing, ``-T s`` timeout per collective, ``-J file``
JSON, ``-o sum`` and ``-d float`` only, ``-t 1 -g 1`` only. Emulator flags: ``--nic-addrs``, and
``--corrupt ITER[:RANK]`` (as ``R2B_VERIFY_CORRUPT``: the checker's self-test adds 1 to one
element of timed iteration ITER on RANK, default the last, after the collective).

As r2bench's verification workload (docs/verify.md), rank 0 prints one ``#iter {json}`` line
per timed iteration (iterations counted from 0 over sizes, placements and cycles: start/end on
its wall clock, mismatches summed over ranks) and a ``#verify {json}`` summary at the end.

Environment: ``R2B_NIC_ADDRS`` (comma list of this node's data-NIC IPv4 addresses; default
``127.0.0.1`` repeated ``R2B_NICS`` times, ``R2B_NICS`` default 2), ``R2B_NIC_MAP``
(``node0=a,b;node1=c,d``: the same, for every node at once, picked by hostname), ``R2B_NIC_NAMES`` (comma
list of names for log lines, default ``nic<i>``), ``NCCL_DEBUG`` (INFO/WARN log lines on
stderr, format in :mod:`r2bench.workloads.transport`), the test hook
``R2B_TEST_FREEZE=<rank>:<nic>:<coll>``, and ``R2B_EMULATED_LIBRARY`` (the library entry sets
it): ``r2ccl`` (default) or ``nccl``.

As R-2CCL (semantics in :mod:`r2bench.config.r2ccl` and :mod:`r2bench.workloads.transport`):
a stall past ``NCCL_R2CC_FAILOVER_TIMEOUT_MS`` (unset: derived from NCCL_IB_TIMEOUT and
NCCL_IB_RETRY_CNT, 32 s at their defaults) is hot-repaired in every ``R2CC_MODE``, and the job
runs as mode 2 from the next collective on; ``R2CC_MODE`` 1-3 simulate a failure that did not
happen (1: NIC 0's channels on their backup; 2, and 3 run as 2: the last NIC masked off, the
last two with ``FAILURE2_SAME_SERVER=1``; 4, 5 and others are rejected);
``R2CC_DISCONNECTED_HCA`` (NIC names or indices) fails those NICs' channels in software at
step ``R2CC_DISCONNECTED_STEP`` (default 10), as R-2CCL's IB transport does.

As stock NCCL: every R2CC_* variable is ignored, there is no backup connection, and a link
stalled for the IB transport's retry timeout (4.096 us x 2^NCCL_IB_TIMEOUT x
(NCCL_IB_RETRY_CNT + 1), about 34 s at the defaults) aborts the job.

Exit codes (nccl-tests' testResult_t): 0 success, 3 network failure (stock NCCL, or no
healthy connection left), 4 ``-T`` timeout, 6 invalid usage, 7 wrong results.
"""

from __future__ import annotations

import argparse
import inspect
import os
import socket
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from r2bench import __version__
from r2bench.config.r2ccl import (
    DISCONNECTED_STEP_DEFAULT,
    IB_RETRY_CNT_DEFAULT,
    IB_TIMEOUT_DEFAULT,
    failover_timeout,
    simulated_failed_nics,
    simulated_migrated_nics,
)
from r2bench.workloads.nccl_format import (
    CORRUPT_VAR,
    DeviceInfo,
    IterationLine,
    JsonReport,
    Measure,
    Row,
    RunConfig,
    bus_bandwidth,
    column_header,
    footer_lines,
    header_lines,
    parse_corrupt,
    parse_size,
    verification_lines,
)
from r2bench.workloads.transport import (
    CollectiveTimeout,
    FreezeHook,
    NetworkFailure,
    Nic,
    R2ccLog,
    RingTransport,
    TransportConfig,
    disconnected_nics,
    sleeping_allgather,
)

PROGRAM = "ring_allreduce"
SOURCE = "ring_allreduce.py"
LIBRARY_VAR = "R2B_EMULATED_LIBRARY"
R2CCL, STOCK_NCCL = "r2ccl", "nccl"
IB_TIMEOUT_UNIT_S = 4.096e-6  # InfiniBand's local ACK timeout is 4.096 us x 2^NCCL_IB_TIMEOUT
PATTERN_PERIOD = 1021
EXIT_NET, EXIT_TIMEOUT, EXIT_USAGE, EXIT_WRONG = 3, 4, 6, 7


class UsageError(ValueError):
    """Unsupported flag value or environment setting."""


@dataclass(frozen=True)
class Options:
    """Parsed command line."""

    min_bytes: int
    max_bytes: int
    step_factor: int
    step_bytes: int
    iters: int
    warmup: int
    check: int
    cycles: int
    timestamps: bool
    per_iter: bool
    timeout_s: int
    json_path: str | None
    nic_addrs: str | None
    corrupt: str | None = None

    def sizes(self) -> Iterator[int]:
        """The swept sizes, as nccl-tests steps them."""
        size = self.min_bytes
        while size <= self.max_bytes:
            yield size
            size = size * self.step_factor if self.step_factor > 1 else size + self.step_bytes
            if size == 0:
                return


def _size(text: str) -> int:
    try:
        return parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def build_parser() -> argparse.ArgumentParser:
    """Argument parser with nccl-tests' short and long option names."""
    p = argparse.ArgumentParser(prog=PROGRAM, description=__doc__.splitlines()[0])
    add = p.add_argument
    add("-b", "--minbytes", type=_size, default=32 << 20)
    add("-e", "--maxbytes", type=_size, default=32 << 20)
    add("-i", "--stepbytes", type=_size, default=1 << 20)
    add("-f", "--stepfactor", type=int, default=1)
    add("-n", "--iters", type=int, default=20)
    add("-w", "--warmup_iters", type=int, default=1)
    add("-c", "--check", type=int, default=1)
    add("-N", "--run_cycles", type=int, default=1)
    add("-S", "--report_timestamps", type=int, default=0)
    add("-I", "--per_iter_timing", type=int, default=0)
    add("-T", "--timeout", type=int, default=0)
    add("-J", "--output_file", default=None)
    add("-o", "--op", default="sum")
    add("-d", "--datatype", default="float")
    add("-t", "--nthreads", type=int, default=1)
    add("-g", "--ngpus", type=int, default=1)
    add("--nic-addrs", default=None, help="comma list of data-NIC IPv4 addresses")
    add("--corrupt", default=None, help="self-test: corrupt timed iteration ITER[:RANK]")
    return p


def parse_options(argv: list[str]) -> Options:
    """Parse and validate ``argv`` (without the program name)."""
    a = build_parser().parse_args(argv)
    if a.op != "sum" or a.datatype != "float" or a.nthreads != 1 or a.ngpus != 1:
        raise UsageError("the emulator supports only -o sum -d float -t 1 -g 1")
    if a.minbytes > a.maxbytes or a.iters < 1 or a.warmup_iters < 0:
        raise UsageError(
            f"invalid sizes or iterations: -b {a.minbytes} -e {a.maxbytes} -n {a.iters}"
        )
    return Options(
        a.minbytes, a.maxbytes, a.stepfactor, a.stepbytes, a.iters, a.warmup_iters,
        a.check, a.run_cycles, a.report_timestamps == 1, a.per_iter_timing == 1,
        a.timeout, a.output_file, a.nic_addrs, a.corrupt,
    )  # fmt: skip


@dataclass(frozen=True)
class Library:
    """What the emulated library does: which library, its R2CC_MODE and its stall timeout."""

    stock: bool
    mode: int
    failover_s: float

    @property
    def name(self) -> str:
        """The banner's name of the emulated library."""
        return "stock NCCL" if self.stock else f"R-2CCL R2CC_MODE={self.mode}"


def _int_setting(env: dict[str, str], name: str, default: int) -> int:
    text = env.get(name, "").strip()
    if not text:
        return default
    if not text.isdigit():
        raise UsageError(f"{name}={text} is not a whole number")
    return int(text)


def resolve_mode(env: dict[str, str], log: R2ccLog) -> int:
    """``R2CC_MODE`` as the emulator runs it (3 runs as 2; 4, 5 and others are rejected)."""
    text = env.get("R2CC_MODE", "0").strip() or "0"
    if not text.isdigit() or int(text) > 3:
        raise UsageError(f"R2CC_MODE={text} is not emulated (supported: 0, 1, 2, 3)")
    mode = int(text)
    if mode == 3:
        log.info("R2CC: R2CC_MODE=3 (split AllReduce) is not emulated; running it as R2CC_MODE=2")
        return 2
    return mode


def ib_retry_timeout_s(env: dict[str, str]) -> float:
    """How long stock NCCL over InfiniBand waits on a dead link before its completion error:
    4.096 us x 2^NCCL_IB_TIMEOUT per try, NCCL_IB_RETRY_CNT retries (about 34 s by default)."""
    ib_timeout = _int_setting(env, "NCCL_IB_TIMEOUT", IB_TIMEOUT_DEFAULT)
    retries = _int_setting(env, "NCCL_IB_RETRY_CNT", IB_RETRY_CNT_DEFAULT)
    return IB_TIMEOUT_UNIT_S * 2.0**ib_timeout * (retries + 1)


def resolve_library(env: dict[str, str], log: R2ccLog) -> Library:
    """The emulated library from ``R2B_EMULATED_LIBRARY``, with its mode and stall timeout."""
    which = env.get(LIBRARY_VAR, R2CCL).strip() or R2CCL
    if which == STOCK_NCCL:
        return Library(True, 0, ib_retry_timeout_s(env))
    if which != R2CCL:
        raise UsageError(f"{LIBRARY_VAR}={which} is not emulated (use {R2CCL} or {STOCK_NCCL})")
    mode = resolve_mode(env, log)
    timeout = failover_timeout(env)
    log.info(f"R2CC: failover timeout {timeout.ms:.0f} ms ({timeout.basis})")
    return Library(False, mode, timeout.ms / 1000.0)


def nic_addrs_from_map(nic_map: str, host: str) -> str:
    """This host's entry of ``R2B_NIC_MAP`` (``node0=a,b;node1=c,d``), or "" if absent.

    mpirun's ``-x`` gives every rank the same value, so per-node addresses travel as one map
    keyed by hostname (the virtual testbed gives each node its own UTS hostname)."""
    for entry in nic_map.split(";"):
        name, _, addrs = entry.partition("=")
        if name.strip() == host:
            return addrs
    return ""


def local_nics(nic_addrs: str | None, env: dict[str, str]) -> list[Nic]:
    """This node's data NICs from ``--nic-addrs`` (`nic_addrs`), ``R2B_NIC_ADDRS`` or this
    host's entry of ``R2B_NIC_MAP`` (default: loopback)."""
    text = nic_addrs or env.get("R2B_NIC_ADDRS", "")
    if not text and env.get("R2B_NIC_MAP"):
        text = nic_addrs_from_map(env["R2B_NIC_MAP"], socket.gethostname())
    addrs = [a.strip() for a in text.split(",") if a.strip()]
    if not addrs:
        addrs = ["127.0.0.1"] * int(env.get("R2B_NICS", "2"))
    names = [n.strip() for n in env.get("R2B_NIC_NAMES", "").split(",") if n.strip()]
    for addr in addrs:
        socket.inet_aton(addr)
    return [Nic(i, a, names[i] if i < len(names) else f"nic{i}") for i, a in enumerate(addrs)]


@dataclass
class RingAllreduce:
    """The ring algorithm of one rank over a :class:`RingTransport`."""

    transport: RingTransport
    rank: int
    size: int
    max_count: int
    g: int = 0
    coll: int = 0
    staging: list[np.ndarray] = field(default_factory=list)

    def __post_init__(self) -> None:
        per_chunk = -(-self.max_count // max(self.size, 1)) + 1
        self.staging = [np.empty(per_chunk, np.float32) for _ in range(2)]

    def run(self, buf: np.ndarray, timeout_s: int) -> None:
        """Sum-AllReduce ``buf`` (1-D float32, contiguous) in place across the ring."""
        deadline = time.monotonic() + timeout_s if timeout_s > 0 else None
        self.transport.begin_collective()
        n, r, count = self.size, self.rank, len(buf)
        bounds = [c * count // n for c in range(n + 1)]
        raw = memoryview(buf.data).cast("B")

        def chunk(c: int) -> memoryview:
            return raw[bounds[c] * 4 : bounds[c + 1] * 4]

        for s in range(n - 1):
            dst = (r - s - 1) % n
            stage = self.staging[self.g % 2][: bounds[dst + 1] - bounds[dst]]
            self._step(chunk((r - s) % n), memoryview(stage.data).cast("B"), deadline)
            part = buf[bounds[dst] : bounds[dst + 1]]
            np.add(part, stage, out=part)
        for s in range(n - 1):
            self._step(chunk((r + 1 - s) % n), chunk((r - s) % n), deadline)
        self.coll += 1

    def _step(self, send: memoryview, recv: memoryview, deadline: float | None) -> None:
        self.transport.exchange(self.coll, self.g, send, recv, deadline)
        self.g += 1


@dataclass
class Buffers:
    """Send/receive buffers and the closed-form input pattern.

    Rank r's element i in iteration k is ``(i % 1021) + r + 1 + (k % 5)``, so the sum over
    n ranks is ``n * (i % 1021) + n(n+1)/2 + n * (k % 5)``: small integers, exact in float32.
    """

    rank: int
    size: int
    max_count: int
    send: np.ndarray = field(init=False)
    recv: np.ndarray = field(init=False)
    base: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.base = (np.arange(self.max_count) % PATTERN_PERIOD).astype(np.float32)
        self.send = np.empty(self.max_count, np.float32)
        self.recv = np.empty(self.max_count, np.float32)

    def fill(self, count: int, it: int) -> np.ndarray:
        """Write this rank's input of iteration ``it`` into ``send[:count]``."""
        out = self.send[:count]
        np.add(self.base[:count], np.float32(self.rank + 1 + it % 5), out=out)
        return out

    def wrong(self, result: np.ndarray, it: int) -> int:
        """Number of elements of ``result`` that differ from the closed form."""
        n = self.size
        const = np.float32(n * (n + 1) // 2 + n * (it % 5))
        expected = self.base[: len(result)] * np.float32(n) + const
        return int(np.count_nonzero(result != expected))


@dataclass
class Bench:
    """One rank's benchmark driver: timing, verification and output (rank 0 prints)."""

    comm: Any
    opts: Options
    algo: RingAllreduce
    bufs: Buffers
    report: JsonReport | None = None
    errors: int = 0
    bw_sum: float = 0.0
    bw_count: int = 0
    corrupt: tuple[int, int] | None = None  # the self-test's (timed iteration, rank)
    timed: int = 0  # timed iterations so far (the #iter lines' `iter`)
    cycle: int = 0
    max_elements: int = 0
    wrong_by_iteration: dict[int, int] = field(default_factory=dict)  # rank 0's tally

    def collective(
        self, count: int, it: int, in_place: bool, corrupt: bool = False
    ) -> tuple[float, int, float, float]:
        """Run one timed AllReduce; returns (seconds, wrong elements or 0, wall-clock start,
        seconds the check took). ``corrupt``: the self-test, one element off after the
        collective."""
        src = self.bufs.fill(count, it)
        target = src if in_place else self.bufs.recv[:count]
        start = time.time()
        t0 = time.perf_counter()
        if not in_place:
            np.copyto(target, src)
        self.algo.run(target, self.opts.timeout_s)
        elapsed = time.perf_counter() - t0
        if corrupt and count:
            target[count // 2] += np.float32(1)
        if not self.opts.check:
            return elapsed, 0, start, 0.0
        t1 = time.perf_counter()
        wrong = self.bufs.wrong(target, it)
        return elapsed, wrong, start, time.perf_counter() - t1

    def measure(self, nbytes: int, in_place: bool) -> Measure:
        """nccl-tests' BenchTime: time ``-n`` iterations, verify, reduce over ranks."""
        count = nbytes // 4
        runs: list[tuple[float, int, float, float]] = []
        for it in range(self.opts.iters):
            runs.append(
                self.collective(count, it, in_place, self.corrupt == (self.timed, self.algo.rank))
            )
            # Each iteration's line as soon as it is done (outside its timed span): a job that
            # dies mid-measurement still leaves every iteration it completed.
            self.iteration_lines(self.timed, count, runs[-1:])
            self.timed += 1
        times = [r[0] for r in runs]
        local_wrong = max(r[1] for r in runs)
        self.errors += 1 if local_wrong else 0
        mean = self.comm.allreduce(sum(times) / len(times)) / self.size
        wrong = self.comm.allreduce(local_wrong) if self.opts.check else None
        algbw, busbw = bus_bandwidth(count * 4, mean, self.size)
        self.bw_sum, self.bw_count = self.bw_sum + busbw, self.bw_count + 1
        measure = Measure(mean * 1e6, algbw, busbw, wrong)
        if self.opts.per_iter:
            rows = self.comm.allgather(times)
            measure.per_process = rows
            measure.iter_times = [max(col) for col in zip(*rows, strict=True)]
        return measure

    def iteration_lines(
        self, first: int, count: int, runs: list[tuple[float, int, float, float]]
    ) -> None:
        """Print the ``#iter`` line of each iteration of a measurement (rank 0): its start and
        end on rank 0's clock, its mismatches summed over ranks."""
        self.max_elements = max(self.max_elements, count)
        gathered = self.comm.gather([(r[1], r[3]) for r in runs], root=0)
        if self.algo.rank != 0:
            return
        wrong = [[w for w, _ in row] for row in gathered]
        checks = [[c for _, c in row] for row in gathered]
        for k, (seconds, _, start, _) in enumerate(runs):
            total = sum(row[k] for row in wrong)
            if total:
                self.wrong_by_iteration[first + k] = total
            line = IterationLine(
                iter=first + k, cycle=self.cycle, size=count * 4, start=start,
                end=start + seconds, seconds=seconds,
                wrong=total if self.opts.check else None, elements=count, ranks=self.size,
                check_s=max(row[k] for row in checks) if self.opts.check else None,
            )  # fmt: skip
            print(line.text(), flush=True)

    @property
    def size(self) -> int:
        """Number of ranks."""
        return self.algo.size

    def warmup(self) -> None:
        """Warm-up iterations for every power-of-two size from -b to -e (not timed), out of
        place as nccl-tests' are, so the first timed iteration finds both buffers touched."""
        size = self.opts.min_bytes
        while size <= self.opts.max_bytes and self.opts.warmup > 0:
            for it in range(self.opts.warmup):
                self.collective(size // 4, it, in_place=False)
            size = size * 2 if size else 1

    def sweep(self) -> None:
        """All rows, repeated ``-N`` times (0 = forever)."""
        cycle = 0
        while self.opts.cycles <= 0 or cycle < self.opts.cycles:
            for nbytes in self.opts.sizes():
                out_of_place = self.measure(nbytes, in_place=False)
                in_place = self.measure(nbytes, in_place=True)
                row = Row((nbytes // 4) * 4, nbytes // 4, out_of_place, in_place)
                self.emit(row)
            cycle += 1
            self.cycle = cycle

    def emit(self, row: Row) -> None:
        """Print a row (rank 0) and add it to the JSON report."""
        if self.algo.rank == 0:
            print(row.text(self.opts.timestamps), flush=True)
            if self.report:
                self.report.add_row(row, self.opts.iters)

    def finish(self) -> int:
        """Footer, JSON summary; returns the process exit code."""
        errors = self.comm.allreduce(self.errors)
        avg = self.bw_sum / self.bw_count if self.bw_count else 0.0
        if self.algo.rank == 0:
            summary = verification_lines(
                PROGRAM, "all_reduce", bool(self.opts.check), self.size, self.timed,
                self.max_elements, self.wrong_by_iteration,
            )  # fmt: skip
            print("\n".join(footer_lines(errors, avg, PROGRAM, summary)), flush=True)
            if self.report:
                self.report.finish(errors, avg)
        return EXIT_WRONG if errors else 0


def _where() -> str:
    frame = inspect.currentframe()
    caller = frame.f_back if frame else None
    return f"{SOURCE}:{caller.f_lineno if caller else 0}"


def abort_job(comm: Any, code: int, first_line: str, where: str) -> None:
    """Print nccl-tests' failure lines and abort every rank with `code`."""
    host = socket.gethostname()
    print(first_line, flush=True)
    print(f" .. {host} pid {os.getpid()}: Test failure {where}", flush=True)
    comm.Abort(code)


def banner(library: Library, nics: list[Nic]) -> str:
    """The first header line: says plainly that this is the emulator, not nccl-tests."""
    what = "stall timeout" if library.stock else "failover timeout"
    return (
        f"r2bench emulated ring all_reduce (not NCCL, no GPU) version {__version__}: "
        f"TCP over {len(nics)} NIC(s) per rank, {library.name} (emulated), "
        f"{what} {library.failover_s * 1000:.0f} ms"
    )


def print_header(
    comm: Any,
    cfg: RunConfig,
    opts: Options,
    nics: list[Nic],
    report: JsonReport | None,
    notes: tuple[str, ...] = (),
) -> None:
    """Gather every rank's device line and print the header on rank 0."""
    addrs = ",".join(n.addr for n in nics)
    mine = DeviceInfo(
        comm.rank, os.getpid(), socket.gethostname(), f"emulated CPU (TCP NICs {addrs})"
    )
    devices = comm.gather(mine, root=0)
    if comm.rank == 0:
        print("\n".join(header_lines(cfg, devices)), flush=True)
        if report:
            report.set_config(cfg, devices)
        print("\n".join([*notes, *column_header(cfg.per_iter, opts.timestamps)]), flush=True)


def header_config(opts: Options, library: Library, nics: list[Nic]) -> RunConfig:
    """RunConfig for the header from the options."""
    return RunConfig(
        PROGRAM, banner(library, nics), opts.min_bytes, opts.max_bytes, opts.step_factor,
        opts.step_bytes, opts.warmup, opts.iters, opts.check, opts.per_iter,
    )  # fmt: skip


def transport_config(
    comm: Any,
    library: Library,
    nics: list[Nic],
    env: dict[str, str],
    log: R2ccLog,
    freeze: FreezeHook | None,
) -> TransportConfig:
    """The transport's settings: stock NCCL gets none of R-2CCL's (it reads no R2CC_*)."""
    if library.stock:
        return TransportConfig(comm.rank, comm.size, nics, 0, library.failover_s, log, freeze,
                               stock=True)  # fmt: skip
    raw_mode = int(env.get("R2CC_MODE", "0").strip() or "0")
    two_failures = env.get("FAILURE2_SAME_SERVER", "").strip() == "1"
    return TransportConfig(
        comm.rank, comm.size, nics, library.mode, library.failover_s, log, freeze,
        disconnected=disconnected_nics(env.get("R2CC_DISCONNECTED_HCA"), nics),
        disconnected_step=_int_setting(env, "R2CC_DISCONNECTED_STEP", DISCONNECTED_STEP_DEFAULT),
        simulated_failed=simulated_failed_nics(raw_mode, len(nics), two_failures),
        simulated_migrated=simulated_migrated_nics(library.mode, len(nics)),
    )  # fmt: skip


def setup(comm: Any, opts: Options, env: dict[str, str]) -> Bench:
    """Resolve the environment, connect the ring and print the header."""
    log = R2ccLog.from_env(comm.rank, env)
    library = resolve_library(env, log)
    nics = local_nics(opts.nic_addrs, env)
    report = None
    if comm.rank == 0 and opts.json_path:
        report, status = JsonReport.open(opts.json_path, sys.argv, dict(env))
        print(status, flush=True)
    freeze = FreezeHook.parse(env.get("R2B_TEST_FREEZE"))
    transport = RingTransport(
        transport_config(comm, library, nics, env, log, freeze), sleeping_allgather(comm)
    )
    try:
        corrupt = parse_corrupt(opts.corrupt or env.get(CORRUPT_VAR), comm.size)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    notes = (
        (
            f"# Self-test: timed iteration {corrupt[0]} is corrupted on purpose on rank "
            f"{corrupt[1]} ({'--corrupt' if opts.corrupt else CORRUPT_VAR}): this run must end "
            "with wrong results",
        )
        if corrupt
        else ()
    )
    print_header(comm, header_config(opts, library, nics), opts, nics, report, notes)
    max_count = max(opts.max_bytes // 4, 1)
    algo = RingAllreduce(transport, comm.rank, comm.size, max_count)
    bufs = Buffers(comm.rank, comm.size, max_count)
    return Bench(comm, opts, algo, bufs, report, corrupt=corrupt)


def run(comm: Any, opts: Options, env: dict[str, str]) -> int:
    """Benchmark body; network failures and timeouts abort the whole MPI job."""
    bench = setup(comm, opts, env)
    host = socket.gethostname()
    try:
        bench.warmup()
        bench.sweep()
    except CollectiveTimeout:
        where = _where()
        abort_job(comm, EXIT_TIMEOUT, f"{host}: Test timeout ({opts.timeout_s}s) {where}", where)
    except NetworkFailure as exc:
        where = _where()
        reason = f"remote process exited or there was a network error / {exc}"
        abort_job(comm, EXIT_NET, f"{host}: Test NCCL failure {where} '{reason}'", where)
    code = bench.finish()
    comm.Barrier()
    bench.algo.transport.close()
    return code


def mpi_main(
    program: str,
    parse: Callable[[list[str]], Any],
    body: Callable[[Any, Any, dict[str, str]], int],
    argv: list[str] | None,
) -> int:
    """A workload's entry: parse the flags, then `body(comm, options, environment)` on
    MPI_COMM_WORLD; a usage error (before or during the job) is one line and exit 6."""
    try:
        opts = parse(sys.argv[1:] if argv is None else argv)
    except UsageError as exc:
        print(f"{program}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        from mpi4py import MPI
    except ImportError:
        print(f"{program}: mpi4py is required (pip install 'r2bench[workload]')", file=sys.stderr)
        return EXIT_USAGE
    comm = MPI.COMM_WORLD
    try:
        return body(comm, opts, dict(os.environ))
    except UsageError as exc:
        print(f"{program}: {exc}", file=sys.stderr, flush=True)
        comm.Abort(EXIT_USAGE)
        return EXIT_USAGE


def main(argv: list[str] | None = None) -> int:
    """Entry point: ``python -m r2bench.workloads.ring_allreduce [flags]``."""
    return mpi_main(PROGRAM, parse_options, run, argv)


if __name__ == "__main__":
    sys.exit(main())
