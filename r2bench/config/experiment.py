"""The experiment file: what to build, what to run, which faults to inject, and the sweep.

Sweep dimensions are `library`, `collective`, `scenario`, `size` (when sizes is a list),
`recovery` (when the experiment has a `recovery:` section) and any environment variable (UPPER_CASE names such as R2CC_MODE). A dimension the sweep does not name
takes every declared value (libraries, collectives, scenarios incl. `none`, sizes).
"""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Any

from pydantic import Field, StrictBool, StrictFloat, StrictInt, field_validator, model_validator

from r2bench.config.types import (
    EnvValue,
    FreeText,
    GitRef,
    Name,
    RunEnvName,
    Size,
    StrictModel,
    VirtualRate,
)

NO_FAULT = "none"
MAX_SECONDS = 7 * 86400
"""Longest deadline or fault window: a week (leases reach the node as plain decimals)."""
MIN_DEADLINE_S = 1.0
"""Shortest deadline: a run cannot even launch in less, and the node-side kill needs a limit
that rounds to a positive number of milliseconds."""
DEFAULT_MAX_RUNS = 100_000
"""Most runs a sweep may expand to unless the experiment raises `max_runs`."""
MAX_COUNT = 1_000_000
"""Largest iteration, warmup and cycle count passed to nccl-tests."""
MAX_TRIALS = 10_000
"""Most trials a scenario may ask for (each is one run per cell)."""
CORE_DIMENSIONS = ("library", "collective", "scenario", "size", "recovery")


class Component(StrictModel):
    """A recipe from `plugin/` plus the version of it to use."""

    recipe: Name
    ref: GitRef | None = Field(None, description="Git tag/branch/commit (default: recipe's).")
    env: dict[RunEnvName, EnvValue] = Field(
        default_factory=dict,
        description="Set in every run of this library (over the experiment's env; a sweep "
        "dimension overrides it): one library, several settings, e.g. R2CC_MODE per entry "
        "beside a stock NCCL that reads none.",
    )


class SizeRange(StrictModel):
    """Message sizes as nccl-tests sweeps them in one job: -b begin -e end -f factor."""

    begin: Size
    end: Size
    factor: StrictInt = Field(2, ge=2, le=1024)

    @model_validator(mode="after")
    def _ordered(self) -> SizeRange:
        if self.begin > self.end:
            raise ValueError(f"begin ({self.begin} B) is larger than end ({self.end} B)")
        return self


class Since(str, Enum):
    """What a fault trigger counts from."""

    LAUNCH = "launch"
    FIRST_RESULT = "first_result"
    UPDATE = "update"


class Trigger(StrictModel):
    """When a fault is injected: `after_s` seconds after the job launched, printed its first
    result, or (`since: update`, training workloads) printed update `update`'s line, so the cut
    falls at the same update in every run (the artifact's test 09 cuts at update 400)."""

    after_s: StrictFloat = Field(ge=0, le=86400, allow_inf_nan=False)
    since: Since = Since.LAUNCH
    update: StrictInt | None = Field(
        None, ge=1, le=MAX_COUNT, description="With since: update, the update it counts from."
    )
    within_s: StrictFloat | None = Field(
        None, gt=0, le=86400, allow_inf_nan=False,
        description="A fault campaign: each trial draws its time uniformly from "
        "[after_s, after_s + within_s] (the scenario's seed; docs/campaigns.md).",
    )  # fmt: skip
    within_updates: StrictInt | None = Field(
        None, ge=1, le=MAX_COUNT,
        description="With since: update, each trial draws its update uniformly from "
        "[update, update + within_updates].",
    )  # fmt: skip

    @model_validator(mode="after")
    def _update_with_since_update(self) -> Trigger:
        if (self.since is Since.UPDATE) != (self.update is not None):
            raise ValueError(
                "`since: update` needs `update: N` (the update whose line starts the clock), "
                "and `update` goes only with `since: update`"
            )
        if self.within_updates is not None and self.since is not Since.UPDATE:
            raise ValueError("`within_updates` goes only with `since: update` and `update: N`")
        return self


class Flap(StrictModel):
    """Repeat a fault: `count` down/up cycles, one every `period_s` seconds."""

    count: StrictInt = Field(ge=1, le=1000, description="Number of down/up cycles.")
    period_s: StrictFloat = Field(
        gt=0, le=86400, description="Seconds from one inject to the next."
    )


