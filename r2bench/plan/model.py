"""What `r2bench plan` produces: runs with their exact commands, and the setup steps."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, computed_field

from r2bench.plan.runspec import ComponentRef, RunSpec


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


class NodeCommand(Frozen):
    """A shell line to run on one node (or on the controller, node = `controller`)."""

    node: str
    command: str
    root: bool = False


class FaultStep(Frozen):
    """One fault of a run: when it is injected and healed, and the node-side commands."""

    index: int
    kind: str
    node: str
    nic: str
    tag: str
    inject_after_s: float
    since: str
    at_update: int | None = None
    """With `since: update`: the update whose line is the anchor."""
    heal_after_s: float | None
    lease_s: float
    cycles: int = 1
    period_s: float | None = None
    inject: NodeCommand
    revert: NodeCommand
    status: NodeCommand

    @property
    def anchor(self) -> str:
        """What its clock starts from: `launch`, `first_result` or `update N`."""
        return f"update {self.at_update}" if self.since == "update" else self.since


class PlannedRun(Frozen):
    """A run spec and everything that will be executed for it."""

    spec: RunSpec
    run_dir: str
    launch: NodeCommand
    faults: list[FaultStep]
    library_dir: str | None = None
    """The folder on the nodes the library under test is loaded from (first on
    LD_LIBRARY_PATH); None when the system's loader finds it. A log naming another loaded
    libnccl file makes the run `wrong_library`."""


class SetupStep(Frozen):
    """Fetching and building one component on every node of the sweep. A benchmark is built
    against a library (`built_against`); `library_home`/`library_lib_dir` are that library's
    install prefix and run-time library folder on the nodes (the component's own for a library)."""

    component: str
    recipe: str
    ref: str | None
    directory: str
    nodes: list[str]
    fetch: list[str]
    build: list[str]
    built_against: ComponentRef | None = None
    library_home: str | None = None
    library_lib_dir: str | None = None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def commands(self) -> list[str]:
        """Every shell line of this step, in order: fetch, then build."""
        return [*self.fetch, *self.build]


class Plan(Frozen):
    """The whole expanded sweep, ready to print or execute."""

    experiment: str
    testbed: str
    experiment_file: str
    testbed_file: str
    setup: list[SetupStep]
    runs: list[PlannedRun]
    notes: list[str] = []
