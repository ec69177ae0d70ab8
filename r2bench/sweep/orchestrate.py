"""A whole sweep, end to end: plan, doctor and setup (cached), every run still to do, the final
heal, then the tables and report; the sweep behind `r2bench sweep`.

On resume, what an interrupted earlier sweep of the same plan left on the nodes is undone
first (`_recover`); a failed doctor check or build stops before the first run (`_ready`);
the runs go one after another until the end or an interrupt (`_run_all`); whatever happens,
every node is healed last (`_heal_and_close`). A run is carried out by `sweep.run.RunExecutor`.

The tables and the report need the `report` extra, which a sweep must not: the caller passes
what writes them (`SweepOutputs`), and this package never imports them.

`run_sweep` returns the exit code: 0 every run was carried out (whatever its outcome), 1 some
run could not be (doctor or setup failed, a node was lost, a fault was not reverted), 130
interrupted. Bad input, the results folder in use and no root for the embedded testbed are
errors of their kind (`r2bench.errors`).
"""

from __future__ import annotations

import shlex
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from rich.console import Console

from r2bench.config.predictions import sha256_of
from r2bench.config.testbed import Testbed
from r2bench.doctor.checks import Status
from r2bench.doctor.render import print_report
from r2bench.doctor.run import diagnose
from r2bench.errors import ExitCode
from r2bench.nodes import NodeError, NodePool
from r2bench.parse.models import OutcomeStatus
from r2bench.plan.build import (
    ExperimentFile,
    Inputs,
    load_inputs,
    make_plan,
    predictions_path,
    read_experiment,
)
from r2bench.plan.model import Plan, PlannedRun
from r2bench.runfolder.predictions import register
from r2bench.runfolder.runformat import COMPLETE
from r2bench.runfolder.store import RunStore
from r2bench.setup.builder import BUILD_TIMEOUT_S, Builder, SetupOptions
from r2bench.setup.report import Status as BuildStatus
from r2bench.sweep.agent import NodeAgent
from r2bench.sweep.display import SweepDisplay, answer_lines, failed_list, summary_table
from r2bench.sweep.embedded import EmbeddedTestbed, HoldRequest, embedded_testbed
from r2bench.sweep.interrupts import Interrupts
from r2bench.sweep.lock import SweepLock
from r2bench.sweep.nodeside import (
    close_agents,
    injectors_dir,
    on_every_agent,
    own_records_script,
    start_agents,
)
from r2bench.sweep.run import RunExecutor, RunResult, SweepStop
from r2bench.testbeds.virtual.hold import HeldError
from r2bench.textsafe import markup_safe, printable

HEAL_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class SweepOptions:
    """The command line of one sweep."""

    experiment: Path
    testbed: Path | None = None
    results: Path = Path("results")
    rerun_failed: bool = False
    quiet: bool = False
    keep_testbed: bool = False
    skip_setup: bool = False
    skip_doctor: bool = False
    recipes: Path | None = None
    wait_testbed_s: float = 0.0
    """How long to wait for the embedded testbed while another sweep holds it (0: refuse)."""
    rerun_line: str = "r2bench sweep"
    """The command that resumes this sweep, kept in each run's record."""

    @property
    def recipe_dirs(self) -> list[Path] | None:
        """The recipe folders to load (None: the built-in plugin/)."""
        return [self.recipes] if self.recipes else None


class SweepOutputs(Protocol):
    """What the sweep makes of its run folders at the end (the tables and the report)."""

    def preload(self) -> threading.Thread:
        """Start loading the code that `write` needs; joined before the first run."""

    def write(self, store: RunStore, console: Console) -> Sequence[str]:
        """Write the outputs of the sweep's run folders and return what the runs show, one
        sentence each (none when nothing was written); a failure is a warning, not an error."""


def run_sweep(options: SweepOptions, outputs: SweepOutputs, console: Console) -> int:
    """Run every planned run of an experiment on a testbed (see the module docstring)."""
    with Interrupts(console).installed() as interrupted:
        return _on_testbed(options, console, interrupted, outputs)


