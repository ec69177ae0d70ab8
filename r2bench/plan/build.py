"""Build a Plan from an experiment file and a testbed file (pure: reads files, runs nothing)."""

from __future__ import annotations

import hashlib
import re
import shlex
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from r2bench.config.errors import ConfigError, ConfigIssue
from r2bench.config.experiment import (
    Component,
    Experiment,
    RecoveryStrategy,
    TrainingOptions,
)
from r2bench.config.recipe import GitSource, LocalSource, Recipe, RecipeKind
from r2bench.config.recipes import load_recipes
from r2bench.config.source import SourceDoc, load_yaml
from r2bench.config.testbed import Node, Testbed
from r2bench.config.validate import validate_model
from r2bench.faults.catalogue import FAULT_KINDS, fault_tag, injector_argv
from r2bench.faults.interlock import protected_interfaces
from r2bench.launch.launchers import Job, launch_command
from r2bench.launch.registry import launcher_for
from r2bench.plan import checks
from r2bench.plan.campaign import trial_of
from r2bench.plan.envcheck import check_environment
from r2bench.plan.model import FaultStep, NodeCommand, Plan, PlannedRun, SetupStep
from r2bench.plan.predict import campaign_notes, prediction_notes, told_notes
from r2bench.plan.runspec import ComponentRef, RunRecovery, RunSpec
from r2bench.plan.sweep import Point, expand, size_arguments

DEFAULT_CUDA_HOME = "/usr/local/cuda"
DEFAULT_MPI_HOME = "/usr/lib/x86_64-linux-gnu/openmpi"
DEFAULT_GPU_ARCH = "90"
DEFAULT_NCCL_HOME = "/usr"
REF_HASH_DIGITS = 8
"""Hex digits of the ref's hash in the folder name of a ref a folder name cannot spell."""
# A fault's node-side lease outlives the run's deadline by this much before the node reverts it
# (the controller reverts at the deadline plus the node-side kill grace of a few seconds).
LEASE_GRACE_S = 10.0
RUN_MARKER = "R2B_RUN"
"""Environment variable that carries the run id to every process of a run."""
EXPECT_NCCL_VAR = "R2B_EXPECT_NCCL"
"""The library file a preloading run must be served by (r2bench.workloads.servedlib reads it)."""


@dataclass(frozen=True)
class Inputs:
    """Both validated files, the recipes they use, and the source of the experiment file."""

    experiment: Experiment
    testbed: Testbed
    recipes: dict[str, Recipe]
    doc: SourceDoc
    experiment_file: str
    testbed_file: str
    testbed_doc: SourceDoc | None = None
    """The testbed file's source as read (None: not kept; read again where warnings need it)."""


@dataclass(frozen=True)
class ExperimentFile:
    """An experiment file read and validated, kept with its source for located messages."""

    path: Path
    doc: SourceDoc
    experiment: Experiment


def read_experiment(path: Path) -> ExperimentFile:
    """Read and validate an experiment file alone; raises ConfigError with located issues."""
    doc = load_yaml(path)
    return ExperimentFile(path, doc, validate_model(Experiment, doc))


def load_inputs(
    experiment_file: Path | ExperimentFile,
    testbed_file: Path,
    recipe_dirs: list[Path] | None = None,
) -> Inputs:
    """Load and validate both files; every issue is raised together as one ConfigError
    (the testbed's, the experiment's, and the cross-file ones that can still be checked).
    An experiment already read (`read_experiment`, e.g. to pick a testbed for it) is not read
    or validated again."""
    issues: list[ConfigIssue] = []
    testbed: Testbed | None = None
    testbed_doc: SourceDoc | None = None
    try:
        testbed_doc = load_yaml(testbed_file)  # read once: a Slurm testbed may be 5 MB
        testbed = validate_model(Testbed, testbed_doc)
    except ConfigError as error:
        issues += error.issues
    loaded = experiment_file if isinstance(experiment_file, ExperimentFile) else None
    if loaded is None:
        assert isinstance(experiment_file, Path)
        loaded, experiment_issues = _read_checked(experiment_file, testbed)
        issues += experiment_issues
    if issues or testbed is None or loaded is None:
        path = loaded.path if loaded is not None else experiment_file
        order = [str(testbed_file), str(path)]
        raise ConfigError(sorted(issues, key=lambda i: _issue_order(i, order)))
    recipes = load_recipes(recipe_dirs)
    return Inputs(
        loaded.experiment,
        testbed,
        recipes,
        loaded.doc,
        str(loaded.path),
        str(testbed_file),
        testbed_doc,
    )


