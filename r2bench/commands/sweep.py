"""`r2bench sweep`, `heal`, `inject` and `revert`.

`sweep`: plan, doctor, setup, every run, final heal, tables and report.

Exit codes: 0 every run was carried out (whatever its outcome), 1 some run could not be
(doctor or setup failed, a node was lost, a fault was not reverted), 2 bad input (files,
options, the results folder in use, no root for the embedded testbed), 130 interrupted (the
current run's faults reverted, its job stopped).
"""

from __future__ import annotations

import shlex
import sys
import tempfile
import threading
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from r2bench.config.experiment import Experiment
from r2bench.config.source import load_yaml
from r2bench.config.testbed import Testbed
from r2bench.config.validate import validate_model
from r2bench.doctor.checks import Status
from r2bench.doctor.render import print_report
from r2bench.doctor.run import diagnose
from r2bench.errors import ExitCode
from r2bench.nodes import NodeError, NodePool
from r2bench.plan.build import Inputs, load_inputs, make_plan
from r2bench.plan.model import Plan, PlannedRun
from r2bench.plan.render import print_plan
from r2bench.records.models import OutcomeStatus
from r2bench.records.store import COMPLETE, RunStore
from r2bench.setup.builder import BUILD_TIMEOUT_S, Builder, SetupOptions
from r2bench.setup.report import Status as BuildStatus
from r2bench.sweep.agent import NodeAgent
from r2bench.sweep.display import SweepDisplay, failed_table, summary_table
from r2bench.sweep.embedded import (
    EmbeddedTestbed,
    EmbeddedTestbedError,
    embedded_description,
    embedded_testbed,
)
from r2bench.sweep.interrupts import Interrupts
from r2bench.sweep.lock import LockedError, SweepLock
from r2bench.sweep.manual import ManualFault, fault_command, heal_command
from r2bench.sweep.nodeside import injectors_dir, own_records_script, start_agents
from r2bench.sweep.run import RunExecutor, RunResult, SweepStop

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

    @property
    def recipe_dirs(self) -> list[Path] | None:
        """The recipe folders to load (None: the built-in plugin/)."""
        return [self.recipes] if self.recipes else None


def sweep_command(options: SweepOptions, console: Console | None = None) -> int:
    """Run every planned run of an experiment on a testbed (see the module docstring)."""
    console = console or Console(stderr=True)
    with Interrupts(console).installed() as interrupted:
        return _on_testbed(options, console, interrupted)


def _on_testbed(options: SweepOptions, console: Console, interrupted: threading.Event) -> int:
    """The sweep on the given testbed, or on the embedded one brought up for it."""
    embedded: EmbeddedTestbed | None = None
    testbed_file = options.testbed
    if testbed_file is None:
        # A bad experiment file is reported before any namespace is made for it.
        experiment = validate_model(Experiment, load_yaml(options.experiment))
        embedded = embedded_testbed(experiment.virtual_testbed)
        testbed_file = embedded.testbed_file
        how = "brought up" if embedded.created else "already up, used as it is"
        console.print(f"testbed: embedded virtual testbed {embedded.name} ({how}): {testbed_file}")
    try:
        inputs = load_inputs(options.experiment, testbed_file, options.recipe_dirs)
        plan = make_plan(inputs)
        return _sweep(options, inputs, plan, console, interrupted)
    finally:
        if embedded is not None and embedded.created and not options.keep_testbed:
            embedded.take_down()
            console.print(f"testbed {embedded.name} taken down (--keep-testbed keeps it)")


def _sweep(
    options: SweepOptions,
    inputs: Inputs,
    plan: Plan,
    console: Console,
    interrupted: threading.Event,
) -> int:
    store = RunStore(options.results, plan.experiment)
    with SweepLock(store.sweep_dir):
        todo = _runs_to_do(plan, store, options.rerun_failed)
        console.print(
            f"sweep {plan.experiment}: {len(plan.runs)} runs, {len(todo)} to do "
            f"-> {store.sweep_dir}"
        )
        preload = _preload_report_code()
        with NodePool.from_testbed(inputs.testbed) as pool:
            agents = start_agents(pool, inputs.testbed)
            try:
                _recover(pool, agents, inputs.testbed, todo, console)
                work = bool(todo) and not interrupted.is_set()
                if not _ready(inputs, pool, console, options, work):
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
            finally:
                healed = _final_heal(agents, inputs.testbed, console)
                for agent in agents.values():
                    agent.close()
        _tables_and_report(store, console)
        console.print(summary_table(plan.runs, _all_results(plan, store, results)))
        failed = failed_table(results)
        if failed is not None:
            console.print(failed)
        console.print(f"report: {store.sweep_dir / 'report.html'}")
        if not healed and code == ExitCode.OK:
            code = ExitCode.FAILED
        return code


def _preload_report_code() -> threading.Thread:
    """Import the tables and report code (pandas, plotly: about half a second of CPU) while the
    controller waits on the nodes for agents, doctor and setup, so the end of the sweep does not
    pay for it. Joined before the first run: an import must not compete with a fault trigger
    for the interpreter. Without the `report` extra there is nothing to load."""

    def load() -> None:
        with suppress(ImportError):
            import r2bench.records.tables
            import r2bench.report.html  # noqa: F401

    thread = threading.Thread(target=load, daemon=True, name="r2bench-preload")
    thread.start()
    return thread


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
    for name, agent in agents.items():
        for run_id in sorted(set(agent.run_processes().values()) & own):
            console.print(f"{name}: ending the processes of interrupted run {run_id}")
            agent.kill_run(run_id)
        listing = pool[name].run(
            own_records_script(testbed.paths.work_dir), timeout=30, check=False
        )
        for tag in sorted({Path(line).name for line in listing.stdout.split()} & steps.keys()):
            console.print(f"{name}: reverting fault {tag} of an interrupted run")
            agent.run(shlex.split(steps[tag].revert.command), timeout=HEAL_TIMEOUT_S)


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
    end = store.load(run_id).end
    return end.outcome.status if end else None