class FaultSpec(StrictModel):
    """One fault: what kind, on which NIC of which node, when, and for how long."""

    kind: Name = Field(
        description="ib_port_down, link_down, flow_drop, route_drop, bandwidth_cap (a NIC); "
        "process_stop, process_kill (a rank: params.rank)."
    )
    node: Name
    nic: Name | None = Field(None, description="The NIC (every kind but the process ones).")
    executor: Name | None = Field(
        None,
        description="The host that runs the fault (inject, revert, lease, heal, leftover check): "
        "default the node; a flow_drop runs on the SmartNIC (role: smartnic) carrying the NIC.",
    )
    trigger: Trigger
    duration_s: StrictFloat | None = Field(
        None,
        gt=0,
        le=MAX_SECONDS,
        allow_inf_nan=False,
        description="Heal after this long (seconds, at most a week); unset = until the run ends.",
    )
    params: dict[Name, EnvValue] = Field(
        default_factory=dict, description="Kind-specific settings, e.g. rate: 10gbit."
    )
    repeat: Flap | None = Field(
        None,
        description="Flap: repeat inject/heal `count` times every `period_s` (needs duration_s).",
    )

    @model_validator(mode="after")
    def _flap_fits(self) -> FaultSpec:
        if self.repeat is None:
            return self
        if self.duration_s is None:
            raise ValueError("repeat needs duration_s (how long each cycle stays down)")
        if self.repeat.count > 1 and self.duration_s >= self.repeat.period_s:
            raise ValueError(
                f"duration_s ({self.duration_s:g}) must be shorter than repeat.period_s "
                f"({self.repeat.period_s:g}): the link must come back between cycles"
            )
        return self

    @property
    def cycles(self) -> int:
        """Number of inject/heal cycles (1 without repeat)."""
        return self.repeat.count if self.repeat else 1

    @property
    def latest_after_s(self) -> float:
        """The latest its trigger can fire after its anchor (after_s, plus a drawn range)."""
        return self.trigger.after_s + (self.trigger.within_s or 0.0)

    @property
    def active_window_s(self) -> float | None:
        """Seconds from the first inject to the last heal (None: until the run ends)."""
        if self.duration_s is None:
            return None
        period = self.repeat.period_s if self.repeat else 0.0
        return (self.cycles - 1) * period + self.duration_s


class Scenario(StrictModel):
    """A named set of faults injected together in one run."""

    name: Name
    description: FreeText = ""
    faults: list[FaultSpec] = Field(min_length=1)
    trials: StrictInt = Field(
        1, ge=1, le=MAX_TRIALS,
        description="Runs per cell, each a trial with its own drawn fault times (a campaign).",
    )  # fmt: skip
    seed: StrictInt | None = Field(
        None, ge=0, le=2**63 - 1,
        description="Seed of the drawn triggers (within_s, within_updates); same seed, same "
        "schedule.",
    )  # fmt: skip

    @field_validator("name")
    @classmethod
    def _not_reserved(cls, name: str) -> str:
        if name == NO_FAULT:
            raise ValueError(f"'{NO_FAULT}' is the built-in fault-free scenario; pick another name")
        return name

    @model_validator(mode="after")
    def _seed_with_draws(self) -> Scenario:
        drawn = any(
            f.trigger.within_s is not None or f.trigger.within_updates is not None
            for f in self.faults
        )
        if drawn and self.seed is None:
            raise ValueError(
                "a drawn trigger (within_s, within_updates) needs the scenario's `seed: N`, "
                "so a rerun draws the same schedule"
            )
        if self.seed is not None and not drawn:
            raise ValueError(
                "`seed` has nothing to draw: give a fault's trigger within_s or "
                "within_updates, or drop the seed"
            )
        return self

    @property
    def campaign(self) -> bool:
        """Whether the scenario is a campaign (several trials, or drawn triggers)."""
        return self.trials > 1 or self.seed is not None


DimensionValues = list[Any]


class Sweep(StrictModel):
    """Ramble-style grammar: the cross product of `matrix`, with each `zip` group varying its
    dimensions together (as one dimension), minus any run matching an `exclude` rule."""

    matrix: dict[str, DimensionValues] = Field(default_factory=dict)
    zip: list[dict[str, DimensionValues]] = Field(default_factory=list)
    exclude: list[dict[str, Any]] = Field(default_factory=list)

    @model_validator(mode="after")
    def _shape(self) -> Sweep:
        named: list[str] = list(self.matrix)
        for group in self.zip:
            lengths = {len(values) for values in group.values()}
            if len(lengths) > 1:
                raise ValueError(f"zip group {sorted(group)} has lists of different lengths")
            named.extend(group)
        duplicates = {name for name in named if named.count(name) > 1}
        if duplicates:
            raise ValueError(f"dimension(s) {sorted(duplicates)} named more than once")
        return self