def _read_checked(
    path: Path, testbed: Testbed | None
) -> tuple[ExperimentFile | None, list[ConfigIssue]]:
    """The experiment file, or None and its issues (with the faults checked against the
    testbed where the file is invalid elsewhere, so every issue is reported at once)."""
    doc: SourceDoc | None = None
    try:
        doc = load_yaml(path)
        return ExperimentFile(path, doc, validate_model(Experiment, doc)), []
    except ConfigError as error:
        issues = list(error.issues)
        if doc is not None and testbed is not None:
            issues += checks.check_faults_in_invalid_file(doc, testbed)
        return None, issues


def _issue_order(issue: ConfigIssue, files: list[str]) -> tuple[int, int, int]:
    rank = files.index(issue.file) if issue.file in files else len(files)
    return rank, issue.line or 0, issue.column or 0


def make_plan(inputs: Inputs, jobs: int | None = None) -> Plan:
    """Expand the sweep and render every run's commands; raises ConfigError on any problem.

    `jobs` is make's parallelism in build commands (default: the node's core count)."""
    exp, testbed, doc = inputs.experiment, inputs.testbed, inputs.doc
    issues: list[ConfigIssue] = checks.check_recipes(exp, inputs.recipes, doc)
    nodes, node_issues = checks.select_nodes(exp, testbed, doc)
    ranks, rank_issues = checks.ranks_per_node(exp, nodes, doc)
    issues += node_issues + rank_issues + checks.check_faults(exp, testbed, nodes, doc)
    points, sweep_issues = expand(exp, doc)
    issues += sweep_issues
    if not issues:
        issues += checks.check_modes(exp, points, inputs.recipes, doc)
        issues += checks.check_run_interlocks(exp, testbed, points, doc)
        issues += checks.check_recovery(exp, points, inputs.recipes, doc)
    if issues:
        raise ConfigError(issues)
    renderer = _Renderer(inputs, nodes, ranks, jobs)
    warnings = check_environment(
        exp, points, inputs.recipes, testbed, doc, testbed_doc=_testbed_doc(inputs)
    )
    renderer.notes += [warning.render() for warning in warnings]
    runs = [
        renderer.run(point, repeat, trial)
        for point in points
        for trial in range(_trials(exp, point))
        for repeat in range(exp.repeats)
    ]
    renderer.notes += campaign_notes(exp) + told_notes(runs)
    plan = Plan(
        experiment=exp.name,
        testbed=testbed.name,
        experiment_file=inputs.experiment_file,
        testbed_file=inputs.testbed_file,
        setup=renderer.setup_steps(points),
        runs=runs,
        notes=renderer.notes,
    )
    registered = predictions_path(inputs)
    if registered is None:
        return plan
    return plan.model_copy(update={"notes": [*plan.notes, *prediction_notes(plan, registered)]})


def predictions_path(inputs: Inputs) -> Path | None:
    """The experiment's `predictions:` file, relative to the experiment file (None: it names
    none); raises a located ConfigError when the file is not there."""
    name = inputs.experiment.predictions
    if name is None:
        return None
    path = Path(inputs.experiment_file).parent / name
    if not path.is_file():
        issue = inputs.doc.issue(
            ("predictions",),
            f"predictions file {path} not found",
            "write it first (`r2bench plan EXP.yaml --predict FILE` writes a template)",
        )
        raise ConfigError([issue])
    return path


def _trials(exp: Experiment, point: Point) -> int:
    """Trials of a point's cell: its scenario's `trials` (1 for the fault-free `none`)."""
    scenario = exp.scenario(point.values["scenario"])
    return scenario.trials if scenario is not None else 1