def _on_testbed(
    options: SweepOptions, console: Console, interrupted: threading.Event, outputs: SweepOutputs
) -> int:
    """The sweep on the given testbed, or on the embedded one brought up for it."""
    embedded: EmbeddedTestbed | None = None
    testbed_file = options.testbed
    experiment: Path | ExperimentFile = options.experiment
    if testbed_file is None:
        # A bad experiment file is reported before any namespace is made for it.
        experiment = read_experiment(options.experiment)
        request = HoldRequest(
            str(options.results / experiment.experiment.name),
            options.wait_testbed_s,
            lambda line: console.print(line, markup=False, highlight=False),
            interrupted,
        )
        try:
            embedded = embedded_testbed(experiment.experiment.virtual_testbed, request)
        except HeldError:
            if not interrupted.is_set():
                raise
            return ExitCode.INTERRUPTED
        testbed_file = embedded.testbed_file
        console.print(_embedded_line(embedded, options.keep_testbed), highlight=False)
    try:
        inputs = load_inputs(experiment, testbed_file, options.recipe_dirs)
        plan = make_plan(inputs)
        return _sweep(options, inputs, plan, console, interrupted, outputs)
    finally:
        if embedded is not None:
            _leave_embedded(embedded, options.keep_testbed, console)


def _embedded_line(embedded: EmbeddedTestbed, keep: bool) -> str:
    """What the user can do with the embedded testbed: its file only where it outlives the
    sweep (a testbed taken down at the end takes its file with it)."""
    name = embedded.name
    if not embedded.created:
        return (
            f"testbed: embedded virtual testbed {name} (already up, held by no other sweep: "
            f"used as it is and left up): {embedded.testbed_file}"
        )
    if keep:
        return (
            f"testbed: embedded virtual testbed {name} (brought up; left up at the end, "
            f"--keep-testbed): {embedded.testbed_file}"
        )
    return (
        f"testbed: embedded virtual testbed {name} (brought up for this sweep and removed at "
        "its end; --keep-testbed keeps it, to use with -t afterwards)"
    )


def _leave_embedded(embedded: EmbeddedTestbed, keep: bool, console: Console) -> None:
    """Take down the testbed this sweep brought up (unless kept), then let another sweep have it."""
    try:
        if embedded.created and not keep:
            embedded.take_down()
            console.print(f"testbed {embedded.name} taken down (--keep-testbed keeps it)")
        elif embedded.created:
            console.print(
                f"testbed {embedded.name} left up: -t {embedded.testbed_file}; "
                f"`r2bench testbed down {embedded.name}` removes it"
            )
    finally:
        embedded.release()


def _sweep(
    options: SweepOptions,
    inputs: Inputs,
    plan: Plan,
    console: Console,
    interrupted: threading.Event,
    outputs: SweepOutputs,
) -> int:
    store = RunStore(options.results, plan.experiment)
    with SweepLock(store.sweep_dir):
        todo = _runs_to_do(plan, store, options.rerun_failed)
        console.print(
            f"sweep {plan.experiment}: {len(plan.runs)} runs, {len(todo)} to do "
            f"-> {store.sweep_dir}"
        )
        _register_predictions(inputs, store, console)
        preload = outputs.preload()
        work = bool(todo) and not interrupted.is_set()
        # the pool is closed before the side thread is waited for: its connections close
        # while the report is written
        with (
            ThreadPoolExecutor(max_workers=1, thread_name_prefix="r2bench-outputs") as side,
            NodePool.from_testbed(inputs.testbed) as pool,
        ):
            agents, ready = _agents_and_ready(inputs, pool, console, options, work, store, todo)
            try:
                if not ready:
                    return ExitCode.FAILED
                preload.join()
                code, results = _run_all(
                    options,
                    plan,
                    inputs.testbed,
                    pool,
                    agents,
                    store,
                    todo,
                    console,
                    interrupted,
                )
                # every record is written: the tables and the report are made while the nodes
                # heal and the connections close (nothing of those goes into a run folder)
                writing = side.submit(outputs.write, store, console)
            finally:
                healed = _heal_and_close(agents, inputs.testbed, console)
        answer = writing.result()
        console.print(summary_table(plan.runs, _all_results(plan, store, results)))
        for block in (failed_list(results), answer_lines(answer)):
            if block is not None:
                console.print(block)
        console.print(f"report: {store.sweep_dir / 'report.html'}")
        if not healed and code == ExitCode.OK:
            code = ExitCode.FAILED
        return code


