"""Logs of R-2CCL's own reproduction harness (upstream `examples/cloudlab_r7525/logs/`), read
right (pure: no pandas).

The authors' bash scripts print their own lines around the programs they run, and a reader that
sees only nccl-tests output gets them wrong: every block looks like stock NCCL, the scripts'
comparison tables look like malformed result rows, and the hot-repair test program is not
nccl-tests at all. This module reads the scripts' own structure:

- **Sections.** A `===== title =====` header, or an `[nccl-tests] ... R2CC_MODE=...` line after
  output, starts a section. A section with nccl-tests output is one run (`HarnessRun`), with the
  settings its `[nccl-tests]` and `[k-sweep]` lines state (R2CC_MODE, NCCL_IB_HCA,
  R2CC_FAILED_NODE, R2CC_FAILED_HCA, R2CC_AR_STAGE2_CHUNKS = K, R2CC_AR_SCHEDULE) and the
  header's title as its label (`r2cc_allreduce_K4`). A titled section without a run is a script
  table (`ScriptTable`: the comparison of test 03, the model table of 07, the summaries of 08
  and 09): it is never a result row.
- **The hot-repair program** (`hot_repair/test_hot_repair`, tests 01/02): `Config:` lines, one
  `[Rank 0] Iter i/N START|END: OK (elapsed T ms)` pair per AllReduce, the per-NIC receive
  table (`port_rcv_data`, MiB per iteration), `Verification`, `Failure evidence`,
  `TEST PASS|FAIL` and the script's `[result] exit=N` (0 pass, 2 wrong results, 3 the cut
  missed a running AllReduce). It becomes a `HotRepairRun`, with the per-iteration per-NIC
  traffic as data (`HotRepairRun.traffic`).
- **R-2CCL, never `nccl`.** The library is R-2CCL when R-2CCL's own lines say so: a WARN from
  its sources (`r2cc/...cc:N`, `R2CC ...`) or the harness's lines that set its variables
  (`R2CC_MODE=`); `r2cc_proof` holds the line.

Bad input is refused per run with a located error (`ArtifactError`: file:line, what, the fix),
never silently read: a `[result]` line that contradicts the iterations (exit 0 with a failed or
missing iteration, wrong elements or TEST FAIL; exit 2 with 0 wrong elements; exit 3 with
failure evidence of a cut during an iteration), a receive table whose time disagrees with the
iteration's END line, a K (`R2CC_AR_STAGE2_CHUNKS`) outside 1-16. The other runs of the file
are still read.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from r2bench.config.r2ccl import AR_STAGE2_CHUNKS_MAX
from r2bench.parse.events import read_events
from r2bench.parse.library import MODE_VARIABLE
from r2bench.parse.models import (
    Device,
    Event,
    EventKind,
    Evidence,
    Outcome,
    OutcomeStatus,
    ParsedNcclTests,
    PerIteration,
)
from r2bench.parse.nccltests.lines import iter_lines
from r2bench.parse.nccltests.text import parse_text
from r2bench.parse.numbers import INT64_MAX, BadNumber, bounded_int
from r2bench.safeio import InputRefused
from r2bench.textinput import open_text

MIB = 1 << 20
"""The receive table's MB: the program prints `port_rcv_data * 4 / 1024 / 1024` (MiB)."""
K_MIN, K_MAX = 1, AR_STAGE2_CHUNKS_MAX
"""R2CC_AR_STAGE2_CHUNKS: R-2CCL runs stage 2 of R2CC-AllReduce in at most 16 chunks."""
K_VARIABLE = "R2CC_AR_STAGE2_CHUNKS"
FAILED_NODE_VARIABLE = "R2CC_FAILED_NODE"
FAILED_HCA_VARIABLE = "R2CC_FAILED_HCA"
FAILED_COUNT_VARIABLE = "R2CC_FAILED_NIC_COUNT"
RESULT_EXIT_STATUS = {
    0: OutcomeStatus.OK,
    2: OutcomeStatus.WRONG_RESULTS,
    3: OutcomeStatus.FAULT_MISSED,
}
"""The harness's `[result] exit=N` (upstream README, section 2)."""