def _testbed_doc(inputs: Inputs) -> SourceDoc | None:
    """The testbed file's source, to locate warnings about its settings (None: unreadable)."""
    if inputs.testbed_doc is not None:
        return inputs.testbed_doc
    try:
        return load_yaml(Path(inputs.testbed_file))
    except ConfigError:
        return None


def training_arguments(opts: TrainingOptions) -> list[str]:
    """A training workload's flags (both workloads take the same ones)."""
    argv = ["--model", opts.model, "--updates", str(opts.updates), "--batch", str(opts.batch)]
    argv += ["--seq-len", str(opts.seq_len), "--seed", str(opts.seed), "--lr", repr(opts.lr)]
    argv += ["--dtype", opts.dtype, "--digest-every", str(opts.digest_every)]
    if opts.bucket_mb is not None:
        argv += ["--bucket-mb", str(opts.bucket_mb)]
    if opts.data:
        argv += ["--data", opts.data]
    return [*argv, *opts.extra_args]


CHECKPOINT_DIR = "checkpoints"
"""The folder of a restart run's checkpoints, inside its run folder on the launch node."""


def recovery_arguments(recovery: RunRecovery | None, run_dir: str) -> list[str]:
    """A training workload's flags for the run's recovery strategy: restart checkpoints and
    gives up on a stalled collective (the sweep restarts it); shrink gives up the same way and
    goes on without the failed node's ranks; none and in_library need nothing."""
    if recovery is None:
        return []
    watchdog = ["--watchdog-s", str(recovery.watchdog_s)]
    if recovery.strategy is RecoveryStrategy.RESTART:
        checkpoints = ["--checkpoint-dir", f"{run_dir}/{CHECKPOINT_DIR}"]
        return [*checkpoints, "--checkpoint-every", str(recovery.checkpoint_every), *watchdog]
    if recovery.strategy is RecoveryStrategy.SHRINK:
        return [*watchdog, "--on-failure", "shrink"]
    return []


def _fill_template(template: str, values: dict[str, str]) -> str:
    """`template` with each placeholder of `values` replaced (other braces left as they are)."""
    for placeholder, value in values.items():
        template = template.replace(placeholder, value)
    return template


def git_fetch_commands(url: str, ref: str, directory: str) -> list[str]:
    """Clone `url` into `directory` (once), fetch, and check out the commit `ref` names: a
    branch from origin/ (the local branch is stale after a fetch), else a tag or commit.

    The ref reaches git only after `--end-of-options` (rev-parse), and the checkout gets the
    commit it resolved to: no ref is ever read as an option (`-f` once checked out the
    default branch and exited 0), whatever a file that skipped validation says."""
    d, u, v = shlex.quote(directory), shlex.quote(url), shlex.quote(ref)
    commit = (
        f"git -C {d} rev-parse --verify --quiet --end-of-options origin/{v}'^{{commit}}'"
        f" || git -C {d} rev-parse --verify --end-of-options {v}'^{{commit}}'"
    )
    return [
        f"test -d {d}/.git || git clone --filter=blob:none -- {u} {d}",
        f'git -C {d} fetch --tags origin && commit=$({commit}) && git -C {d} checkout --detach "$commit"',
    ]


def _dir_name(ref: ComponentRef) -> str:
    """`<recipe>-<ref>`; a ref with characters a folder name cannot keep (`feature/fast-path`)
    gets a short hash of the exact ref, so two refs never share a build (`feature_fast-path`)."""
    if not ref.ref:
        return f"{ref.recipe}-local"
    version = re.sub(r"[^A-Za-z0-9_.-]+", "_", ref.ref)
    if version != ref.ref:
        version += "-" + hashlib.sha256(ref.ref.encode()).hexdigest()[:REF_HASH_DIGITS]
    return f"{ref.recipe}-{version}"