def _register_predictions(inputs: Inputs, store: RunStore, console: Console) -> None:
    """Record the experiment's predictions file (SHA-256 and a copy) before the first run; a
    resumed sweep keeps its first record and says when the file has changed since."""
    path = predictions_path(inputs)
    if path is None:
        return
    record, written = register(store.sweep_dir, path)
    if written:
        line = f"predictions {printable(str(path))}: SHA-256 {record.sha256} registered"
        console.print(line, markup=False, highlight=False)
    elif sha256_of(path.read_bytes()) != record.sha256:
        console.print(
            f"[yellow]predictions {markup_safe(str(path))} changed since the sweep registered them "
            f"(SHA-256 {record.sha256}): the report scores the registered copy[/]"
        )


def _recover(
    pool: NodePool,
    agents: dict[str, NodeAgent],
    testbed: Testbed,
    todo: list[PlannedRun],
    console: Console,
) -> None:
    """Undo what an interrupted earlier sweep of this plan left on the nodes (a SIGKILLed
    controller): the processes of its runs, and the faults it recorded, reverted now rather
    than when their leases end. Nothing of anyone else's is touched."""
    own = {run.spec.run_id for run in todo}
    steps = {f.tag: f for run in todo for f in run.faults}

    def recover(name: str, agent: NodeAgent) -> None:
        for run_id in sorted(set(agent.run_processes().values()) & own):
            console.print(f"{name}: ending the processes of interrupted run {run_id}")
            agent.kill_run(run_id)
        listing = pool[name].run(
            own_records_script(testbed.paths.work_dir), timeout=30, check=False
        )
        for tag in sorted({Path(line).name for line in listing.stdout.split()} & steps.keys()):
            console.print(f"{name}: reverting fault {tag} of an interrupted run")
            agent.run(shlex.split(steps[tag].revert.command), timeout=HEAL_TIMEOUT_S)

    on_every_agent(agents, recover)


def _runs_to_do(plan: Plan, store: RunStore, rerun_failed: bool) -> list[PlannedRun]:
    todo = []
    for run in plan.runs:
        run_id = run.spec.run_id
        if not store.is_complete(run_id):
            todo.append(run)
        elif rerun_failed and _status(store, run_id) is not OutcomeStatus.OK:
            (store.run_dir(run_id) / COMPLETE).unlink()  # kept, moved aside by the rerun
            todo.append(run)
    return todo


def _status(store: RunStore, run_id: str) -> OutcomeStatus | None:
    end = store.end(run_id)
    return end.outcome.status if end else None


def _agents_and_ready(
    inputs: Inputs,
    pool: NodePool,
    console: Console,
    options: SweepOptions,
    work: bool,
    store: RunStore,
    todo: list[PlannedRun],
) -> tuple[dict[str, NodeAgent], bool]:
    """The nodes' agents started, left-overs of an interrupted sweep undone, and whether
    doctor and setup passed. The agents start while doctor and setup run (each waits on the
    nodes), unless a run of this plan started and never completed: then what it left (a link
    down, a process) is undone first, before the doctor looks."""
    if any(store.run_dir(run.spec.run_id).is_dir() for run in todo):
        agents = start_agents(pool, inputs.testbed)
        with _closed_on_error(agents):
            _recover(pool, agents, inputs.testbed, todo, console)
            return agents, _ready(inputs, pool, console, options, work)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="r2bench-agents") as starting:
        started = starting.submit(start_agents, pool, inputs.testbed)
        try:
            ready = _ready(inputs, pool, console, options, work)
        except BaseException:
            with _closed_on_error(started.result()):
                raise
    return started.result(), ready  # a node whose agent cannot start raises, as before


@contextmanager
def _closed_on_error(agents: dict[str, NodeAgent]) -> Iterator[None]:
    """Close the agents if the block raises (the caller closes them otherwise)."""
    try:
        yield
    except BaseException:
        close_agents(agents)
        raise


