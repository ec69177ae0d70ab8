"""One run, stage by stage: preflight, launch, faults, wait, teardown, collect, record.

Each stage is a method of `RunExecutor`, called in that order by `execute`; `teardown` always
runs (a crash, a deadline or Ctrl-C included), so no fault and no process of a run outlives it.
What the job prints is streamed into the run folder line by line as it arrives: a controller
killed mid-run leaves the output so far on disk.
"""

from __future__ import annotations

import logging
import shlex
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from contextlib import suppress
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import IO, TypeVar

from r2bench.analysis.decision import JobFacts
from r2bench.analysis.parsedrun import (
    RunOutputs,
    TransportTap,
    log_events,
    parse_outputs,
    parse_run,
)
from r2bench.config.testbed import Testbed
from r2bench.errors import EnvironmentFailure
from r2bench.nodes import CommandResult, NodeError, NodePool, StreamLine
from r2bench.parse.models import Outcome, OutcomeStatus
from r2bench.parse.verify import read_verification
from r2bench.plan.build import CHECKPOINT_DIR, RUN_MARKER
from r2bench.plan.model import Plan, PlannedRun
from r2bench.runfolder import runformat, runmodel
from r2bench.runfolder import store as st
from r2bench.runfolder.provenance import (
    GitState,
    Provenance,
    git_state,
    r2bench_checkout,
    redact_env,
)
from r2bench.sweep import counters
from r2bench.sweep.agent import NodeAgent
from r2bench.sweep.faults import FaultDriver, FaultError
from r2bench.sweep.firstresult import FirstResultWatch, training_update
from r2bench.sweep.flood import LogCondenser
from r2bench.sweep.observers import collect_observers, start_observers
from r2bench.sweep.preflight import preflight_problems
from r2bench.sweep.restarts import Attempt, AttemptLog, restart_pause, supervised_outcome
from r2bench.sweep.schedule import injects_soon_after_launch
from r2bench.tables.rowcache import fingerprint
from r2bench.tables.rows import folder_rows

log = logging.getLogger(__name__)

T = TypeVar("T")


class Stage(str, Enum):
    """The stages of one run, in the order `RunExecutor.execute` goes through them (their
    values are what the progress display shows)."""

    PREFLIGHT = "preflight"
    LAUNCH = "launch"
    FAULTS = "faults"
    WAIT = "wait"
    TEARDOWN = "teardown"
    COLLECT = "collect"
    RECORD = "record"


CLOCK_REPROBE_S = 30.0
"""The nodes' clock offsets are probed again when older (a drift of 100 ppm, a poor clock's,
is 3 ms in that time: the order of a probe's own round trip)."""
ARM_LEAD_S = 1.0
"""A fault due less than this after the launch is armed before the job starts; later ones arm
while it launches (an injector is ready in tens of ms)."""
DEADLINE_GRACE_S = 15.0
"""Past the run's deadline, the controller stops waiting for the node-side kill."""


class SweepStop(EnvironmentFailure, RuntimeError):
    """The sweep cannot go on: a node is lost, a fault was not reverted, a process survived."""


@dataclass(frozen=True)
class RunResult:
    """How one run ended, for the progress display and the summary."""

    run_id: str
    status: OutcomeStatus
    reason: str
    job_seconds: float
    fatal: str | None = None
    fault_trouble: str | None = None
    """Why a fault of the run was not carried out as planned (the run is recorded all the same)."""