_SECTION_RE = re.compile(r"^={3,}\s+(?P<title>.+?)\s+={3,}\s*$")
_SETTINGS_RE = re.compile(r"^\[nccl-tests\]\s.*\bR2CC_MODE=")
_KSWEEP_RE = re.compile(r"^\[k-sweep\]\s")
_COMMAND_RE = re.compile(r"^\[nccl-tests\]\s+(?P<cmd>\S+_perf\b.*)$")
_ASSIGN_RE = re.compile(r"(?<![\w.-])(?P<name>[A-Z][A-Z0-9_]*)=(?P<value>\S*)")
_NCCL_TESTS_OUTPUT_RE = re.compile(r"^#\s*(nccl-tests version|Collective test starting|nThread )")
_CONFIG_ITERS_RE = re.compile(
    r"^Config: iters=(?P<iters>\d+), bytes=(?P<bytes>\d+)\b.*?count=(?P<count>\d+) (?P<type>\w+)"
)
_CONFIG_DELAY_RE = re.compile(r"^Config: start_disconnect_delay_ms=(?P<ms>-?\d+)")
_CONFIG_CMDS_RE = re.compile(r"^Config: disconnect_cmd=(?P<cut>[^,]*), reconnect_cmd=(?P<heal>.*)$")
_RUNNING_RE = re.compile(r"^\[Rank (?P<rank>\d+)\] Running on (?P<host>\S+)")
_ITER_RE = re.compile(
    r"^\[Rank 0\] Iter (?P<i>\d+)/(?P<n>\d+) (?P<what>START|END):\s*(?P<rest>.*)$"
)
_END_RE = re.compile(r"^(?P<status>\w+) \(elapsed (?P<ms>\d+) ms\)")
_CUT_DONE_RE = re.compile(r"^\[Rank 0\] NIC disconnect command (?P<how>completed|failed)")
_RX_TITLE_RE = re.compile(r"^\[Rank 0\] IB RX per-iteration\b")
_RX_COLUMNS_RE = re.compile(r"^Iter\s+Time\(ms\)\s+(?P<nics>\S.*?)\s*$")
_RX_ROW_RE = re.compile(r"^(?P<iter>\d+)\s+(?P<ms>\d+)\s+(?P<values>(?:(?:\d+|NA)\s*)+)$")
_VERIFY_RE = re.compile(
    r"^\[Rank 0\] Verification: all (?P<elements>\d+) elements of each of the (?P<iters>\d+) "
    r"iterations checked on all (?P<ranks>\d+) ranks: (?P<wrong>\d+) wrong"
)
_EVIDENCE_RE = re.compile(r"^\[Rank 0\] Failure evidence: (?P<text>.*)$")
_EVIDENCE_CUT_RE = re.compile(
    r"^(?P<nic>\S+) cut during iteration (?P<iter>\d+) \((?P<got>\d+) of (?P<of>\d+) MB received"
)
_VERDICT_RE = re.compile(r"^\[Rank 0\] TEST (?P<verdict>PASS|FAIL)\b:?\s*(?P<text>.*)$")
_RESULT_RE = re.compile(r"^\[result\] exit=(?P<code>-?\d+)\b\s*(?P<text>.*)$")
_FAILOVER_RE = re.compile(r"^\[trace\] failover_iter=(?P<iter>\d+)")
_NCCL_VERSION_RE = re.compile(r"^NCCL version (?P<version>\S+)")
_HARNESS_RE = re.compile(r"^\[(?:testbed|preflight|trace|k-sweep|result)\]\s")
_R2CC_SOURCE_RE = re.compile(r"(?:^|\s)r2cc/\S+:\d+\s|\bR2CC\b")


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


class Refusal(_Frozen):
    """Why a run of an artifact log was not read: where, what, and the fix."""

    path: str
    line: int
    what: str
    fix: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.what}; {self.fix}"


class ArtifactError(InputRefused):
    """A run of an R-2CCL artifact log r2bench refuses to read (an `InputRefused`: `parse`
    names the file and goes on with the next)."""

    def __init__(self, path: str, line: int, what: str, fix: str) -> None:
        self.refusal = Refusal(path=path, line=line, what=what, fix=fix)
        super().__init__(str(self.refusal))


