"""Run setup on the nodes: probe each node, then fetch and build every step, nodes in parallel.

Per node, steps run in plan order (a library before the benchmark built against it); a failed
step skips that node's later steps, other nodes carry on. Nodes that share a filesystem (same
work-folder id from the probe) are handled one after the other, so that the first builds and
the others find its stamp; two such nodes needing different builds is an error, since one
folder cannot hold both.

Recipe patches (setup/patches.py) are applied after fetching or copying and before building;
a git checkout is restored before each fetch, so a tree left patched by an earlier build does
not block the next checkout. A patch that does not apply fails the step, naming patch and node.

Each step's output goes to `<log_dir>/<node>/<recipe>.log`; a step that is up to date leaves
its previous log alone.
"""

from __future__ import annotations

import posixpath
import shlex
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from r2bench.config.recipe import GitSource, RecipeKind
from r2bench.errors import EnvironmentFailure
from r2bench.nodes.base import Node, NodeError, StreamLine
from r2bench.nodes.pool import NodePool, make_node
from r2bench.parse.buildlog import analyze
from r2bench.plan.build import Inputs, make_plan
from r2bench.setup import cache, patches
from r2bench.setup.libcheck import header_version
from r2bench.setup.probe import NONE, NodeFacts, probe
from r2bench.setup.report import Status, StepResult, describe
from r2bench.setup.source import resolve_local_path, tree_digest, write_tarball
from r2bench.setup.steps import BuildStep, node_steps

BUILD_TIMEOUT_S = 3 * 3600.0
SHORT_TIMEOUT_S = 120.0
FETCH_TIMEOUT_S = 1800.0
UPLOAD_TIMEOUT_S = 900.0
LINE_CHARS = 70

Say = Callable[[str], None]
"""Updates a step's progress line."""


@dataclass(frozen=True)
class SetupOptions:
    """How setup runs."""

    force: bool = False
    jobs: int | None = None
    log_dir: Path = Path("results") / "setup"
    build_timeout_s: float = BUILD_TIMEOUT_S


class StepFailed(EnvironmentFailure):
    """A step cannot go on; the message says why (for the user)."""


class StepLog:
    """One step's log file, written only once the step does real work."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.held: list[str] = []
        self.handle: IO[str] | None = None

    def write(self, text: str) -> None:
        """Add a line (held back until `keep`)."""
        if self.handle is None:
            self.held.append(text)
        else:
            self.handle.write(text + "\n")
            self.handle.flush()

    def keep(self) -> None:
        """Create the file and write what was held back."""
        if self.handle is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.handle = self.path.open("w", encoding="utf-8")
            for text in self.held:
                self.write(text)

    def text(self) -> str:
        """Everything written so far."""
        return self.path.read_text(encoding="utf-8") if self.handle else "\n".join(self.held)

    def close(self) -> None:
        """Close the file, if one was opened."""
        if self.handle is not None:
            self.handle.close()


@dataclass
class LocalTrees:
    """Content hashes and tarballs of LocalSource trees, each made once per setup."""

    scratch: Path
    lock: threading.Lock = field(default_factory=threading.Lock)
    digests: dict[str, str] = field(default_factory=dict)
    tarballs: dict[str, Path] = field(default_factory=dict)

    def digest(self, template: str) -> str:
        """The tree's content hash (the source part of the cache key)."""
        with self.lock:
            if template not in self.digests:
                self.digests[template] = tree_digest(self._root(template))
            return self.digests[template]

    def tarball(self, template: str) -> Path:
        """A tarball of the tree, made on first use."""
        with self.lock:
            if template not in self.tarballs:
                target = self.scratch / f"tree-{len(self.tarballs)}.tar.gz"
                self.tarballs[template] = write_tarball(self._root(template), target)
            return self.tarballs[template]

    @staticmethod
    def _root(template: str) -> Path:
        root = resolve_local_path(template)
        if not root.is_dir():
            raise StepFailed(f"local source {root} is not a folder on the controller")
        return root


def _cat(node: Node, path: str) -> str:
    """A small file's content on the node ('' when missing)."""
    result = node.run(f"cat {shlex.quote(path)} 2>/dev/null", check=False, timeout=SHORT_TIMEOUT_S)
    return result.stdout if result.ok else ""


def _nccl_version(node: Node, home: str | None) -> int | None:
    """NCCL_VERSION_CODE of `<home>/include/nccl.h` on the node (None: no such header)."""
    return header_version(_cat(node, f"{home}/include/nccl.h")) if home else None


Probed = Mapping[str, NodeFacts | NodeError]
"""What `Builder.probe` found on each node."""