@dataclass
class _Job:
    """The launched job: its output files, its result and when it printed its first result."""

    stdout: IO[str]
    stderr: IO[str]
    stdout_times: IO[str]
    stderr_times: IO[str]
    on_first_result: Callable[[float], None]
    on_update: Callable[[int, float], None]
    result: CommandResult | None = None
    error: NodeError | None = None
    first_result: FirstResultWatch = field(default_factory=FirstResultWatch)
    done: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    condensers: dict[str, LogCondenser] = field(
        default_factory=lambda: {"stdout": LogCondenser(), "stderr": LogCondenser()}
    )

    def _streams(self, stream: str) -> tuple[IO[str], IO[str]]:
        if stream == "stdout":
            return self.stdout, self.stdout_times
        return self.stderr, self.stderr_times

    def on_line(self, line: StreamLine) -> None:
        with self.lock:
            if self.condensers[line.stream].admit(line.text, line.time):
                text, times = self._streams(line.stream)
                text.write(line.text + "\n")
                times.write(f"{line.time:.6f}\n")
                text.flush()
                times.flush()
        if line.stream != "stdout":
            return
        if self.first_result.feed(line.text):
            self.on_first_result(line.time)
        update = training_update(line.text)
        if update is not None:
            self.on_update(update, line.time)

    def close(self) -> None:
        """Account for the log lines left out (one summary line per shape), then close."""
        with self.lock:
            for stream, condenser in self.condensers.items():
                text, times = self._streams(stream)
                for when, summary in condenser.summary():
                    text.write(summary + "\n")
                    times.write(f"{when:.6f}\n")
                text.close()
                times.close()


@dataclass(frozen=True)
class _EndedRun:
    """A run whose job has ended and whose nodes are clean: what its record is made of."""

    run: PlannedRun
    folder: st.RunFolder
    job: _Job | None
    driver: FaultDriver
    started: float
    ended: float
    attempts: list[Attempt]
    fatal: list[str]
    interrupted: bool
    agent_logs: dict[str, list[str]]