class IterationRx(_Frozen):
    """Bytes one node's NICs received during one AllReduce of the hot-repair program."""

    iteration: int = Field(description="1-based, as the program prints it")
    time_ms: int = Field(description="the iteration's time, as the table prints it")
    rx_bytes: dict[str, int | None] = Field(
        description="per NIC (`mlx5_2`): MiB as printed x 2^20 (the program truncates to whole "
        "MiB, so each value is a lower bound within 1 MiB); None where it printed NA"
    )
    line: int


class HotRepairIteration(_Frozen):
    """One `[Rank 0] Iter i/N END` line."""

    iteration: int
    of: int
    status: str = Field(description="`OK` or `FAIL` (its sampled elements wrong)")
    elapsed_ms: int
    line: int


class Verification(_Frozen):
    """`Verification: all N elements of each of the M iterations checked on all R ranks: W wrong`."""

    elements: int
    iterations: int
    ranks: int
    wrong: int
    line: int


class FailureEvidence(_Frozen):
    """`Failure evidence: ...`: the NIC, the iteration the cut hit and how much it had received."""

    text: str
    line: int
    nic: str | None = None
    iteration: int | None = None
    received_mib: int | None = None
    of_mib: int | None = None


class HotRepairRun(_Frozen):
    """One run of the hot-repair program: iterations, per-NIC traffic, verdicts."""

    first_line: int
    last_line: int
    iters: int | None = None
    size_bytes: int | None = None
    count: int | None = None
    datatype: str | None = None
    disconnect_delay_ms: int | None = None
    disconnect_cmd: str | None = None
    reconnect_cmd: str | None = None
    devices: list[Device] = Field(default_factory=list)
    library_version: str | None = None
    iterations: list[HotRepairIteration] = Field(default_factory=list)
    cut_line: int | None = Field(default=None, description="`NIC disconnect command completed`")
    cut_during: int | None = Field(
        default=None, description="the iteration started and not ended when the cut completed"
    )
    nics: list[str] = Field(default_factory=list, description="the receive table's NICs")
    traffic: list[IterationRx] = Field(default_factory=list)
    verification: Verification | None = None
    failure_evidence: FailureEvidence | None = None
    verdict: Literal["PASS", "FAIL"] | None = None
    verdict_line: int | None = None
    result_exit: int | None = None
    result_line: int | None = None
    failover_iter: int | None = Field(default=None, description="`[trace] failover_iter=`")

    @property
    def times_ms(self) -> list[int]:
        """The END lines' elapsed times, in iteration order."""
        return [it.elapsed_ms for it in self.iterations]

    def rx(self, nic: str) -> list[int | None]:
        """One NIC's received bytes per iteration (the `traffic` table's column)."""
        return [row.rx_bytes.get(nic) for row in self.traffic]

    def outcome(self, source: str | None = None) -> Outcome:
        """The run's outcome: the `[result] exit=N` line's (0 ok, 2 wrong_results, 3
        fault_missed), else what the program printed (TEST PASS with every iteration OK;
        wrong elements; iterations missing)."""
        evidence = [
            Evidence(line=line, text=text, source=source)
            for line, text in self._evidence_lines()
            if line is not None
        ]
        if self.result_exit is not None:
            status = RESULT_EXIT_STATUS.get(self.result_exit, OutcomeStatus.CRASHED)
            reason = {
                OutcomeStatus.OK: "the harness passed it ([result] exit=0): every AllReduce "
                "completed and every element of every iteration is correct",
                OutcomeStatus.WRONG_RESULTS: "the harness found wrong elements ([result] exit=2)",
                OutcomeStatus.FAULT_MISSED: "the harness says the cut missed a running AllReduce "
                "([result] exit=3): this run measured no failure; run it again",
            }.get(status, f"the harness ended with exit {self.result_exit}")
            return Outcome(status=status, reason=reason, evidence=evidence)
        wrong = self.verification.wrong if self.verification else 0
        failed = [it for it in self.iterations if it.status != "OK"]
        if wrong or failed:
            what = f"{wrong} wrong elements" if wrong else f"iteration {failed[0].iteration} FAIL"
            return Outcome(status=OutcomeStatus.WRONG_RESULTS, reason=what, evidence=evidence)
        if self.iters is not None and len(self.iterations) < self.iters:
            return Outcome(
                status=OutcomeStatus.INCOMPLETE,
                reason=f"{len(self.iterations)} of {self.iters} iterations ended, no verdict",
                evidence=evidence,
            )
        if self.verdict == "PASS":
            return Outcome(
                status=OutcomeStatus.OK,
                reason=f"TEST PASS: {len(self.iterations)} AllReduces completed and verified",
                evidence=evidence,
            )
        return Outcome(
            status=OutcomeStatus.INCOMPLETE,
            reason="the program printed no TEST PASS/FAIL and the harness no [result] line",
            evidence=evidence,
        )

    def _evidence_lines(self) -> list[tuple[int | None, str]]:
        out: list[tuple[int | None, str]] = []
        if self.verification:
            v = self.verification
            out.append(
                (
                    v.line,
                    f"Verification: {v.elements} elements x {v.iterations} iterations on "
                    f"{v.ranks} ranks: {v.wrong} wrong",
                )
            )
        if self.failure_evidence:
            out.append(
                (self.failure_evidence.line, f"Failure evidence: {self.failure_evidence.text}")
            )
        if self.verdict:
            out.append((self.verdict_line, f"TEST {self.verdict}"))
        if self.result_exit is not None:
            out.append((self.result_line, f"[result] exit={self.result_exit}"))
        return out

    def as_parsed(self) -> ParsedNcclTests:
        """The run in the shape every reader of results takes: its devices, the NCCL version
        and the iterations' times as one in-place per-iteration series (the program reduces
        in place); no result rows (the program prints none)."""
        per_iteration = []
        if self.size_bytes is not None and self.iterations:
            per_iteration.append(
                PerIteration(
                    size_bytes=self.size_bytes,
                    placement="in_place",
                    times_us=tuple(float(ms) * 1000.0 for ms in self.times_ms),
                )
            )
        return ParsedNcclTests(
            collective="all_reduce",
            ranks=len(self.devices) or None,
            iters=self.iters,
            warmup_iters=0,
            validation=True,
            devices=self.devices,
            per_iteration=per_iteration,
            library_version=self.library_version,
            first_line=self.first_line,
            last_line=self.last_line,
        )