def _ready(
    inputs: Inputs, pool: NodePool, console: Console, options: SweepOptions, work: bool
) -> bool:
    """Doctor (stop on any failed check, naming it and its fix), then setup (cached)."""
    if not work:
        return True
    setup_options = SetupOptions(
        # Build logs beside the sweep's results (`--results`), as `r2bench setup` puts them
        # under its default results/.
        force=False,
        jobs=None,
        log_dir=options.results / "setup",
        build_timeout_s=BUILD_TIMEOUT_S,
    )
    builder = None if options.skip_setup else Builder(inputs, setup_options, console)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="r2bench-probe") as side:
        # setup's read-only probe of the nodes goes beside the doctor (which waits on its
        # slowest node); nothing is built before the doctor has passed
        probing = side.submit(builder.probe, pool) if builder is not None else None
        if not options.skip_doctor:
            results = diagnose(inputs.testbed, pool)
            if any(r.status is Status.FAIL for r in results):
                print_report(inputs.testbed, results, console)
                console.print("[red]doctor: a node is not ready; nothing was run[/]")
                return False
        probed = probing.result() if probing is not None else None
    if builder is None:
        return True
    built = builder.run(pool, probed)
    if any(r.status is BuildStatus.FAILED for r in built):
        console.print("[red]setup failed; nothing was run[/]")
        return False
    return True


def _run_all(
    options: SweepOptions,
    plan: Plan,
    testbed: Testbed,
    pool: NodePool,
    agents: dict[str, NodeAgent],
    store: RunStore,
    todo: list[PlannedRun],
    console: Console,
    interrupted: threading.Event,
) -> tuple[int, dict[str, RunResult]]:
    """Every run still to do, in order, until the end or an interrupt."""
    results: dict[str, RunResult] = {}
    with SweepDisplay(console, len(plan.runs), options.quiet) as display:
        executor = RunExecutor(
            plan,
            testbed,
            pool,
            agents,
            store,
            options.rerun_line,
            on_stage=display.stage,
            interrupted=interrupted,
        )
        display.skipped(len(plan.runs) - len(todo))

        def finished(future: Future[RunResult]) -> None:
            if future.exception() is None:
                result = future.result()
                results[result.run_id] = result
                display.finished(result)

        # Each run's collect and record overlap the next run's start (RunExecutor.start); a
        # record that failed is raised at the next run's end, and every record is waited for.
        recorded: list[Future[RunResult]] = []
        try:
            for run in todo:
                if interrupted.is_set():
                    break
                recorded.append(executor.start(run))
                recorded[-1].add_done_callback(finished)
                if len(recorded) > 1:
                    recorded[-2].result()
        except (SweepStop, NodeError) as exc:
            console.print(f"[red]sweep stopped: {exc}[/]")
            return ExitCode.FAILED, results
        finally:
            executor.finish_background()
        for future in recorded:
            future.result()
    return (ExitCode.INTERRUPTED if interrupted.is_set() else ExitCode.OK), results


def _heal_and_close(agents: dict[str, NodeAgent], testbed: Testbed, console: Console) -> bool:
    """Revert anything still recorded on any node (the sweep's last word, like Jepsen's), then
    close its agent; every node at once. Whether every node is clean."""
    heal = ["bash", f"{injectors_dir(testbed)}/heal.sh"]
    clean: dict[str, bool] = {}

    def heal_then_close(name: str, agent: NodeAgent) -> None:
        try:
            clean[name] = agent.run(heal, timeout=HEAL_TIMEOUT_S) == 0
        except NodeError as exc:
            clean[name] = False
            console.print(f"[red]final heal on {name} failed: {exc.message}[/]")
        agent.close()

    on_every_agent(agents, heal_then_close)
    return all(clean.get(name, False) for name in agents)


def _all_results(plan: Plan, store: RunStore, fresh: dict[str, RunResult]) -> dict[str, RunResult]:
    """This sweep's results plus those of runs completed by earlier sweeps."""
    merged = dict(fresh)
    for run in plan.runs:
        run_id = run.spec.run_id
        if run_id in merged or not store.is_complete(run_id):
            continue
        end = store.end(run_id)
        if end is not None:
            seconds = (end.ended_at or 0.0) - (end.started_at or 0.0)
            merged[run_id] = RunResult(run_id, end.outcome.status, end.outcome.reason, seconds)
    return merged