class _RecordGate:
    """Holds each run's collect and record until the next run's job has launched (or that
    run ended without launching one, or the sweep ends). They then overlap a job, not the
    next run's preflight and launch, whose round trips to the nodes would share the
    controller's CPU with them."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._moves = 0
        self._open = False

    def ticket(self) -> int:
        """Where the sweep is now; `wait(ticket)` returns once it has moved on."""
        with self._cond:
            return self._moves

    def advance(self) -> None:
        """A job launched, or a run ended."""
        with self._cond:
            self._moves += 1
            self._cond.notify_all()

    def open(self) -> None:
        """No more runs: nothing waits from now on."""
        with self._cond:
            self._open = True
            self._cond.notify_all()

    def wait(self, ticket: int) -> None:
        """Until the sweep has moved past `ticket`, or the gate is open."""
        with self._cond:
            self._cond.wait_for(lambda: self._open or self._moves > ticket)


@dataclass
class RunExecutor:
    """Carries out the runs of one plan on a testbed whose agents are started."""

    plan: Plan
    testbed: Testbed
    pool: NodePool
    agents: Mapping[str, NodeAgent]
    store: st.RunStore
    rerun_command: str
    on_stage: Callable[[str, str], None] = lambda run_id, stage: None
    interrupted: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self._threads = ThreadPoolExecutor(max_workers=max(1, len(self.agents)))
        self._clock: tuple[float, dict[str, float]] | None = None  # (when, offsets)
        # one worker: runs are collected and recorded one at a time, in the order they ran
        self._background = ThreadPoolExecutor(max_workers=1, thread_name_prefix="r2bench-record")
        # once, there too, beside the nodes' first questions: git takes tens of ms
        self._git: Future[GitState | None] = self._background.submit(git_state, r2bench_checkout())
        self._gate = _RecordGate()
        # Nodes that can observe a run with NCCL's RAS client: asked once per sweep.
        has_ras = self._each_agent(lambda a: a.run(["sh", "-c", "command -v ncclras >/dev/null"]))
        self._ras_nodes = {name for name, code in has_ras.items() if code == 0}

    def _each_agent(self, operation: Callable[[NodeAgent], T]) -> dict[str, T | NodeError]:
        """`operation` on every node's agent at once (a node's error is returned, not raised)."""
        return {name: future.result() for name, future in self._start_each(operation).items()}

    def _start_each(self, operation: Callable[[NodeAgent], T]) -> dict[str, Future[T | NodeError]]:
        """`operation` started on every node's agent; the caller collects the results."""

        def guarded(agent: NodeAgent) -> T | NodeError:
            try:
                return operation(agent)
            except NodeError as exc:
                return exc

        return {name: self._threads.submit(guarded, a) for name, a in self.agents.items()}

    def _enter(self, run_id: str, stage: Stage) -> None:
        """Tell the display that the run moved to `stage`."""
        self.on_stage(run_id, stage.value)

    def execute(self, run: PlannedRun) -> RunResult:
        """Carry out one run, record included; a run that fails is recorded, one that cannot
        be cleaned up raises SweepStop after its record is written."""
        recorded = self.start(run)
        self.finish_background()
        return recorded.result()

    def start(self, run: PlannedRun) -> Future[RunResult]:
        """Carry out one run up to its teardown; its collect and record then go on in the
        background (one run at a time, in order) while the next run's job runs: the nodes
        are clean once teardown is done, and what is left reads the run's own folder.
        The future's result is the run's; a run that cannot be cleaned up is recorded here
        and raises SweepStop. `finish_background` waits for what is left."""
        run_id = run.spec.run_id
        self._enter(run_id, Stage.PREFLIGHT)
        self.preflight(run)
        folder = self.store.start(run.spec, self._provenance(run))
        driver = FaultDriver(run, self.agents, self._offsets(run))
        job: _Job | None = None
        attempts: list[Attempt] = []
        fatal: list[str] = []
        started = ended = time.time()
        try:
            self._enter(run_id, Stage.LAUNCH)
            # The samplers start and the injectors arm while the job launches (all of them
            # wait on the nodes; a job's first traffic is well over their tens of ms away),
            # unless a fault is due right after the launch: then the job waits for them.
            # The samplers are waited for even when arming fails: one still starting during
            # teardown would miss its stop and the kill, and outlive the run.
            self.prepare_run_dir(run)
            sampling = self._start_each(lambda agent: counters.start(agent, run, self.testbed))
            try:
                if injects_soon_after_launch(run.faults, ARM_LEAD_S):
                    driver.arm()
                else:
                    driver.request_arming()
                    job, started = self.launch(run, folder, driver)
                    driver.wait_armed()
            finally:
                wait_futures(sampling.values())
            if job is None:
                job, started = self.launch(run, folder, driver)
            self._enter(run_id, Stage.FAULTS)
            driver.start(started)
            self._gate.advance()  # the run before this one is recorded while this job runs
            self._enter(run_id, Stage.WAIT)
            attempts = self.supervise(run, folder, job, started)
        except FaultError as exc:
            driver.problems.append(str(exc))
        finally:
            ended = time.time()
            self._enter(run_id, Stage.TEARDOWN)
            fatal += self.teardown(run, driver)
            if job is not None:
                job.done.wait(DEADLINE_GRACE_S)
                job.close()
            self._gate.advance()  # ended: the run before waits no longer, launched or not
        ended_run = _EndedRun(
            run, folder, job, driver, started, ended, attempts, fatal,
            interrupted=self.interrupted.is_set(), agent_logs=self._take_agent_logs(),
        )  # fmt: skip
        if not fatal:
            return self._background.submit(self._finish_later, ended_run, self._gate.ticket())
        self.finish_background()  # the records stay in run order
        result = self._finish(ended_run)
        raise SweepStop(result.fatal or "")

    def finish_background(self) -> None:
        """Wait until every run started has been collected and recorded (no record waits
        for a next run from now on)."""
        self._gate.open()
        self._background.submit(lambda: None).result()

    def _finish_later(self, ended: _EndedRun, ticket: int) -> RunResult:
        self._gate.wait(ticket)
        return self._finish(ended)

    def _finish(self, ended: _EndedRun) -> RunResult:
        """Collect and record a run whose nodes are clean again."""
        run, folder, job, driver = ended.run, ended.folder, ended.job, ended.driver
        self._enter(run.spec.run_id, Stage.COLLECT)
        self.collect(run, folder, job, ended.agent_logs)
        self._enter(run.spec.run_id, Stage.RECORD)
        outcome = self.record(
            run, folder, job, driver, ended.started, ended.ended, ended.attempts, ended.interrupted
        )
        return RunResult(
            run.spec.run_id,
            outcome.status,
            outcome.reason,
            ended.ended - ended.started,
            "; ".join(ended.fatal) or None,
            "; ".join(driver.problems) or None,
        )

    def _take_agent_logs(self) -> dict[str, list[str]]:
        """What each agent logged during the run, taken now (the next run's lines are its)."""
        logs = {name: list(agent.log) for name, agent in self.agents.items() if agent.log}
        for agent in self.agents.values():
            agent.log.clear()
        return logs

    # ---- stages -----------------------------------------------------------------------------
    def preflight(self, run: PlannedRun) -> None:
        """Every node of the run: data links up, no process of any run, no fault recorded."""
        own = frozenset(r.spec.run_id for r in self.plan.runs)
        problems = preflight_problems(self.testbed, self.pool, self.agents, run, own)
        if problems:
            raise SweepStop("preflight failed: " + "; ".join(problems))

    def launch(
        self, run: PlannedRun, folder: st.RunFolder, driver: FaultDriver
    ) -> tuple[_Job, float]:
        """Start the plan's launch line on the launch node, streaming its output to disk."""
        offset = driver.offsets.get(run.launch.node, 0.0)
        job = _Job(
            stdout=folder.stream_path(runformat.STDOUT).open("w", encoding="utf-8"),
            stderr=folder.stream_path(runformat.STDERR).open("w", encoding="utf-8"),
            stdout_times=folder.stream_path(runformat.STDOUT_TIMES).open("w", encoding="utf-8"),
            stderr_times=folder.stream_path(runformat.STDERR_TIMES).open("w", encoding="utf-8"),
            on_first_result=lambda node_time: driver.set_anchor("first_result", node_time - offset),
            on_update=lambda n, node_time: driver.set_anchor(f"update {n}", node_time - offset),
        )
        start_observers(
            self.pool, run, self._ras_nodes
        )  # ncclras -m -f json where present (R2B_RUN-tagged)
        return job, self._start_attempt(run, job, run.spec.deadline_s)

    def prepare_run_dir(self, run: PlannedRun) -> None:
        """Create the run's folder on the launch node, without what an earlier run of the
        same spec left there: its result.json would make the job write result.json.0 and be
        collected in its place; its checkpoints would make a restart run resume at its first
        start. Done before the samplers and injectors are asked to start, so that the launch,
        which waits on it, does not wait while they share the node with it."""
        q = shlex.quote(run.run_dir)
        stale = f"{q}/result.json {q}/result.json.* {q}/{CHECKPOINT_DIR}"
        mkdir = ["sh", "-c", f"mkdir -p {q} && rm -rf {stale}"]
        if self.agents[run.launch.node].run(mkdir) != 0:
            raise SweepStop(f"{run.launch.node}: cannot create {run.run_dir}")

    def _start_attempt(self, run: PlannedRun, job: _Job, timeout_s: float) -> float:
        """Run the launch line once more on the launch node (its output appended to the job's
        files); returns when it started (controller clock)."""
        node = self.pool[run.launch.node]
        job.result, job.error = None, None
        job.done.clear()

        def target() -> None:
            try:
                # The launcher itself carries the run's mark too (its ranks get it with -x),
                # so ending a run by its mark takes mpirun and its wrappers with it.
                job.result = node.stream(
                    run.launch.command,
                    job.on_line,
                    timeout=timeout_s,
                    check=False,
                    env={RUN_MARKER: run.spec.run_id},
                )
            except NodeError as exc:
                job.error = exc
            finally:
                job.done.set()

        started = time.time()
        threading.Thread(target=target, daemon=True, name="r2bench-job").start()
        return started

    def supervise(
        self, run: PlannedRun, folder: st.RunFolder, job: _Job, started: float
    ) -> list[Attempt]:
        """Wait for the job; a restart run's job that failed by itself is launched again
        (`restarts.restart_pause` decides), each start and end appended to attempts.jsonl.
        Returns every attempt, the last one last."""
        recovery = run.spec.recovery
        record = AttemptLog(folder.path / runformat.ATTEMPTS) if recovery else None
        deadline_at = started + run.spec.deadline_s
        attempts: list[Attempt] = []
        launched = started
        while True:
            if record is not None:
                record.launched(len(attempts) + 1, launched)
            self.wait(job, deadline_at)
            result = job.result
            attempt = Attempt(
                number=len(attempts) + 1,
                launched_at=launched,
                ended_at=result.ended if result else time.time(),
                exit_code=result.exit_code if result else None,
                timed_out=result is None or result.timed_out,
            )
            attempts.append(attempt)
            if record is not None:
                record.ended(attempt)
            pause = restart_pause(
                recovery, attempts, self.interrupted.is_set(), deadline_at, time.time()
            )
            if pause is None or self.interrupted.wait(pause):
                return attempts
            launched = self._start_attempt(run, job, deadline_at - time.time())

    def wait(self, job: _Job, deadline_at: float) -> None:
        """Until the job ends or the run's deadline (controller clock, plus grace) passes;
        Ctrl-C lands here."""
        limit = time.monotonic() + (deadline_at - time.time()) + DEADLINE_GRACE_S
        while not job.done.wait(0.1):
            if self.interrupted.is_set():
                return
            if time.monotonic() > limit:
                return

    def teardown(self, run: PlannedRun, driver: FaultDriver) -> list[str]:
        """Revert the faults, then end every process of the run on every node."""
        driver.finish()
        fatal = [p for p in driver.problems if "NOT reverted" in p or "still active" in p]

        def stop_and_end(agent: NodeAgent) -> int:
            with suppress(NodeError):  # the kill below ends the sampler too
                counters.stop(agent, run)  # by its pid file first: it ends its file cleanly
            return agent.kill_run(run.spec.run_id)

        left = self._each_agent(stop_and_end)
        for name, count in left.items():
            if isinstance(count, NodeError):
                fatal.append(f"{name}: cannot end the run's processes: {count.message}")
            elif count:
                fatal.append(f"{name}: {count} process(es) of run {run.spec.run_id} survived KILL")
        return fatal

    def collect(
        self,
        run: PlannedRun,
        folder: st.RunFolder,
        job: _Job | None,
        agent_logs: Mapping[str, list[str]],
    ) -> None:
        """Commit the streamed output, fetch the job's node-side files, keep the agents' logs."""
        for name in (
            runformat.STDOUT,
            runformat.STDERR,
            runformat.STDOUT_TIMES,
            runformat.STDERR_TIMES,
        ):
            if folder.stream_path(name).exists():
                folder.commit_stream(name)
        node = self.pool[run.launch.node]
        remote = f"{run.run_dir}/result.json"
        local = folder.stream_path(runformat.RESULT_JSON)
        try:  # no result.json (a crash before nccl-tests wrote it) is a failed copy, not an error
            node.get(remote, local)
            if local.stat().st_size:
                folder.commit_stream(runformat.RESULT_JSON)
        except (NodeError, OSError):
            pass
        local.unlink(missing_ok=True)
        counters.fetch(run, self.pool, folder)
        collect_observers(self.pool, run, folder, self._ras_nodes)
        for name, lines in agent_logs.items():
            folder.write_node_file(name, "agent.log", "\n".join(lines) + "\n")

    def record(
        self,
        run: PlannedRun,
        folder: st.RunFolder,
        job: _Job | None,
        driver: FaultDriver,
        started: float,
        ended: float,
        attempts: list[Attempt] | None = None,
        interrupted: bool = False,
    ) -> Outcome:
        """Parse, decide the outcome (`decision.decide`, through `parse_run`, as the tables
        would for the same folder), write the record; COMPLETE last (not for an interrupted
        run)."""
        path = folder.path
        stdout, stderr = path / runformat.STDOUT, path / runformat.STDERR
        result_json = path / runformat.RESULT_JSON
        transports = TransportTap()
        parsed = parse_outputs(
            stdout if stdout.exists() else None,
            result_json if result_json.exists() else None,
            run.spec.collective,
        )
        sourced = log_events([p for p in (stdout, stderr) if p.exists()], transports)
        # a verifying workload's own account (docs/verify.md): wrong elements name iterations
        check = read_verification(stdout if stdout.exists() else None)
        outputs = RunOutputs(parsed, sourced, check, transports.transport)
        folder.write_events([e for _, e in sourced])
        folder.write_faults(driver.history)
        result = job.result if job else None
        facts = JobFacts(
            ended_at=ended,
            exit_code=result.exit_code if result else None,
            timed_out=bool(result and result.timed_out) or (job is not None and result is None),
            interrupted=interrupted,
            launched=job is not None,
            never_fired=tuple(driver.never_fired),
            first_result_seen=job is not None and job.first_result.seen,
            fault_problems=tuple(driver.problems),
            library_dir=run.library_dir,
        )
        outcome = parse_run(runmodel.load_run(path), outputs, facts).outcome
        assert outcome is not None  # parse_run decides every run it is given JobFacts for
        outcome = supervised_outcome(outcome, run.spec.recovery, attempts or [])
        folder.write_outcome(
            runmodel.RunEnd(
                outcome=outcome,
                exit_code=facts.exit_code,
                started_at=started,
                ended_at=ended,
            )
        )
        if not facts.interrupted:
            folder.mark_complete()
            self._keep_rows(path, outputs)
        return outcome

    def _keep_rows(self, run_dir: Path, outputs: RunOutputs) -> None:
        """Keep the run's table rows, made from the outputs just read: the tables built after
        the sweep do not parse the run again."""
        try:
            folder_rows(self.store.sweep_dir, run_dir, fingerprint(run_dir), True, outputs)
        except Exception as exc:  # the rows are a cache: losing them costs a parse, not the sweep
            log.warning("%s: table rows not kept (%s); the next build parses the run", run_dir, exc)

    # ---- helpers ----------------------------------------------------------------------------
    def _offsets(self, run: PlannedRun) -> dict[str, float]:
        """Each node's clock offset, probed again when the last probe is CLOCK_REPROBE_S old
        (clocks drift by microseconds a minute; three probes a node cost a run 10-20 ms)."""
        now = time.monotonic()
        if self._clock is not None and now - self._clock[0] < CLOCK_REPROBE_S:
            return dict(self._clock[1])
        samples = self._each_agent(lambda agent: agent.clock_offset().offset)
        offsets = {}
        for name, value in samples.items():
            if isinstance(value, NodeError):
                raise SweepStop(f"{name}: clock probe failed: {value.message}")
            offsets[name] = value
        self._clock = (now, offsets)
        return dict(offsets)

    def _provenance(self, run: PlannedRun) -> Provenance:
        env, dropped = redact_env(run.spec.env)
        return Provenance(
            r2bench_git=self._git.result(),
            hostnames=sorted(n.address for n in self.testbed.nodes if n.name in run.spec.nodes),
            env=env,
            env_dropped=dropped,
            launch_command=run.launch.command,
            rerun_command=self.rerun_command,
        )