class HarnessRun(_Frozen):
    """One nccl-tests run of a harness script, with the settings its lines state."""

    first_line: int
    last_line: int
    label: str | None = Field(default=None, description="the section's title (`balance_1`)")
    settings: dict[str, str] = Field(default_factory=dict)
    settings_line: int | None = None
    settings_text: str | None = Field(default=None, description="the first settings line")
    command: str | None = Field(default=None, description="`all_reduce_perf -b ...`")
    parsed: ParsedNcclTests


class ScriptTable(_Frozen):
    """A titled section of a script's own output with no run in it (a comparison table)."""

    title: str
    first_line: int
    last_line: int


class ArtifactLog(_Frozen):
    """Everything read from one artifact log file."""

    path: str
    harness_runs: list[HarnessRun] = Field(default_factory=list)
    hot_repair_runs: list[HotRepairRun] = Field(default_factory=list)
    tables: list[ScriptTable] = Field(default_factory=list)
    errors: list[Refusal] = Field(default_factory=list, description="runs refused")
    r2cc_proof: Evidence | None = Field(
        default=None, description="the first line that proves R-2CCL ran"
    )

    @property
    def runs(self) -> list[HarnessRun | HotRepairRun]:
        """Every run, in file order."""
        both: list[HarnessRun | HotRepairRun] = [*self.harness_runs, *self.hot_repair_runs]
        return sorted(both, key=lambda r: r.first_line)


# --------------------------------------------------------------------------- settings


def settings_of(line: str) -> dict[str, str]:
    """The UPPER_CASE `NAME=value` assignments of a harness line."""
    return {m["name"]: m["value"] for m in _ASSIGN_RE.finditer(line)}


def check_k(value: str, path: str, line: int) -> int:
    """K (`R2CC_AR_STAGE2_CHUNKS`) as an int in 1-16, else a located ArtifactError."""
    try:
        k = int(value)
    except ValueError:
        k = 0
    if not K_MIN <= k <= K_MAX or str(k) != value.strip():
        raise ArtifactError(
            path,
            line,
            f"{K_VARIABLE}={value}: K must be a whole number from {K_MIN} to {K_MAX} "
            "(R-2CCL runs stage 2 of R2CC-AllReduce in 1 to 16 chunks)",
            "correct the value this line states or remove the run from the log",
        )
    return k


