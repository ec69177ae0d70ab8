"""The `r2bench setup` entry point."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from r2bench.commands.options import ExperimentArg, TestbedOpt
from r2bench.errors import ExitCode

DEFAULT_LOG_DIR = Path("results") / "setup"


def setup_command(
    experiment: Path,
    testbed: Path,
    force: bool,
    jobs: int | None,
    *,
    recipes: Path | None = None,
    log_dir: Path | None = None,
    build_timeout_s: float | None = None,
    console: Console | None = None,
) -> int:
    """Fetch and build what an experiment needs (library under test, benchmark) on every node.

    Each component is cloned at its pinned ref (or, for a local source, copied from this
    machine), then built with its recipe's steps, on all nodes in parallel. CUDA and MPI come
    from the testbed's paths or are found on each node (nvcc on PATH or /usr/local/cuda; mpicc
    or Debian's Open MPI); NVCC_GENCODE is limited to the GPUs the node has.

    A build is skipped when nothing changed: same source commit (or same content of a local
    tree), same build commands and flags, same CUDA, MPI and NCCL versions. --force rebuilds.
    Logs: results/setup/<node>/<recipe>.log (a benchmark: <recipe>+<library folder>.log). A
    failed build names the node, shows the first compiler error, explains known failures and
    gives the log path; a recipe patch that does not apply names the patch and the node.

    Exit codes: 0 all built or up to date, 1 a step failed on some node, 2 invalid experiment
    or testbed file.
    """
    # imported here, not at the top: `r2bench setup --help` loads no ssh, config or build code
    from r2bench.plan.build import load_inputs
    from r2bench.setup.builder import BUILD_TIMEOUT_S, Builder, SetupOptions
    from r2bench.setup.report import Status, summary

    console = console or Console(stderr=True)
    inputs = load_inputs(experiment, testbed, [recipes] if recipes else None)
    options = SetupOptions(
        force=force,
        jobs=jobs,
        log_dir=log_dir or DEFAULT_LOG_DIR,
        build_timeout_s=build_timeout_s or BUILD_TIMEOUT_S,
    )
    started = time.monotonic()
    results = Builder(inputs, options, console).run()
    console.print(summary(results, time.monotonic() - started), highlight=False)
    failed = any(result.status is Status.FAILED for result in results)
    return ExitCode.FAILED if failed else ExitCode.OK


def command(
    experiment: ExperimentArg,
    testbed: TestbedOpt,
    force: Annotated[
        bool, typer.Option("--force", help="Rebuild even when nothing changed.")
    ] = False,
    jobs: Annotated[
        int | None,
        typer.Option("--jobs", "-j", help="Parallel make jobs (default: cores).", metavar="N"),
    ] = None,
    recipes: Annotated[
        Path | None,
        typer.Option("--recipes", help="Folder of recipe YAMLs (default: plugin/).", metavar="DIR"),
    ] = None,
    log_dir: Annotated[
        Path | None,
        typer.Option("--log-dir", help="Build logs (default: results/setup).", metavar="DIR"),
    ] = None,
    timeout: Annotated[
        float | None,
        typer.Option("--timeout", help="Seconds allowed per build step.", metavar="SECONDS"),
    ] = None,
) -> None:
    """Build what an experiment needs on every node, cached.

    Fetches and builds the library under test and the benchmark (nccl-tests) on every node in
    parallel; an unchanged second setup does nothing and says so. `r2bench sweep` runs it
    itself.

    Exit codes: 0 built or up to date, 1 a build failed on some node (its first compiler error,
    the known cause and the log path are shown), 2 invalid experiment or testbed file.

    Example: [bold]r2bench setup experiments/quickstart.yaml -t experiments/testbeds/virtual-example.yaml[/]
    """
    code = setup_command(
        experiment,
        testbed,
        force,
        jobs,
        recipes=recipes,
        log_dir=log_dir,
        build_timeout_s=timeout,
    )
    raise typer.Exit(code)
