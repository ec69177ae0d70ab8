"""Data models of parsed run records: nccl-tests results, log events and run outcomes.

These models are the contract between the parsers (`nccltests`, `events`, `outcome`) and
everything built on top of them (run store, reports, CLI). They are plain pydantic v2 models;
all of them serialize with `model_dump()` / `model_dump_json()`.
"""

from __future__ import annotations

from datetime import datetime
from enum import Enum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Placement = Literal["out_of_place", "in_place"]
CollectiveSource = Literal[
    "program_line",  # `# Collective test starting/concluded: <test>_perf`
    "json_args",  # the -J JSON's args[0]
    "run_spec",  # the binary r2bench ran
    "command_line",  # a shell/mpirun/srun line in the log that runs `<test>_perf`
    "failure_line",  # `Test failure all_reduce.cu:90`, `NCCL failure all_reduce.cu:95`
    "columns",  # redop/root/count columns and the busbw/algbw ratio
    "file_name",  # `old_all_reduce.txt`, `all_reduce_perf.socket.txt`
]
LibraryFamily = Literal["nccl", "rccl", "r2ccl", "msccl", "other"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


class ResultRow(_Frozen):
    """One measurement of one placement at one message size (half of an nccl-tests row)."""

    size_bytes: int
    count: int
    type: str
    redop: str
    root: int
    placement: Placement
    time_us: float | None = None
    algbw_gbps: float | None = None
    busbw_gbps: float | None = None
    wrong: int | None = Field(default=None, description="#wrong; None when printed as N/A")
    timestamp: datetime | None = Field(default=None, description="-S 1 column (local time)")
    cycle: int = Field(default=0, description="0-based repetition index of the size sweep (-N)")
    iter_min_us: float | None = None
    iter_max_us: float | None = None
    iter_p99_us: float | None = None
    iter_cv_pct: float | None = None
    line: int | None = Field(default=None, description="1-based line number in the text output")


class Device(_Frozen):
    """A `#  Rank N Group G Pid P on HOST device D [BUS] NAME` header line."""

    rank: int
    group: int | None = None
    pid: int | None = None
    host: str
    device: int | None = None
    bus_id: str | None = None
    name: str | None = None


class PerIteration(_Frozen):
    """Per-iteration times of one size and placement (`-I 1`, from the `-J` JSON)."""

    size_bytes: int
    placement: Placement
    times_us: tuple[float, ...]
    skipped_iterations: int = 0
    cycle: int = 0


class ParsedNcclTests(_Frozen):
    """Everything understood from one nccl-tests output (text and/or JSON)."""

    collective: str | None = Field(default=None, description="e.g. 'all_reduce'")
    nccl_tests_version: str | None = None
    nccl_headers: int | None = Field(default=None, description="NCCL_VERSION_CODE, e.g. 22803")
    nccl_library: int | None = None
    ranks: int | None = Field(default=None, description="number of ranks (devices listed)")
    n_threads: int | None = None
    n_gpus: int | None = None
    iters: int | None = None
    warmup_iters: int | None = None
    validation: bool | None = None
    devices: list[Device] = Field(default_factory=list)
    rows: list[ResultRow] = Field(default_factory=list)
    per_iteration: list[PerIteration] = Field(default_factory=list)
    oob_values: int | None = None
    oob_failed: bool | None = None
    avg_busbw_gbps: float | None = None
    concluded: bool = Field(default=False, description="saw '# Collective test concluded'")
    footer: bool = Field(default=False, description="saw the '# Avg bus bandwidth' footer")
    header: bool = Field(default=False, description="saw the '# nThread ...' header line")
    collective_from: CollectiveSource | None = Field(
        default=None, description="how the collective was known"
    )
    library_family: LibraryFamily | None = Field(
        default=None, description="rccl when rccl-tests or RCCL said so; nccl when NCCL did"
    )
    library_version: str | None = Field(
        default=None,
        description="as printed: `RCCL version : 2.28.3-...`, `NCCL version 2.19.3+cuda12.2`",
    )
    library_path: str | None = Field(
        default=None, description="the libnccl file the log says was loaded (served the run)"
    )
    error_column: bool = Field(
        default=False,
        description="the table's last column is old releases' `error` (a maximum error, not #wrong)",
    )
    unreadable_rows: int = Field(
        default=0, description="table rows that did not fit the header's columns (not read)"
    )
    comms_destroyed: int = Field(
        default=0, description="communicator ranks torn down (NCCL's `Destroy COMPLETE` lines)"
    )
    comms_open: int = Field(
        default=0, description="communicator ranks set up (`Init COMPLETE`) and never torn down"
    )
    first_line: int | None = Field(default=None, description="first line of this run in its file")
    last_line: int | None = Field(default=None, description="last line of this run in its file")
    warnings: list[str] = Field(default_factory=list)

    @property
    def processes(self) -> int | None:
        """Processes that drove the ranks (one with `-g 8` drives 8 ranks)."""
        procs = {(d.host, d.pid) for d in self.devices if d.pid is not None}
        return len(procs) or None

    @property
    def is_nccl_tests(self) -> bool:
        """True when anything in the input is nccl-tests' own output."""
        return bool(
            self.header
            or self.nccl_tests_version
            or self.devices
            or self.rows
            or self.footer
            or self.concluded
        )

    @property
    def cycles(self) -> int:
        """Number of size sweeps seen (the -N repetitions)."""
        return max((r.cycle for r in self.rows), default=-1) + 1

    @property
    def wrong_rows(self) -> list[ResultRow]:
        """Rows that report data corruption (#wrong > 0)."""
        return [r for r in self.rows if r.wrong]


class EventKind(str, Enum):
    """What a log line says. Values are stable strings (stored in run records)."""

    NCCL_INFO = "nccl_info"
    NCCL_WARN = "nccl_warn"
    NCCL_VERSION = "nccl_version"
    R2CC_HOT_REPAIR_BROADCAST = "r2cc_hot_repair_broadcast"
    R2CC_HOT_REPAIR_RECEIVED = "r2cc_hot_repair_received"
    R2CC_STEP_SYNC = "r2cc_step_sync"
    R2CC_HOT_REPAIR_DETECTED = "r2cc_hot_repair_detected"
    R2CC_INJECTED_FAILURE = "r2cc_injected_failure"  # R2CC_DISCONNECTED_HCA fired (IB only)
    R2CC_GATHER_COMPLETE = "r2cc_gather_complete"
    R2CC_BACKUP_SWITCH = "r2cc_backup_switch"
    R2CC_BACKUP_CONNECTED = "r2cc_backup_connected"
    R2CC_OOB_INIT = "r2cc_oob_init"
    NET_IB_COMPLETION_ERROR = "net_ib_completion_error"
    SOCKET_ERROR = "socket_error"
    NCCL_FATAL_ERROR = "nccl_fatal_error"  # async QP/CQ fatal event, comm fatal, ncclRemoteError
    COLLECTIVE_TIMEOUT = "collective_timeout"  # a framework's watchdog (PyTorch ProcessGroupNCCL)
    TEST_NCCL_FAILURE = "test_nccl_failure"
    TEST_TIMEOUT = "test_timeout"
    TEST_FAILURE = "test_failure"
    MPI_PROCESS_SIGNALED = "mpi_process_signaled"
    MPI_PROCESS_EXIT = "mpi_process_exit"
    MPI_JOB_ABORTED = "mpi_job_aborted"
    LAUNCH_ERROR = "launch_error"
    PROCESS_SIGNAL = "process_signal"
    BACKTRACE_FRAME = "backtrace_frame"


class Event(_Frozen):
    """One typed log event. `details` holds fields pulled out of the message (all strings)."""

    kind: EventKind
    line: int = Field(description="1-based line number in its file")
    text: str = Field(description="the raw line (control characters replaced)")
    message: str = ""
    time: float | None = Field(default=None, description="epoch seconds, when the line has one")
    host: str | None = None
    pid: int | None = None
    tid: int | None = None
    rank: int | None = None
    details: dict[str, str] = Field(default_factory=dict)


class OutcomeStatus(str, Enum):
    """How a run ended."""

    OK = "ok"
    WRONG_RESULTS = "wrong_results"
    CRASHED = "crashed"
    TIMEOUT = "timeout"
    LAUNCH_FAILED = "launch_failed"
    BUILD_FAILED = "build_failed"
    INTERRUPTED = "interrupted"
    INCOMPLETE = "incomplete"  # output ends without its footer and nothing says it failed
    NOT_NCCL_TESTS = "not_nccl_tests"
    # A software fault (R2CC_DISCONNECTED_HCA) was armed and nothing shows it fired: the run
    # measured no fault, so it must never count as one that survived.
    FAULT_NOT_INJECTED = "fault_not_injected"
    # The fault was applied and the run went on, but it touched no traffic: the NIC carried
    # nothing before it, or kept carrying traffic after it (analysis/evidence.py). An ok run
    # under such a fault measured no fault and must never count as one that survived.
    FAULT_WITHOUT_EFFECT = "fault_without_effect"
    # The run's own harness says the fault missed a running collective (R-2CCL's artifact
    # programs exit 3 for a cut that landed between AllReduces).
    FAULT_MISSED = "fault_missed"
    # The program loaded another NCCL than the one it was built against (nccl-tests'
    # `nccl-headers=N nccl-library=M` differ): its results are not the library under test's.
    WRONG_LIBRARY = "wrong_library"


class Evidence(_Frozen):
    """A log line that justifies an outcome."""

    line: int | None = None
    text: str
    source: str | None = Field(default=None, description="which file, when known")


class LaunchInfo(_Frozen):
    """What the launcher knows about a run, for the classifier."""

    command: str | None = None
    expected_ranks: int | None = None
    hosts: tuple[str, ...] = ()
    deadline_s: float | None = None


class Outcome(_Frozen):
    """The classification of a run: status, a one-line reason and the lines behind it."""

    status: OutcomeStatus
    reason: str
    failed_rank: int | None = None
    failed_host: str | None = None
    evidence: list[Evidence] = Field(default_factory=list)