def declared_failure(settings: dict[str, str]) -> str | None:
    """The failure a run's settings declare, in words (`mlx5_2 of node 0 declared failed`), or
    None: R2CC switched off (R2CC_MODE 0 or unset: the stated failure is not applied) or none
    declared. The run's scenario stays `none`: nothing was injected, the library only masks
    the NIC, as experiments/r7525 run it (so `compare` matches the two)."""
    mode = settings.get(MODE_VARIABLE, "").strip()
    hca = settings.get(FAILED_HCA_VARIABLE) or (
        f"{settings[FAILED_COUNT_VARIABLE]} NIC(s)" if FAILED_COUNT_VARIABLE in settings else None
    )
    if mode in ("", "0") or hca is None:
        return None
    return f"{hca} of node {settings.get(FAILED_NODE_VARIABLE) or '0'} declared failed"


def hot_repair_scenario(run: HotRepairRun) -> str:
    """The cut of a hot-repair run: `mlx5_2-cut` (the NIC its failure evidence names)."""
    nic = run.failure_evidence.nic if run.failure_evidence else None
    return f"{nic}-cut" if nic else "nic-cut"


# --------------------------------------------------------------------------- reading


@dataclass
class _Section:
    """A stretch of the log between two of the scripts' own headers (lines first..end)."""

    start: int
    title: str | None = None
    settings: dict[str, str] = field(default_factory=dict)
    settings_line: int | None = None
    settings_text: str | None = None
    k_lines: list[tuple[int, str]] = field(default_factory=list)  # (line, K as written)
    tests_settings: bool = False  # an `[nccl-tests] ... R2CC_MODE=` line seen
    command: str | None = None
    output: bool = False  # nccl-tests output seen
    hot: bool = False  # hot-repair program output seen
    iterations: bool = False  # an `Iter i/N` line seen
    end: int = 0


def is_artifact_line(line: str) -> bool:
    """Whether a (stripped) line is one only R-2CCL's artifact scripts or programs print."""
    return bool(
        _SETTINGS_RE.match(line)
        or _HARNESS_RE.match(line)
        or _CONFIG_ITERS_RE.match(line)
        or _ITER_RE.match(line)
        or _VERIFY_RE.match(line)
        or _EVIDENCE_RE.match(line)
    )


def looks_like_artifact(path: Path, max_lines: int = 200) -> bool:
    """Whether `path` is an artifact log: one of its first `max_lines` lines is a harness or
    hot-repair program line."""
    with open_text(path) as handle:
        for number, line in enumerate(iter_lines(handle), start=1):
            if number > max_lines:
                return False
            if is_artifact_line(line.strip()):
                return True
    return False


def read_artifact(path: Path, name: str | None = None) -> ArtifactLog:
    """Read one artifact log, streamed (once for its sections and events, then each run's
    lines again). `name` is how errors name the file (default: the path as given)."""
    shown = name or str(path)
    with open_text(path) as handle:
        sections = _sections(iter_lines(handle))
    with open_text(path) as handle:
        events = read_events(handle)
    harness, hot, tables, errors = [], [], [], []
    for sec in sections:
        try:
            if sec.output:
                harness.append(_harness_run(sec, path, shown))
            elif sec.hot:
                hot.append(_hot_repair_run(sec, _lines(path, sec.start, sec.end), shown))
            elif sec.title is not None:
                tables.append(ScriptTable(title=sec.title, first_line=sec.start, last_line=sec.end))
        except ArtifactError as exc:
            errors.append(exc.refusal)
    return ArtifactLog(
        path=shown,
        harness_runs=harness,
        hot_repair_runs=hot,
        tables=tables,
        errors=errors,
        r2cc_proof=_r2cc_proof(path, sections, events),
    )


def _lines(path: Path, first: int, last: int) -> Iterator[tuple[int, str]]:
    """(number, line without its end) of lines first..last of a file, streamed."""
    with open_text(path) as handle:
        for number, line in enumerate(iter_lines(handle), start=1):
            if number > last:
                return
            if number >= first:
                yield number, line.rstrip("\r\n")