class _Renderer:
    """Turns sweep points into RunSpecs and their node-side commands."""

    def __init__(self, inputs: Inputs, nodes: list[Node], ranks: int, jobs: int | None) -> None:
        self.inputs = inputs
        self.jobs = str(jobs) if jobs else "$(nproc)"
        self.exp = inputs.experiment
        self.testbed = inputs.testbed
        self.nodes = nodes
        self.ranks = ranks
        self.work = self.testbed.paths.work_dir
        self.notes: list[str] = []
        if any(n.gpus and not n.gpu_arch for n in nodes):
            self.notes.append(
                f"gpu_arch unset in the testbed: builds assume sm_{DEFAULT_GPU_ARCH} (H100/H200)"
            )

    # ---- runs -------------------------------------------------------------------------------
    def run(self, point: Point, repeat: int, trial: int = 0) -> PlannedRun:
        spec = self.spec(point, repeat, trial)
        run_dir = f"{self.work}/runs/{spec.run_id}"
        program = self.program(spec, run_dir)
        job = Job(program, list(spec.nodes), spec.ranks_per_node, self.run_env(spec))
        launch = launch_command(self.testbed, job)
        command = NodeCommand(node=launch.node, command=launch.shell())
        faults = [self.fault_step(spec, i) for i in range(len(spec.faults))]
        return PlannedRun(
            spec=spec,
            run_dir=run_dir,
            launch=command,
            faults=faults,
            library_dir=self.library_dir(spec),
        )

    def library_dir(self, spec: RunSpec) -> str | None:
        """The folder the run's library is loaded from, where r2bench builds it (its recipe's
        `lib_dir` in its build folder); None for an NCCL installed on the nodes, which the
        loader may find in a folder of the system's choosing."""
        library = self.inputs.recipes[spec.library.recipe]
        if library.source is None or not library.lib_dir:
            return None
        return self.fill_home(library.lib_dir, spec.library)

    def spec(self, point: Point, repeat: int, trial: int = 0) -> RunSpec:
        label = point.values["library"]
        scenario = self.exp.scenario(point.values["scenario"])
        begin, end, factor = size_arguments(self.exp, point)
        faults, run_campaign = trial_of(scenario, trial)
        return RunSpec(
            experiment=self.exp.name,
            testbed=self.testbed.name,
            library_label=label,
            library=self.ref(self.exp.libraries[label]),
            benchmark=self.ref(self.exp.benchmark),
            collective=point.values["collective"],
            size_begin=begin,
            size_end=end,
            size_factor=factor,
            nodes=tuple(n.name for n in self.nodes),
            ranks_per_node=self.ranks,
            env={**self.exp.env, **self.exp.libraries[label].env, **point.env()},
            scenario=point.values["scenario"],
            faults=faults,
            options=self.exp.options,
            training=self.training_options(),
            recovery=self.recovery(point),
            campaign=run_campaign,
            deadline_s=self.exp.deadline_s,
            repeat=repeat,
        )

    def ref(self, component: Component) -> ComponentRef:
        recipe = self.inputs.recipes[component.recipe]
        default = recipe.source.ref if isinstance(recipe.source, GitSource) else None
        return ComponentRef(recipe=component.recipe, ref=component.ref or default)

    def training_options(self) -> TrainingOptions | None:
        """The training job's options, for a training benchmark only (defaults where the
        experiment has no `training:`)."""
        bench = self.inputs.recipes[self.exp.benchmark.recipe]
        if bench.workload != "training":
            return None
        return self.exp.training or TrainingOptions()

    def recovery(self, point: Point) -> RunRecovery | None:
        """The run's recovery strategy with the experiment's settings (None without
        `recovery:`)."""
        options = self.exp.recovery
        if options is None:
            return None
        return RunRecovery(
            strategy=RecoveryStrategy(point.values["recovery"]),
            watchdog_s=options.watchdog_s,
            checkpoint_every=options.checkpoint_every,
            restart_limit=options.restart_limit,
            restart_delay_s=options.restart_delay_s,
        )

    def program(self, spec: RunSpec, run_dir: str) -> list[str]:
        bench = self.inputs.recipes[spec.benchmark.recipe]
        fill = {
            "src": self.component_dir(spec.benchmark, spec.library),
            "collective": spec.collective,
            "python": self.testbed.paths.python,
        }
        argv = [part.format(**fill) for part in bench.command]
        if spec.training is not None:
            recovery = recovery_arguments(spec.recovery, run_dir)
            return [*argv, *training_arguments(spec.training), *recovery]
        opts = spec.options
        argv += ["-b", str(spec.size_begin), "-e", str(spec.size_end), "-f", str(spec.size_factor)]
        gpus = launcher_for(self.testbed.launcher.kind).gpus_per_process(spec.ranks_per_node)
        argv += ["-g", str(gpus), "-n", str(opts.iterations), "-w", str(opts.warmup)]
        argv += ["-c", "1" if opts.check else "0", "-d", opts.datatype, "-o", opts.op]
        if opts.timestamps:
            argv += ["-S", "1"]
        if opts.per_iteration:
            argv += ["-I", "1"]
        if opts.cycles is not None:
            argv += ["-N", str(opts.cycles)]
        if opts.timeout_s is not None:
            argv += ["-T", str(opts.timeout_s)]
        return [*argv, "-J", f"{run_dir}/result.json", *opts.extra_args]

    def run_env(self, spec: RunSpec) -> dict[str, str]:
        # R2B_RUN marks every process of the run on every node: the sweep ends a run by it.
        env = {**spec.env, RUN_MARKER: spec.run_id}
        library = self.inputs.recipes[spec.library.recipe]
        for name, value in library.env.items():
            env.setdefault(name, value)
        lib_paths = []
        if library.lib_dir:
            lib_paths.append(self.fill_home(library.lib_dir, spec.library))
        if self.testbed.paths.cuda_home:
            lib_paths.append(f"{self.testbed.paths.cuda_home}/lib64")
        if lib_paths:
            env.setdefault("LD_LIBRARY_PATH", ":".join(lib_paths))
        bench = self.inputs.recipes[spec.benchmark.recipe]
        if bench.nic_map_env:
            env.setdefault(bench.nic_map_env, self.nic_map())
        for name, value in self.preload_env(spec).items():
            env.setdefault(name, value)
        return env

    def preload_env(self, spec: RunSpec) -> dict[str, str]:
        """LD_PRELOAD from the benchmark's `preload` files, and R2B_EXPECT_NCCL: its first
        libnccl file, the one the workload must find serving (libtorch_cuda's RPATH would
        otherwise load the NCCL PyTorch ships, whatever LD_LIBRARY_PATH says)."""
        bench = self.inputs.recipes[spec.benchmark.recipe]
        if not bench.preload:
            return {}
        library = self.inputs.recipes[spec.library.recipe]
        fill = {
            "{src}": self.component_dir(spec.benchmark, spec.library),
            "{nccl_home}": self.fill_home(library.home, spec.library),
        }
        files = [_fill_template(template, fill) for template in bench.preload]
        env = {"LD_PRELOAD": " ".join(files)}
        nccl = next((f for f in files if PurePosixPath(f).name.startswith("libnccl")), None)
        if nccl is not None:
            env[EXPECT_NCCL_VAR] = nccl
        return env

    def nic_map(self) -> str:
        """node=addr,addr;node=... of every node's data-NIC addresses (emulated workload)."""
        return ";".join(
            f"{node.name}=" + ",".join(nic.address or "" for nic in node.data_nics if nic.address)
            for node in self.nodes
        )

    def fault_step(self, spec: RunSpec, index: int) -> FaultStep:
        fault = spec.faults[index]
        kind = FAULT_KINDS[fault.kind]
        node = self.testbed.node(fault.node)
        assert node is not None  # checked before rendering
        nic = node.nic(fault.nic) if fault.nic else None
        assert nic is not None or not kind.targets_nic
        # The host that acts: the node, or the SmartNIC carrying its NIC (checked before).
        executor = self.testbed.node(checks.fault_executor(fault)) or node
        tag = fault_tag(spec.run_id, index)
        # The sweep arms every fault (lease running) just before the launch, so the lease covers
        # the whole deadline plus a margin for the controller's own revert after it: a dead
        # controller leaves nothing behind once the lease ends.
        lease = spec.deadline_s + LEASE_GRACE_S
        injectors = f"{self.work}/injectors"
        protect = protected_interfaces(self.testbed, executor, env=spec.env)

        def command(action: str) -> NodeCommand:
            argv = injector_argv(
                kind,
                action,
                nic,
                fault.params,
                tag,
                injectors,
                lease if action == "inject" else None,
                protect,
                spec.run_id,
            )
            return NodeCommand(node=executor.name, command=shlex.join(argv), root=True)

        return FaultStep(
            index=index,
            kind=fault.kind,
            node=fault.node,
            nic=fault.nic or f"rank{fault.params.get('rank', '?')}",
            tag=tag,
            inject_after_s=fault.trigger.after_s,
            since=fault.trigger.since.value,
            at_update=fault.trigger.update,
            heal_after_s=None
            if fault.duration_s is None
            else fault.trigger.after_s + fault.duration_s,
            lease_s=lease,
            cycles=fault.cycles,
            period_s=fault.repeat.period_s if fault.repeat else None,
            inject=command("inject"),
            revert=command("revert"),
            status=command("status"),
        )

    # ---- setup ------------------------------------------------------------------------------
    def component_dir(self, ref: ComponentRef, against: ComponentRef | None = None) -> str:
        """Source/build folder on the nodes; a benchmark gets one per library it links against."""
        name = _dir_name(ref)
        if against is not None and self.inputs.recipes[ref.recipe].kind is RecipeKind.BENCHMARK:
            name += f"+{_dir_name(against)}"
        return f"{self.work}/src/{name}"

    def fill_home(self, template: str, ref: ComponentRef) -> str:
        nccl_home = self.testbed.paths.nccl_home or DEFAULT_NCCL_HOME
        text = template.replace("{nccl_home}", nccl_home)
        return text if text.startswith("/") else f"{self.component_dir(ref)}/{text}"

    def setup_steps(self, points: list[Point]) -> list[SetupStep]:
        steps: list[SetupStep] = []
        seen: set[tuple[ComponentRef, ComponentRef]] = set()
        for point in points:
            library = self.ref(self.exp.libraries[point.values["library"]])
            for component in (library, self.ref(self.exp.benchmark)):
                if (component, library) in seen:
                    continue
                seen.add((component, library))
                step = self.setup_step(component, library)
                if step is not None:
                    steps.append(step)
        return steps

    def setup_step(self, ref: ComponentRef, library: ComponentRef) -> SetupStep | None:
        """Fetch and build commands of `ref` (for a benchmark: built against `library`)."""
        recipe = self.inputs.recipes[ref.recipe]
        lib_recipe = self.inputs.recipes[library.recipe]
        directory = self.component_dir(ref, library)
        fetch = self.fetch_commands(recipe, ref, directory)
        nccl_home = self.fill_home(lib_recipe.home, library)
        cd = f"cd {shlex.quote(directory)} && "
        build = [cd + self.fill_build(template, nccl_home) for template in recipe.build.steps]
        if not fetch and not build:
            return None
        is_benchmark = recipe.kind is RecipeKind.BENCHMARK
        return SetupStep(
            component=recipe.kind.value,
            recipe=recipe.name,
            ref=ref.ref,
            directory=directory,
            nodes=[n.name for n in self.nodes],
            fetch=fetch,
            build=build,
            built_against=library if is_benchmark else None,
            library_home=nccl_home,
            library_lib_dir=self.fill_home(lib_recipe.lib_dir, library)
            if lib_recipe.lib_dir
            else None,
        )

    def fetch_commands(self, recipe: Recipe, ref: ComponentRef, directory: str) -> list[str]:
        if isinstance(recipe.source, GitSource):
            return git_fetch_commands(recipe.source.git, ref.ref or recipe.source.ref, directory)
        if isinstance(recipe.source, LocalSource):
            return [f"copy from controller: {recipe.source.path} -> {shlex.quote(directory)}"]
        return []

    def fill_build(self, template: str, nccl_home: str) -> str:
        paths = self.testbed.paths
        arch = next((n.gpu_arch for n in self.nodes if n.gpu_arch), DEFAULT_GPU_ARCH)
        values = {
            "jobs": self.jobs,
            "cuda_home": shlex.quote(paths.cuda_home or DEFAULT_CUDA_HOME),
            "mpi_home": shlex.quote(paths.mpi_home or DEFAULT_MPI_HOME),
            "gencode": shlex.quote(f"-gencode=arch=compute_{arch},code=sm_{arch}"),
            "nccl_home": shlex.quote(nccl_home),
            "python": shlex.quote(paths.python),
        }
        return template.format(**values)