class NcclTestsOptions(StrictModel):
    """Options passed to every benchmark job (nccl-tests flags)."""

    iterations: StrictInt = Field(20, ge=1, le=MAX_COUNT, description="-n")
    warmup: StrictInt = Field(5, ge=0, le=MAX_COUNT, description="-w")
    check: StrictBool = Field(True, description="-c: verify results (#wrong column).")
    cycles: StrictInt | None = Field(
        None, ge=0, le=MAX_COUNT, description="-N: repeat cycles (0 = until stopped)."
    )
    timestamps: StrictBool = Field(True, description="-S 1: timestamp on every result line.")
    per_iteration: StrictBool = Field(True, description="-I 1: per-iteration times in the JSON.")
    timeout_s: StrictInt | None = Field(
        None, ge=1, le=MAX_SECONDS, description="-T: nccl-tests' own per-test timeout."
    )
    datatype: Name = Field("float", description="-d")
    op: Name = Field("sum", description="-o")
    extra_args: list[FreeText] = Field(default_factory=list)


class TrainingOptions(StrictModel):
    """The training job of a training benchmark (`workload: training` recipes): what it trains,
    how long, and which run it is checked against (docs/training.md)."""

    model: Name = Field(
        "tiny",
        description="Model preset: emulator tiny|small; GPU gpt2-124m|gpt2-6l|gpt2-tiny.",
    )
    updates: StrictInt = Field(100, ge=1, le=MAX_COUNT, description="Optimizer updates.")
    batch: StrictInt = Field(8, ge=1, le=4096, description="Sequences per rank per update.")
    seq_len: StrictInt = Field(64, ge=2, le=65536, description="Tokens per sequence.")
    seed: StrictInt = Field(42, ge=0, le=2**31 - 1, description="Seed of model and data.")
    lr: StrictFloat = Field(3e-3, gt=0, le=10, allow_inf_nan=False)
    bucket_mb: StrictInt | None = Field(
        None, ge=1, le=65536,
        description="DDP gradient bucket (MiB); null: one bucket holding every gradient.",
    )  # fmt: skip
    dtype: Name = Field("float32", description="float32, or bf16/fp16 autocast (GPU).")
    digest_every: StrictInt = Field(
        10, ge=0, le=MAX_COUNT, description="A parameter digest every N updates (0: none)."
    )
    data: FreeText | None = Field(
        None, description="A pre-tokenised file (uint16 tokens) on the nodes; null: synthetic."
    )
    baseline: Name | None = Field(
        None,
        description="Library label whose fault-free run every other run is checked against "
        "(bit identity fault free, loss up to the fault under one).",
    )
    extra_args: list[FreeText] = Field(default_factory=list)


class RecoveryStrategy(str, Enum):
    """What a job does when a network failure hits it (docs/recovery.md)."""

    NONE = "none"
    """Nothing: the job dies or hangs (the baseline)."""
    IN_LIBRARY = "in_library"
    """The collective library moves the traffic to other NICs; the job never sees the fault."""
    RESTART = "restart"
    """The watchdog gives up, the job exits, the sweep restarts it from its last checkpoint."""
    SHRINK = "shrink"
    """The survivors drop the failed node's ranks and train on with fewer ranks."""


LIBRARY_STRATEGIES = (RecoveryStrategy.IN_LIBRARY, RecoveryStrategy.SHRINK)
"""Strategies that need the library's help (a recipe's `recovery:` lists those it offers)."""


class RecoveryOptions(StrictModel):
    """How a training job recovers from a network failure: `strategies` is swept as the
    `recovery` dimension; the other fields are the settings of every run that needs them."""

    strategies: list[RecoveryStrategy] = Field(
        min_length=1, description="none, in_library, restart, shrink (swept as `recovery`)."
    )
    watchdog_s: StrictInt = Field(
        10, ge=1, le=86400,
        description="Whole seconds a collective may stall before the job gives up (restart, "
        "shrink), as PyTorch's NCCL watchdog.",
    )  # fmt: skip
    checkpoint_every: StrictInt = Field(
        10, ge=1, le=MAX_COUNT, description="Updates between checkpoints (restart)."
    )
    restart_limit: StrictInt = Field(
        3, ge=0, le=100, description="Starts after the first one (restart)."
    )
    restart_delay_s: StrictFloat = Field(
        0, ge=0, le=3600, allow_inf_nan=False,
        description="The supervisor's wait before a restart (restart).",
    )  # fmt: skip

    @field_validator("strategies")
    @classmethod
    def _unique(cls, strategies: list[RecoveryStrategy]) -> list[RecoveryStrategy]:
        names = [s.value for s in strategies]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"strategy {', '.join(twice)} listed twice; list each once")
        return strategies