def _sections(lines: Iterable[str]) -> list[_Section]:
    """Split a log at the scripts' own headers (see the module's docstring)."""
    out: list[_Section] = []
    cur = _Section(start=1)
    number = 0
    for number, raw in enumerate(lines, start=1):
        text = raw.strip()
        header = _SECTION_RE.match(text)
        tests_settings = bool(_SETTINGS_RE.match(text))
        settings = tests_settings or bool(_KSWEEP_RE.match(text))
        starts_hot = bool(_CONFIG_ITERS_RE.match(text))
        if (
            header
            or (settings and (cur.output or cur.hot or (tests_settings and cur.tests_settings)))
            or (starts_hot and (cur.output or cur.iterations))
        ):
            cur.end = number - 1
            out.append(cur)
            cur = _Section(start=number, title=header["title"] if header else None)
        if settings:
            stated = settings_of(text)
            cur.settings.update(stated)
            if cur.settings_line is None:
                cur.settings_line, cur.settings_text = number, text
            cur.tests_settings = cur.tests_settings or tests_settings
            if K_VARIABLE in stated:
                cur.k_lines.append((number, stated[K_VARIABLE]))
        if command := _COMMAND_RE.match(text):
            cur.command = command["cmd"]
        if _NCCL_TESTS_OUTPUT_RE.match(text):
            cur.output = True
        if starts_hot or _ITER_RE.match(text):
            cur.hot = True
            cur.iterations = cur.iterations or not starts_hot
    cur.end = number
    out.append(cur)
    return [s for s in out if s.end >= s.start]


def _harness_run(sec: _Section, path: Path, shown: str) -> HarnessRun:
    for number, value in sec.k_lines:
        check_k(value, shown, number)
    parsed = parse_text(
        (line + "\n" for _, line in _lines(path, sec.start, sec.end)),
        file_name=path.name,
        first_line=sec.start,
    )
    return HarnessRun(
        first_line=sec.start,
        last_line=sec.end,
        label=sec.title,
        settings=sec.settings,
        settings_line=sec.settings_line,
        settings_text=sec.settings_text,
        command=sec.command,
        parsed=parsed,
    )


def _hot_repair_run(sec: _Section, lines: Iterator[tuple[int, str]], path: str) -> HotRepairRun:
    fields: dict[str, object] = {"first_line": sec.start, "last_line": sec.end}
    devices: dict[int, Device] = {}
    iterations: list[HotRepairIteration] = []
    table: tuple[list[str], list[IterationRx]] = ([], [])
    open_iter: list[int | None] = [None]

    def handle(number: int, text: str) -> None:
        def whole(token: str, what: str) -> int:
            return _whole(token, what, path, number)

        if m := _CONFIG_ITERS_RE.match(text):
            fields.update(
                iters=whole(m["iters"], "iters"),
                size_bytes=whole(m["bytes"], "bytes"),
                count=whole(m["count"], "count"),
                datatype=m["type"],
            )
        elif m := _CONFIG_DELAY_RE.match(text):
            fields["disconnect_delay_ms"] = whole(m["ms"], "delay")
        elif m := _CONFIG_CMDS_RE.match(text):
            fields.update(disconnect_cmd=m["cut"].strip(), reconnect_cmd=m["heal"].strip())
        elif m := _RUNNING_RE.match(text):
            rank = whole(m["rank"], "rank")
            devices[rank] = Device(rank=rank, host=m["host"].split(".")[0])
        elif m := _NCCL_VERSION_RE.match(text):
            fields.setdefault("library_version", m["version"])
        elif m := _ITER_RE.match(text):
            open_iter[0] = _iteration(m, number, iterations, open_iter[0], path)
        elif _CUT_DONE_RE.match(text):
            fields.update(cut_line=number, cut_during=open_iter[0])
        elif m := _VERIFY_RE.match(text):
            fields["verification"] = Verification(
                elements=whole(m["elements"], "elements"),
                iterations=whole(m["iters"], "iterations"),
                ranks=whole(m["ranks"], "ranks"),
                wrong=whole(m["wrong"], "wrong"),
                line=number,
            )
        elif m := _EVIDENCE_RE.match(text):
            fields["failure_evidence"] = _evidence(m["text"], number, whole)
        elif m := _VERDICT_RE.match(text):
            fields.update(verdict=m["verdict"], verdict_line=number)
        elif m := _RESULT_RE.match(text):
            fields.update(result_exit=whole(m["code"], "exit"), result_line=number)
        elif m := _FAILOVER_RE.match(text):
            fields["failover_iter"] = whole(m["iter"], "iteration")

    for number, line in lines:
        if _RX_TITLE_RE.match(line.strip()):
            nics, rows, after = _rx_table(lines, path)
            table = (nics, rows)
            if after is not None:
                handle(after[0], after[1].strip())
        else:
            handle(number, line.strip())
    run = HotRepairRun.model_validate(
        {
            **fields,
            "devices": [devices[r] for r in sorted(devices)],
            "iterations": iterations,
            "nics": table[0],
            "traffic": table[1],
        }
    )
    _check_agrees(run, path)
    return run