class Builder:
    """One `setup` over the experiment's nodes."""

    def __init__(self, inputs: Inputs, options: SetupOptions, console: Console) -> None:
        self.inputs = inputs
        self.options = options
        self.console = console
        self.nodes = _nodes_of(inputs)
        self.results: list[StepResult] = []
        self.lock = threading.Lock()
        self.progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        )

    def run(
        self, open_pool: NodePool | None = None, probed: Probed | None = None
    ) -> list[StepResult]:
        """Probe, then work through every node's steps; returns one result per node and step.

        `open_pool`: connections the caller already holds to the testbed (a sweep's); they are
        used and left open. Without it, setup opens its own and closes them at the end.
        `probed`: what `probe` answered on `open_pool` (a sweep asks while its doctor runs)."""
        if not self.nodes:
            return []
        testbed = self.inputs.testbed
        if open_pool is not None:
            pool = self._own_nodes(open_pool)
        else:
            models = {name: testbed.node(name) for name in self.nodes}
            pool = NodePool({name: make_node(testbed.kind, m) for name, m in models.items() if m})
        closing: AbstractContextManager[object] = pool if open_pool is None else nullcontext()
        with closing, self.progress, tempfile.TemporaryDirectory(prefix="r2bench-setup-") as tmp:
            trees = LocalTrees(Path(tmp))
            facts = dict(probed if probed is not None else self.probe(pool))
            groups = _by_filesystem(facts)
            with ThreadPoolExecutor(max_workers=len(groups) or 1) as workers:
                jobs = [workers.submit(self._group, pool, g, facts, trees) for g in groups]
                for job in jobs:
                    job.result()
        return self.results

    def probe(self, pool: NodePool) -> Probed:
        """Each of setup's nodes' facts (paths, tools, the work folder's filesystem), or the
        error that kept a node from answering; read-only."""
        own = self._own_nodes(pool)
        return own.map(lambda node: probe(node, self.inputs.testbed.paths))

    def _own_nodes(self, pool: NodePool) -> NodePool:
        return NodePool({name: pool[name] for name in self.nodes})

    def _group(
        self,
        pool: NodePool,
        names: list[str],
        facts: dict[str, NodeFacts | NodeError],
        trees: LocalTrees,
    ) -> None:
        shared: dict[str, tuple[str, str]] = {}
        for name in names:
            found = facts[name]
            if isinstance(found, NodeError):
                self._unreachable(name, found)
                continue
            steps = node_steps(self.inputs, name, found, self.options.jobs)
            runner = _NodeRunner(self, pool[name], found, trees, shared)
            runner.run(steps)

    def _unreachable(self, name: str, error: NodeError) -> None:
        steps = node_steps(self.inputs, name, NodeFacts(name), self.options.jobs)
        for step in steps:
            self.record(StepResult(name, step.name, Status.FAILED, detail=error.message))

    def record(self, result: StepResult) -> None:
        """Keep a result and print its lines above the progress display."""
        with self.lock:
            self.results.append(result)
            for line in describe(result):
                self.console.print(line, markup=False, highlight=False, soft_wrap=True)

    def log_path(self, node: str, step: BuildStep) -> Path:
        """Where a step's log goes on the controller: `<recipe>.log`, and for a benchmark built
        against a library `<recipe>+<library folder>.log` (one per library)."""
        _, plus, against = posixpath.basename(step.directory).partition("+")
        return self.options.log_dir / node / f"{step.name}{plus}{against}.log"


def _nodes_of(inputs: Inputs) -> list[str]:
    """The nodes that have something to set up, in testbed order."""
    plan = make_plan(inputs)
    wanted = {node for step in plan.setup for node in step.nodes}
    return [node.name for node in inputs.testbed.nodes if node.name in wanted]


def _by_filesystem(facts: dict[str, NodeFacts | NodeError]) -> list[list[str]]:
    """Node names grouped by shared work folder (unreachable or unknown: a group of one)."""
    groups: dict[str, list[str]] = {}
    for name, found in facts.items():
        fsid = found.fsid if isinstance(found, NodeFacts) and found.fsid else f"node:{name}"
        groups.setdefault(fsid, []).append(name)
    return list(groups.values())