class VirtualTestbedSpec(StrictModel):
    """The virtual testbed `r2bench sweep` brings up for this experiment when no -t is given."""

    name: str | None = Field(
        None,
        pattern=r"^[a-z0-9][a-z0-9-]{0,23}$",
        description="Its name (namespaces r2b-NAME-*; default: r2bench, r2benchgpu with gpus).",
    )
    nodes: StrictInt = Field(2, ge=1, le=8, description="Namespace nodes.")
    nics: StrictInt = Field(4, ge=1, le=8, description="Data NICs per node.")
    rate: VirtualRate | None = Field(
        "250mbit", description="tbf cap of every data NIC, both ways (tc rate); null: uncapped."
    )
    gpus: StrictInt = Field(
        0, ge=0, le=16, description="GPUs per node from this host's (shared when it has too few)."
    )
    cuda_home: FreeText | None = Field(None, description="CUDA toolkit (default: detected).")
    mpi_home: FreeText | None = Field(None, description="MPI installation (default: detected).")
    nccl_home: FreeText | None = Field(
        None, description="NCCL already installed on this host, for the `system` library."
    )


class Experiment(StrictModel):
    """Everything that defines a sweep, independent of the testbed it runs on."""

    name: Name
    description: FreeText = ""
    libraries: dict[Name, Component] = Field(min_length=1)
    benchmark: Component = Component(recipe="nccl-tests")
    collectives: list[Name] = Field(["all_reduce"], min_length=1)
    sizes: SizeRange | list[Size] = SizeRange(begin=8, end=128 << 20)
    options: NcclTestsOptions = NcclTestsOptions()
    training: TrainingOptions | None = Field(
        None, description="The job of a training benchmark (`workload: training` recipes)."
    )
    recovery: RecoveryOptions | None = Field(
        None,
        description="Recovery strategies of a training job, swept as `recovery` (docs/recovery.md).",
    )
    nodes: list[Name] | Annotated[StrictInt, Field(ge=1, le=4096)] | None = Field(
        None, description="Node names, a count of the testbed's first nodes, or all."
    )
    gpus_per_node: StrictInt | None = Field(
        None, ge=1, le=64, description="Ranks per node (default: GPUs)."
    )
    env: dict[RunEnvName, EnvValue] = Field(default_factory=dict, description="Set in every run.")
    scenarios: list[Scenario] = Field(default_factory=list)
    predictions: FreeText | None = Field(
        None,
        description="A predictions file (relative to this file): the outcome class expected "
        "per cell, hashed by the sweep before its first run (docs/campaigns.md).",
    )
    sweep: Sweep = Sweep()
    repeats: StrictInt = Field(1, ge=1, le=1000)
    virtual_testbed: VirtualTestbedSpec = Field(
        VirtualTestbedSpec(),
        description="The testbed a sweep with no -t brings up (default: 2 nodes x 4 NICs at 250mbit).",
    )
    max_runs: StrictInt = Field(
        DEFAULT_MAX_RUNS,
        ge=1,
        le=MAX_COUNT * 10,
        description="Refuse a sweep that expands to more runs (after its exclusions, times the repeats).",
    )
    deadline_s: StrictFloat = Field(
        600,
        gt=0,
        le=MAX_SECONDS,
        allow_inf_nan=False,
        description="Harness kills a run after this long (seconds, finite, at most a week).",
    )

    @field_validator("deadline_s")
    @classmethod
    def _deadline_long_enough(cls, deadline_s: float) -> float:
        if deadline_s < MIN_DEADLINE_S:
            raise ValueError(
                f"deadline_s must be at least {MIN_DEADLINE_S:g} s (a run cannot launch in less),"
                f" found {deadline_s:g}"
            )
        return deadline_s

    @field_validator("sizes")
    @classmethod
    def _sizes_not_empty(cls, sizes: SizeRange | list[int]) -> SizeRange | list[int]:
        if isinstance(sizes, list) and not sizes:
            raise ValueError("sizes is an empty list; give at least one size or a begin/end range")
        return sizes

    @model_validator(mode="after")
    def _unique_scenarios(self) -> Experiment:
        names = [scenario.name for scenario in self.scenarios]
        for name in names:
            if names.count(name) > 1:
                raise ValueError(f"scenario name '{name}' appears twice")
        return self

    def scenario(self, name: str) -> Scenario | None:
        """The scenario called `name` (None for the fault-free `none`)."""
        return next((s for s in self.scenarios if s.name == name), None)
