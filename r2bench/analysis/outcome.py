"""Classify how a run ended, from its exit status, parsed output and log events.

Public API: `classify(...) -> Outcome`. Rules, first match wins:

1. `build_failed`      -> build_failed (reason from the first compiler errors of `build_log`)
2. `interrupted`       -> interrupted
3. nccl-tests `Test timeout`, a framework's watchdog timeout (PyTorch ProcessGroupNCCL's
   `Watchdog caught collective operation timeout`) or the harness deadline passed -> timeout
4. launch errors (mpirun could not start it, missing binary/library) and no results -> launch_failed
4b. nothing in the input is nccl-tests output and no log event is in it -> not_nccl_tests
5. a process got a signal (its handler's signal line and backtrace), a rank died by a signal,
   a network/socket error, an NCCL fatal error (`async fatal event on QP`, `communicator
   encountered a fatal error`, a framework's `ncclRemoteError`/`NCCL error` report),
   `Test NCCL failure`, a non-zero rank exit -> crashed, naming the rank and host that failed
   first. Network and fatal errors of a job that went on to its end (exit 0, or no exit code
   and output that ends complete) and nothing else: survived, see 9
6. `#wrong` > 0 or `Out of bounds values : N FAILED` -> wrong_results
7. any other non-zero exit -> crashed
8. output that stops before the end its tool and version print (`nccltests.text.ends_complete`:
   `# Collective test concluded` where the version prints it, else the `# Avg bus bandwidth`
   footer, as rccl-tests and nccl-tests before 2.16.7 end) with no sign of failure ->
   incomplete (cut short, still running)
9. otherwise -> ok

`software_fault_check` then turns an `ok` run whose R2CC_DISCONNECTED_HCA named a device, and
whose logs show no failover, into `fault_not_injected` (R-2CCL injects it over IB only).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from r2bench.config.r2ccl import arms_software_fault
from r2bench.config.recipe import KnownFailure
from r2bench.parse.buildlog import analyze
from r2bench.parse.events import clean
from r2bench.parse.models import (
    Event,
    EventKind,
    Evidence,
    LaunchInfo,
    Outcome,
    OutcomeStatus,
    ParsedNcclTests,
)
from r2bench.parse.nccltests.text import ended_program, ends_complete, expects_concluding_line

MAX_EVIDENCE = 8
_NETWORK_KINDS = (
    EventKind.NET_IB_COMPLETION_ERROR,
    EventKind.SOCKET_ERROR,
    EventKind.NCCL_FATAL_ERROR,
)


def classify(
    exit_code: int | None,
    *,
    timed_out: bool = False,
    interrupted: bool = False,
    build_failed: bool = False,
    launch: LaunchInfo | None = None,
    parsed: ParsedNcclTests | None = None,
    events: Sequence[Event] = (),
    build_log: str | None = None,
    known_failures: Sequence[KnownFailure] = (),
    source: str | None = None,
    event_sources: Sequence[str] = (),
) -> Outcome:
    """Classify one run.

    `exit_code` is the launcher's exit status (None if unknown; negative = killed by that
    signal, as Python's subprocess reports it). `timed_out` means the harness's own deadline
    killed it. `source` names the log file the events' line numbers refer to; where the events
    come from several files, `event_sources` names each one's (in the order of `events`;
    `source` is the default and names the result rows' file). For a failed
    build, `known_failures` (the recipe's) explain the causes found in `build_log`.
    """
    if build_failed:
        return _build_failed(build_log or "", source, known_failures)
    ctx = _Context(parsed, events, source, event_sources)
    if interrupted:
        return Outcome(
            status=OutcomeStatus.INTERRUPTED,
            reason=f"interrupted by the user after {ctx.n_rows} result rows",
            evidence=ctx.last_row_evidence(),
        )
    rules = (_timeout, _launch_failed, _not_nccl_tests, _crashed_by_events, _wrong_results)
    for rule in (*rules, _fallback):
        outcome = rule(ctx, exit_code, timed_out, launch)
        if outcome is not None:
            return outcome
    raise AssertionError("unreachable: _fallback always decides")


class _Context:
    """Inputs of the rules plus small helpers shared by them."""

    def __init__(
        self,
        parsed: ParsedNcclTests | None,
        events: Sequence[Event],
        source: str | None,
        event_sources: Sequence[str] = (),
    ):
        self.parsed = parsed
        self.events = list(events)
        self.source = source
        # the rules filter the events but keep the objects: their identity finds their file
        # (no event_sources: every line is from `source`)
        self._source_of = {id(e): name for e, name in zip(self.events, event_sources, strict=False)}
        self.n_rows = len(parsed.rows) if parsed else 0
        self.pid_rank: dict[tuple[str | None, int | None], int] = (
            {(d.host, d.pid): d.rank for d in parsed.devices} if parsed else {}
        )

    def ranks_of_pid(self, host: str | None, pid: int | None) -> list[int]:
        """The ranks one process drives (several with `-g N`)."""
        devices = self.parsed.devices if self.parsed else []
        return sorted({d.rank for d in devices if (d.host, d.pid) == (host, pid)})

    def of(self, *kinds: EventKind) -> list[Event]:
        return [e for e in self.events if e.kind in kinds]

    def evidence(self, events: Iterable[Event]) -> list[Evidence]:
        return [
            Evidence(line=e.line, text=e.text, source=self._source_of.get(id(e), self.source))
            for e in events
        ][:MAX_EVIDENCE]

    def rank_of(self, event: Event) -> int | None:
        """MPI rank of an event: the nccl-tests `# Rank` table wins over NCCL's [device]."""
        if event.pid is not None and (event.host, event.pid) in self.pid_rank:
            return self.pid_rank[(event.host, event.pid)]
        return event.rank

    def rank_label(self, event: Event) -> str:
        rank = self.rank_of(event)
        who = f"rank {rank}" if rank is not None else "a rank (its number not logged)"
        return f"{who} on {event.host or 'a host not named in the log'}"

    def last_row_evidence(self) -> list[Evidence]:
        if not self.parsed or not self.parsed.rows:
            return []
        row = self.parsed.rows[-1]
        text = f"last result: {row.size_bytes} B {row.placement} busbw {row.busbw_gbps} GB/s"
        return [Evidence(line=row.line, text=text, source=self.source)]


def _timeout(
    ctx: _Context, exit_code: int | None, timed_out: bool, launch: LaunchInfo | None
) -> Outcome | None:
    hits = ctx.of(EventKind.TEST_TIMEOUT)
    if hits:
        first = hits[0]
        secs = first.details.get("timeout_s", "?")
        return Outcome(
            status=OutcomeStatus.TIMEOUT,
            reason=f"nccl-tests timeout ({secs}s, -T) on {first.host}: a collective stopped "
            f"progressing after {ctx.n_rows} result rows",
            failed_host=first.host,
            evidence=ctx.evidence(hits) + ctx.last_row_evidence(),
        )
    watchdog = ctx.of(EventKind.COLLECTIVE_TIMEOUT)
    if watchdog:
        first = watchdog[0]
        what = first.details
        op = f"{what['op']} " if what.get("op") else ""
        ran = f", ran {what['ran_ms']} ms" if what.get("ran_ms") else ""
        limit = f" of its {what['timeout_ms']} ms timeout" if what.get("timeout_ms") else ""
        rank = ctx.rank_of(first)
        who = f"rank {rank}" if rank is not None else "a rank"
        return Outcome(
            status=OutcomeStatus.TIMEOUT,
            reason=f"collective watchdog timeout: {who}'s {op}collective stopped progressing"
            f"{ran}{limit} (after {ctx.n_rows} result rows)",
            failed_rank=rank,
            failed_host=first.host,
            evidence=ctx.evidence(watchdog[:2]) + ctx.last_row_evidence(),
        )
    if timed_out:
        limit = f" of {launch.deadline_s:g} s" if launch and launch.deadline_s else ""
        return Outcome(
            status=OutcomeStatus.TIMEOUT,
            reason=f"harness deadline{limit} passed after {ctx.n_rows} result rows; run killed",
            evidence=ctx.last_row_evidence(),
        )
    return None


def _launch_failed(
    ctx: _Context, exit_code: int | None, timed_out: bool, launch: LaunchInfo | None
) -> Outcome | None:
    if ctx.n_rows:
        return None
    hits = ctx.of(EventKind.LAUNCH_ERROR)
    started = ctx.parsed is not None and ctx.parsed.nccl_tests_version is not None
    if hits:
        return Outcome(
            status=OutcomeStatus.LAUNCH_FAILED,
            reason=f"could not start the run: {hits[0].message}",
            failed_host=hits[0].host,
            evidence=ctx.evidence(hits),
        )
    if exit_code in (126, 127) and not started:
        cmd = f" ({launch.command})" if launch and launch.command else ""
        return Outcome(
            status=OutcomeStatus.LAUNCH_FAILED,
            reason=f"launcher exited {exit_code} (command not found or not executable){cmd}",
        )
    return None


def _not_nccl_tests(
    ctx: _Context, exit_code: int | None, timed_out: bool, launch: LaunchInfo | None
) -> Outcome | None:
    if ctx.parsed is None or ctx.parsed.is_nccl_tests or ctx.events or exit_code:
        return None
    return Outcome(
        status=OutcomeStatus.NOT_NCCL_TESTS,
        reason="no nccl-tests output (no header, result row or footer) and no NCCL/MPI log line",
    )


def _signal_in_process(ctx: _Context) -> Outcome | None:
    """A process's own signal handler (Open MPI's) printed the signal and a backtrace."""
    signals = ctx.of(EventKind.PROCESS_SIGNAL)
    if not signals:
        return None
    first = signals[0]
    frames = [
        e
        for e in ctx.of(EventKind.BACKTRACE_FRAME)
        if (e.host, e.pid) == (first.host, first.pid) and e.details.get("frame") != "0"
    ]
    where = ""
    if frames:
        top = frames[0].details
        name = top.get("object", "").rsplit("/", 1)[-1]
        where = f" in {top['symbol']} ({name})" if top.get("symbol") else f" in {name}"
    ranks = ctx.ranks_of_pid(first.host, first.pid)
    rank = ranks[0] if len(ranks) == 1 else None
    who = f"rank {rank}" if rank is not None else f"process {first.pid}"
    if len(ranks) > 1:
        who += f" (ranks {', '.join(map(str, ranks))})"
    sig = first.details
    return Outcome(
        status=OutcomeStatus.CRASHED,
        reason=f"{who} on {first.host} got signal {sig.get('signal')} "
        f"({sig.get('signal_name')}){where} (after {ctx.n_rows} result rows)",
        failed_rank=rank,
        failed_host=first.host,
        evidence=ctx.evidence([first, *frames[:2]]),
    )


def _crashed_by_events(
    ctx: _Context, exit_code: int | None, timed_out: bool, launch: LaunchInfo | None
) -> Outcome | None:
    in_process = _signal_in_process(ctx)
    if in_process is not None:
        return in_process
    signaled = ctx.of(EventKind.MPI_PROCESS_SIGNALED)
    network = sorted(ctx.of(*_NETWORK_KINDS), key=lambda e: (e.time is None, e.time, e.line))
    nccl_fail = ctx.of(EventKind.TEST_NCCL_FAILURE)
    exits = [e for e in ctx.of(EventKind.MPI_PROCESS_EXIT) if e.details.get("exit_code") != "0"]
    cuda_fail = [e for e in ctx.of(EventKind.TEST_FAILURE) if e.details.get("what")]
    if not (signaled or network or nccl_fail or exits or cuda_fail):
        return None
    went_on = exit_code == 0 or (
        exit_code is None and ctx.parsed is not None and ends_complete(ctx.parsed)
    )
    if went_on and not (signaled or nccl_fail or exits or cuda_fail):
        return None  # network errors the job survived: the resilience under test (see _fallback)
    culprit = (signaled or network or nccl_fail or cuda_fail or exits)[0]
    rank, host, who = ctx.rank_of(culprit), culprit.host, ctx.rank_label(culprit)
    if signaled:
        sig = culprit.details
        what = f"{who} was killed by signal {sig.get('signal')} ({sig.get('signal_name') or '?'})"
    elif network:
        fatal = culprit.kind is EventKind.NCCL_FATAL_ERROR
        what = (
            f"{who} hit {'a fatal NCCL' if fatal else 'a network'} error first: {culprit.message}"
        )
    elif exits:
        what = f"{who} exited with code {culprit.details.get('exit_code', '?')}"
    else:
        what = f"{who} reported: {culprit.message}"
    if network and culprit.kind not in _NETWORK_KINDS:
        what += f"; then {ctx.rank_label(network[0])} saw: {network[0].message}"
    evidence = ctx.evidence([culprit, *network[:2], *nccl_fail[:1], *cuda_fail[:1], *exits[:1]])
    return Outcome(
        status=OutcomeStatus.CRASHED,
        reason=f"{what} (after {ctx.n_rows} result rows)",
        failed_rank=rank,
        failed_host=host,
        evidence=_dedupe(evidence),
    )


def _wrong_results(
    ctx: _Context, exit_code: int | None, timed_out: bool, launch: LaunchInfo | None
) -> Outcome | None:
    parsed = ctx.parsed
    if parsed is None or not (parsed.wrong_rows or parsed.oob_failed):
        return None
    bad = parsed.wrong_rows
    evidence = [
        Evidence(
            line=r.line,
            text=f"{r.size_bytes} B {r.type} {r.redop} {r.placement}: #wrong {r.wrong}",
            source=ctx.source,
        )
        for r in bad[:MAX_EVIDENCE]
    ]
    if parsed.oob_failed:
        text = f"# Out of bounds values : {parsed.oob_values} FAILED"
        evidence.append(Evidence(text=text, source=ctx.source))
    sizes = sorted({r.size_bytes for r in bad})
    return Outcome(
        status=OutcomeStatus.WRONG_RESULTS,
        reason=f"{len(bad)} result(s) with #wrong > 0 (sizes {sizes[:5]})"
        if bad
        else f"out of bounds values: {parsed.oob_values} FAILED",
        evidence=evidence,
    )


def _fallback(
    ctx: _Context, exit_code: int | None, timed_out: bool, launch: LaunchInfo | None
) -> Outcome:
    if exit_code is not None and exit_code != 0:
        sig = -exit_code if exit_code < 0 else exit_code - 128 if exit_code > 128 else None
        how = f"killed by signal {sig}" if sig else f"exited with code {exit_code}"
        return Outcome(
            status=OutcomeStatus.CRASHED,
            reason=f"launcher {how} after {ctx.n_rows} result rows",
            evidence=ctx.last_row_evidence(),
        )
    if ctx.parsed is not None and not ends_complete(ctx.parsed):
        ends = (
            "# Collective test concluded"
            if expects_concluding_line(ctx.parsed)
            else "the '# Avg bus bandwidth' footer"
        )
        # Nothing says it failed: a paste cut short, a log still being written, a hang that
        # was never killed. Calling it crashed would assert a failure nobody saw.
        exited = "exited 0 but its " if exit_code == 0 else ""
        return Outcome(
            status=OutcomeStatus.INCOMPLETE,
            reason=f"{exited}output ends after {ctx.n_rows} result rows without the end of the "
            f"test ({ends}) and without any sign of failure (cut short or still running?)",
            evidence=ctx.last_row_evidence(),
        )
    survived = ctx.of(*_NETWORK_KINDS)
    # the footer's average is a figure of its own (`avg_busbw_gbps`): not repeated here
    reason = (
        f"{ctx.n_rows} result rows, to the end of the test"
        if ctx.parsed
        else (f"exit code {exit_code}")
    )
    if ctx.parsed is not None and not ctx.parsed.footer and ended_program(ctx.parsed):
        reason = (
            f"the program ended as it meant to: every communicator rank it set up was torn down"
            f" ({ctx.parsed.comms_destroyed} `Destroy COMPLETE` lines)"
        )
    if survived:
        reason += f"; survived {len(survived)} network error event(s), first: {survived[0].message}"
    return Outcome(status=OutcomeStatus.OK, reason=reason, evidence=ctx.evidence(survived[:3]))


def _build_failed(log: str, source: str | None, known: Sequence[KnownFailure]) -> Outcome:
    failure = analyze(log, known)
    reason = "build failed"
    evidence = []
    if failure.first_error is not None:
        reason += f": {clean(failure.first_error.text)}"
        evidence.append(
            Evidence(
                line=failure.first_error.line, text=clean(failure.first_error.text), source=source
            )
        )
    if failure.explanations:
        reason += f" ({'; '.join(failure.explanations)})"
    return Outcome(status=OutcomeStatus.BUILD_FAILED, reason=reason, evidence=evidence)


def _dedupe(evidence: list[Evidence]) -> list[Evidence]:
    seen: set[int | None] = set()
    out = []
    for ev in evidence:
        if ev.line not in seen:
            seen.add(ev.line)
            out.append(ev)
    return out


# Log events that show R-2CCL's failure response ran (a software fault that fired).
FAILOVER_KINDS = frozenset(
    {
        EventKind.R2CC_HOT_REPAIR_BROADCAST,
        EventKind.R2CC_HOT_REPAIR_RECEIVED,
        EventKind.R2CC_STEP_SYNC,
        EventKind.R2CC_HOT_REPAIR_DETECTED,
        EventKind.R2CC_GATHER_COMPLETE,
        EventKind.R2CC_INJECTED_FAILURE,
    }
)


def software_fault_check(outcome: Outcome, env: dict[str, str], events: Sequence[Event]) -> Outcome:
    """`fault_not_injected` for an ok run that armed R2CC_DISCONNECTED_HCA with no failover in
    its logs; any other outcome is returned as it is."""
    armed = str(env.get("R2CC_DISCONNECTED_HCA", "")).strip()
    if outcome.status is not OutcomeStatus.OK or not arms_software_fault(armed):
        return outcome
    if any(event.kind in FAILOVER_KINDS for event in events):
        return outcome
    return Outcome(
        status=OutcomeStatus.FAULT_NOT_INJECTED,
        reason=f"R2CC_DISCONNECTED_HCA={armed} was armed but no failover followed (no "
        "HOT_REPAIR or STEP_SYNC line): R-2CCL injects it in its IB transport only, so over "
        "NET/Socket this run measured no fault",
        evidence=outcome.evidence,
    )