def _ready(
    inputs: Inputs, pool: NodePool, console: Console, options: SweepOptions, work: bool
) -> bool:
    """Doctor (stop on any failed check, naming it and its fix), then setup (cached)."""
    if not work:
        return True
    if not options.skip_doctor:
        results = diagnose(inputs.testbed, pool)
        if any(r.status is Status.FAIL for r in results):
            print_report(inputs.testbed, results, console)
            console.print("[red]doctor: a node is not ready; nothing was run[/]")
            return False
    if options.skip_setup:
        return True
    setup_options = SetupOptions(
        # Build logs beside the sweep's results (`--results`), as `r2bench setup` puts them
        # under its default results/.
        force=False,
        jobs=None,
        log_dir=options.results / "setup",
        build_timeout_s=BUILD_TIMEOUT_S,
    )
    built = Builder(inputs, setup_options, console).run(pool)
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
    rerun = (
        shlex.join(["r2bench", "sweep", *sys.argv[2:]]) if len(sys.argv) > 1 else "r2bench sweep"
    )
    with SweepDisplay(console, len(plan.runs), options.quiet) as display:
        executor = RunExecutor(
            plan,
            testbed,
            pool,
            agents,
            store,
            rerun,
            on_stage=display.stage,
            interrupted=interrupted,
        )
        display.skipped(len(plan.runs) - len(todo))
        for run in todo:
            if interrupted.is_set():
                break
            try:
                result = executor.execute(run)
            except (SweepStop, NodeError) as exc:
                console.print(f"[red]sweep stopped: {exc}[/]")
                return ExitCode.FAILED, results
            results[run.spec.run_id] = result
            display.finished(result)
    return (ExitCode.INTERRUPTED if interrupted.is_set() else ExitCode.OK), results


def _final_heal(agents: dict[str, NodeAgent], testbed: Testbed, console: Console) -> bool:
    """Revert anything still recorded on any node (the sweep's last word, like Jepsen's)."""
    heal = ["bash", f"{injectors_dir(testbed)}/heal.sh"]
    clean = True
    for name, agent in agents.items():
        try:
            code = agent.run(heal, timeout=HEAL_TIMEOUT_S)
        except NodeError as exc:
            code = -1
            console.print(f"[red]final heal on {name} failed: {exc.message}[/]")
        clean = clean and code == 0
    return clean


def _all_results(plan: Plan, store: RunStore, fresh: dict[str, RunResult]) -> dict[str, RunResult]:
    """This sweep's results plus those of runs completed by earlier sweeps."""
    merged = dict(fresh)
    for run in plan.runs:
        run_id = run.spec.run_id
        if run_id in merged or not store.is_complete(run_id):
            continue
        end = store.load(run_id).end
        if end is not None:
            seconds = (end.ended_at or 0.0) - (end.started_at or 0.0)
            merged[run_id] = RunResult(run_id, end.outcome.status, end.outcome.reason, seconds)
    return merged


def _tables_and_report(store: RunStore, console: Console) -> None:
    """Rebuild the tables and the HTML report from the run folders."""
    from r2bench.records.tables import rebuild
    from r2bench.report.html import build_report

    if not any(store.run_dirs()):
        return
    try:
        tables = rebuild(store.sweep_dir)
        build_report(store.sweep_dir, tables, store.sweep_dir / "report.html")
    except (OSError, ValueError) as exc:
        console.print(f"[yellow]warning: tables or report not written: {exc}[/]")


def dry_run(options: SweepOptions, console: Console) -> int:
    """`--dry-run`: the plan, exactly as `r2bench plan --commands` shows it (with no testbed
    given: the embedded one as it would be brought up; nothing is brought up)."""
    with tempfile.TemporaryDirectory() as tmp:
        wanted = None
        if options.testbed is None:
            wanted = validate_model(Experiment, load_yaml(options.experiment)).virtual_testbed
        testbed = options.testbed or embedded_description(Path(tmp), wanted)
        inputs = load_inputs(options.experiment, testbed, options.recipe_dirs)
        print_plan(make_plan(inputs), Console(), commands=True)
    return ExitCode.OK


def sweep_cli(options: SweepOptions, show_plan_only: bool, console: Console) -> int:
    """`r2bench sweep`; ConfigError is left to the caller (located messages)."""
    try:
        if show_plan_only:
            return dry_run(options, console)
        return sweep_command(options, console)
    except (EmbeddedTestbedError, LockedError, FileNotFoundError) as exc:
        console.print(str(exc), style="red", markup=False)
        return ExitCode.USAGE
    except NodeError as exc:
        console.print(f"sweep stopped: {exc}", style="red", markup=False)
        return ExitCode.FAILED


def heal_cli(testbed: Path, console: Console) -> int:
    """`r2bench heal`."""
    try:
        return heal_command(testbed, console)
    except NodeError as exc:
        console.print(f"heal: {exc}", style="red", markup=False)
        return ExitCode.FAILED


def fault_cli(testbed: Path, fault: ManualFault, action: str, console: Console) -> int:
    """`r2bench inject` / `r2bench revert`."""
    try:
        return fault_command(testbed, fault, action, console)
    except NodeError as exc:
        console.print(f"{action}: {exc}", style="red", markup=False)
        return ExitCode.FAILED