def _iteration(
    m: re.Match[str], number: int, done: list[HotRepairIteration], open_iter: int | None, path: str
) -> int | None:
    """Record an END line; returns the iteration now in flight (None after its END)."""
    index = _whole(m["i"], "iteration", path, number)
    total = _whole(m["n"], "iterations", path, number)
    if m["what"] == "START":
        return index
    end = _END_RE.match(m["rest"])
    if end is None:
        raise ArtifactError(
            path,
            number,
            f"iteration {index}'s END line has no `STATUS (elapsed T ms)`",
            "the line is cut short or edited: restore it from the program's output",
        )
    done.append(
        HotRepairIteration(
            iteration=index,
            of=total,
            status=end["status"],
            elapsed_ms=_whole(end["ms"], "elapsed ms", path, number),
            line=number,
        )
    )
    return None if open_iter == index else open_iter


def _rx_table(
    lines: Iterator[tuple[int, str]], path: str
) -> tuple[list[str], list[IterationRx], tuple[int, str] | None]:
    """The receive table after its title line: its NICs and rows, and the first line after
    it (consumed from `lines` to find the table's end), None at the end of the run."""
    nics: list[str] = []
    rows: list[IterationRx] = []
    for number, line in lines:
        text = line.strip()
        if not nics:
            cols = _RX_COLUMNS_RE.match(text)
            if cols is None:
                raise ArtifactError(
                    path,
                    number,
                    "the receive table's title is not followed by its `Iter Time(ms) <nic>_RX` "
                    "column line",
                    "restore the table from the program's output",
                )
            nics = [c.removesuffix("_RX") for c in cols["nics"].split()]
            continue
        row = _RX_ROW_RE.match(text)
        if row is None:
            return nics, rows, (number, line)  # the verdicts follow the table
        values = row["values"].split()
        if len(values) != len(nics):
            raise ArtifactError(
                path,
                number,
                f"receive table row has {len(values)} values for {len(nics)} NICs",
                "restore the row from the program's output",
            )
        rows.append(
            IterationRx(
                iteration=_whole(row["iter"], "iteration", path, number),
                time_ms=_whole(row["ms"], "time ms", path, number),
                rx_bytes={
                    nic: None
                    if v == "NA"
                    else _whole(v, f"{nic} MiB", path, number, INT64_MAX // MIB) * MIB
                    for nic, v in zip(nics, values, strict=True)
                },
                line=number,
            )
        )
    return nics, rows, None


def _evidence(text: str, number: int, whole: Callable[[str, str], int]) -> FailureEvidence:
    m = _EVIDENCE_CUT_RE.match(text)
    if m is None:
        return FailureEvidence(text=text, line=number)
    return FailureEvidence(
        text=text,
        line=number,
        nic=m["nic"],
        iteration=whole(m["iter"], "iteration"),
        received_mib=whole(m["got"], "received MiB"),
        of_mib=whole(m["of"], "MiB"),
    )


def _whole(token: str, what: str, path: str, number: int, high: int = INT64_MAX) -> int:
    """A whole number of the log, or ArtifactError naming its line when it is beyond what any
    run can mean (the tables hold int64)."""
    try:
        return bounded_int(token, what, high=high)
    except BadNumber as refused:
        raise ArtifactError(
            path,
            number,
            str(refused),
            "the line is edited or corrupt: restore it from the program's output",
        ) from None


def _check_agrees(run: HotRepairRun, path: str) -> None:
    """Refuse a run whose lines contradict each other (see the module's docstring)."""
    ends = {it.iteration: it for it in run.iterations}
    for row in run.traffic:
        end = ends.get(row.iteration)
        if end is not None and end.elapsed_ms != row.time_ms:
            raise ArtifactError(
                path,
                row.line,
                f"the receive table gives iteration {row.iteration} {row.time_ms} ms, its END "
                f"line {end.line} {end.elapsed_ms} ms",
                "the table and the iterations come from different runs: keep one run per log",
            )
    if run.result_exit is None or run.result_line is None:
        return
    code, line = run.result_exit, run.result_line
    wrong = run.verification.wrong if run.verification else None
    if code == 0:
        failed = [it for it in run.iterations if it.status != "OK"]
        missing = run.iters is not None and len(run.iterations) < run.iters
        why = (
            f"iteration {failed[0].iteration} ended {failed[0].status} (line {failed[0].line})"
            if failed
            else f"only {len(run.iterations)} of {run.iters} iterations ended"
            if missing
            else f"line {run.verification.line} counts {wrong} wrong elements"
            if run.verification and wrong
            else f"line {run.verdict_line} says TEST FAIL"
            if run.verdict == "FAIL"
            else None
        )
        if why:
            raise ArtifactError(
                path,
                line,
                f"`[result] exit=0` says the run passed, but {why}",
                "the log contradicts itself: re-run the test or correct the [result] line",
            )
    elif code == 2 and wrong == 0 and all(it.status == "OK" for it in run.iterations):
        raise ArtifactError(
            path,
            line,
            "`[result] exit=2` says wrong results, but every iteration ended OK and "
            f"line {run.verification.line if run.verification else '?'} counts 0 wrong elements",
            "the log contradicts itself: re-run the test or correct the [result] line",
        )
    elif code == 3 and run.failure_evidence and run.failure_evidence.iteration is not None:
        raise ArtifactError(
            path,
            line,
            "`[result] exit=3` says the cut missed a running AllReduce, but line "
            f"{run.failure_evidence.line} says it cut iteration {run.failure_evidence.iteration}",
            "the log contradicts itself: re-run the test or correct the [result] line",
        )


def _r2cc_proof(path: Path, sections: list[_Section], events: list[Event]) -> Evidence | None:
    """The first line that proves R-2CCL: a WARN from its sources (`r2cc/...cc:N`, `R2CC ...`)
    or an R2CC event, else the first harness line that sets R2CC_MODE, else the hot-repair
    program's failure evidence."""
    for ev in events:
        if _is_r2cc_event(ev):
            return Evidence(line=ev.line, text=ev.text, source=path.name)
    stated = [s.settings_line for s in sections if s.tests_settings and s.settings_line]
    hot = [s for s in sections if s.hot]
    wanted = stated[0] if stated else None
    for number, line in _lines(path, 1, wanted or (hot[-1].end if hot else 0)):
        text = line.strip()
        if number == wanted or (wanted is None and _EVIDENCE_RE.match(text)):
            return Evidence(line=number, text=text, source=path.name)
    return None


def library_basis(log: ArtifactLog, run: HarnessRun | HotRepairRun, events: list[Event]) -> str:
    """How a run is known to be R-2CCL, naming the line: R-2CCL's own WARN or R2CC line in
    the run, else the harness line that set its R2CC_MODE, else the file's proof."""
    own = next((e for e in events if _is_r2cc_event(e)), None)
    if own is not None:
        return f"R2CC log lines (R-2CCL's own line {own.line}: {own.text})"
    if isinstance(run, HarnessRun) and run.settings_text and run.settings_line:
        return (
            f"R-2CCL's artifact harness set its variables (line {run.settings_line}: "
            f"{run.settings_text})"
        )
    proof = log.r2cc_proof
    if proof is not None:
        return f"R-2CCL's artifact log (line {proof.line}: {proof.text})"
    return "R-2CCL's artifact harness (its scripts' lines), no R2CC line"


def _is_r2cc_event(ev: Event) -> bool:
    return ev.kind.value.startswith("r2cc_") or (
        ev.kind is EventKind.NCCL_WARN and bool(_R2CC_SOURCE_RE.search(ev.text))
    )


# --------------------------------------------------------------------------- for `parse`


def events_between(events: list[Event], first: int, last: int) -> list[Event]:
    """The events of lines first..last."""
    return [e for e in events if first <= e.line <= last]