class _NodeRunner:
    """The steps of one node, in order."""

    def __init__(
        self,
        builder: Builder,
        node: Node,
        facts: NodeFacts,
        trees: LocalTrees,
        shared: dict[str, tuple[str, str]],
    ) -> None:
        self.builder = builder
        self.node = node
        self.facts = facts
        self.trees = trees
        self.shared = shared

    def run(self, steps: list[BuildStep]) -> None:
        """Run every step; after a failure, the rest are skipped."""
        failed: str | None = None
        for step in steps:
            if failed:
                reason = f"{failed} failed on this node"
                self.builder.record(
                    StepResult(self.node.name, step.name, Status.SKIPPED, detail=reason)
                )
                continue
            result = self.step(step)
            self.builder.record(result)
            if result.status is Status.FAILED:
                failed = step.name

    def step(self, step: BuildStep) -> StepResult:
        """One step, with a progress line while it runs."""
        log = StepLog(self.builder.log_path(self.node.name, step))
        started = time.monotonic()
        with self._task(step) as say:
            try:
                return self._work(step, log, say, started)
            except (NodeError, StepFailed, OSError) as exc:
                message = exc.message if isinstance(exc, NodeError) else str(exc)
                log.write(f"# r2bench: {message}")
                log.keep()
                return self._failed(step, log, started, message)
            finally:
                log.close()

    @contextmanager
    def _task(self, step: BuildStep) -> Iterator[Say]:
        """A progress line for the step; yields the function that updates its text."""
        progress = self.builder.progress
        head = f"{self.node.name} {step.name}:"
        task = progress.add_task(f"{head} checking", total=None)

        def say(text: str) -> None:
            line = text if len(text) <= LINE_CHARS else text[: LINE_CHARS - 1] + "…"
            progress.update(task, description=f"{head} {line}")

        try:
            yield say
        finally:
            progress.remove_task(task)

    def _work(self, step: BuildStep, log: StepLog, say: Say, started: float) -> StepResult:
        log.write(f"# r2bench setup: {step.name} on {self.node.name} in {step.directory}")
        chosen = self._select_patches(step, log)
        key = self._key(step, log, say, chosen)
        stamp = cache.read_stamp(_cat(self.node, f"{step.directory}/{cache.STAMP_NAME}"))
        if cache.is_current(stamp, key) and not self.builder.options.force:
            return self._current(step, key, stamp)
        self._check_shared(step, key)
        log.keep()
        if step.local_source:
            say("copying source from the controller")
            self._upload(step, log)
        self._apply_patches(step, chosen, key, log, say)
        result = self._build(step, log, say)
        if not result.ok:
            return self._build_failed(step, log, started, result.exit_code, result.timed_out)
        return self._built(step, key, log, started, chosen)

    def _select_patches(self, step: BuildStep, log: StepLog) -> tuple[patches.SelectedPatch, ...]:
        try:
            chosen, skipped = patches.select(step.recipe, self.facts)
        except patches.PatchMissing as exc:
            raise StepFailed(str(exc)) from exc
        for note in skipped:
            log.write(f"# r2bench: {note}")
        return chosen

    def _apply_patches(
        self,
        step: BuildStep,
        chosen: tuple[patches.SelectedPatch, ...],
        key: cache.BuildKey,
        log: StepLog,
        say: Say,
    ) -> None:
        """Copy each patch to the node and apply it; one that does not apply fails the step."""
        for patch in chosen:
            say(f"applying {patch.file}")
            remote = patches.remote_path(step.directory, patch)
            self.node.run(f"mkdir -p {shlex.quote(posixpath.dirname(remote))}")
            self.node.put(patch.path, remote, timeout=UPLOAD_TIMEOUT_S)
            log.write(f"# r2bench: patch {patch.file} (sha256 {patch.sha256[:16]}, {patch.why})")
            result = self._stream(
                patches.apply_command(step.directory, remote), log, say, SHORT_TIMEOUT_S
            )
            if not result.ok:
                raise StepFailed(
                    f"patch {patch.file} does not apply to {step.name} "
                    f"(source {key.source}) on node {self.node.name}; the patch needs updating "
                    "for this source version"
                )

    def _key(
        self,
        step: BuildStep,
        log: StepLog,
        say: Say,
        chosen: tuple[patches.SelectedPatch, ...] = (),
    ) -> cache.BuildKey:
        nccl = ""
        if step.recipe.kind is RecipeKind.BENCHMARK:
            version = _nccl_version(self.node, step.nccl_home)
            nccl = str(version) if version is not None else NONE
        return cache.BuildKey(
            recipe=step.name,
            source=self._source_id(step, log, say),
            commands=step.build,
            cuda=self.facts.cuda_version or NONE,
            mpi=self.facts.mpi_version or NONE,
            nccl=nccl,
            patches=tuple(patch.key for patch in chosen),
        )

    def _source_id(self, step: BuildStep, log: StepLog, say: Say) -> str:
        if step.local_source:
            return self.trees.digest(step.local_source)
        if not isinstance(step.recipe.source, GitSource):
            return NONE
        say("fetching")
        fetch = step.fetch
        if step.recipe.patches:
            fetch = (patches.restore_command(step.directory), *fetch)
        for command in fetch:
            result = self._stream(command, log, say, FETCH_TIMEOUT_S)
            if not result.ok:
                log.keep()
                raise StepFailed(f"fetching the source failed: {command}")
        head = self.node.run(f"git -C {shlex.quote(step.directory)} rev-parse HEAD")
        return head.stdout.strip()

    def _current(
        self, step: BuildStep, key: cache.BuildKey, stamp: cache.Stamp | None
    ) -> StepResult:
        self.shared.setdefault(step.directory, (key.digest(), self.node.name))
        by = stamp.node if stamp else self.node.name
        detail = f"built {stamp.built_at if stamp else '?'}" + (
            f" by {by}, same work folder" if by != self.node.name else ""
        )
        return StepResult(self.node.name, step.name, Status.CURRENT, key.digest(), detail=detail)

    def _check_shared(self, step: BuildStep, key: cache.BuildKey) -> None:
        """Refuse to overwrite a build that a node sharing this folder just made or checked.
        Keyed by the build folder: one recipe may have several builds (nccl-tests against each
        library under test), each in its own folder."""
        earlier = self.shared.get(step.directory)
        if earlier and earlier[0] != key.digest():
            raise StepFailed(
                f"shares its work folder with {earlier[1]} but needs another build "
                f"(key {key.digest()} vs {earlier[0]}, e.g. another CUDA or MPI); "
                "give the testbed a node-local paths.work_dir"
            )
        self.shared[step.directory] = (key.digest(), self.node.name)

    def _upload(self, step: BuildStep, log: StepLog) -> None:
        assert step.local_source is not None
        tarball = self.trees.tarball(step.local_source)
        directory = shlex.quote(step.directory)
        remote = f"{posixpath.dirname(step.directory) or '.'}/.upload-{step.name}.tar.gz"
        self.node.run(f"mkdir -p {shlex.quote(posixpath.dirname(remote))}")
        self.node.put(tarball, remote, timeout=UPLOAD_TIMEOUT_S)
        self.node.run(
            f"rm -rf {directory} && mkdir -p {directory} && tar -xzf {shlex.quote(remote)} "
            f"-C {directory} && rm -f {shlex.quote(remote)}",
            timeout=UPLOAD_TIMEOUT_S,
        )
        log.write(f"# copied {resolve_local_path(step.local_source)} to {step.directory}")

    def _build(self, step: BuildStep, log: StepLog, say: Say) -> _Outcome:
        self.node.run(f"rm -f {shlex.quote(step.directory + '/' + cache.STAMP_NAME)}")
        deadline = time.monotonic() + self.builder.options.build_timeout_s
        for command in step.build:
            say("building")
            result = self._stream(command, log, say, max(1.0, deadline - time.monotonic()))
            if not result.ok:
                return result
        return _Outcome(True, 0, False)

    def _stream(self, command: str, log: StepLog, say: Say, timeout: float) -> _Outcome:
        log.write(f"$ {command}")

        def on_line(line: StreamLine) -> None:
            log.write(line.text)
            if line.text.strip():
                say(line.text.strip())

        result = self.node.stream(command, on_line, timeout=timeout, check=False)
        if result.timed_out:
            log.write(f"# r2bench: timed out after {timeout:.0f} s")
        elif not result.ok:
            log.write(f"# r2bench: exit code {result.exit_code}")
        return _Outcome(result.ok, result.exit_code, result.timed_out)

    def _built(
        self,
        step: BuildStep,
        key: cache.BuildKey,
        log: StepLog,
        started: float,
        chosen: tuple[patches.SelectedPatch, ...] = (),
    ) -> StepResult:
        seconds = time.monotonic() - started
        stamp = cache.make_stamp(
            key,
            recipe=step.name,
            ref=step.ref,
            node=self.node.name,
            directory=step.directory,
            lib_dir=step.lib_dir,
            nccl_home=step.nccl_home,
            nccl_version=_nccl_version(self.node, step.nccl_home),
            build_s=round(seconds, 1),
            patches=[patch.record() for patch in chosen],
        )
        path = shlex.quote(f"{step.directory}/{cache.STAMP_NAME}")
        self.node.run(f"printf '%s' {shlex.quote(cache.stamp_text(stamp))} > {path}")
        log.write(f"# r2bench: built in {seconds:.1f} s, key {key.digest()}")
        return StepResult(self.node.name, step.name, Status.BUILT, key.digest(), seconds, log.path)

    def _build_failed(
        self, step: BuildStep, log: StepLog, started: float, code: int | None, timed_out: bool
    ) -> StepResult:
        why = (
            f"timed out after {self.builder.options.build_timeout_s:.0f} s"
            if timed_out
            else f"exit code {code}"
        )
        return self._failed(step, log, started, f"build {why}")

    def _failed(self, step: BuildStep, log: StepLog, started: float, detail: str) -> StepResult:
        failure = analyze(log.text(), step.recipe.build.known_failures)
        return StepResult(
            self.node.name,
            step.name,
            Status.FAILED,
            seconds=time.monotonic() - started,
            log=log.path,
            detail=detail,
            failure=failure,
        )


@dataclass(frozen=True)
class _Outcome:
    ok: bool
    exit_code: int | None
    timed_out: bool
