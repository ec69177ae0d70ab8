"""RunSpec: everything that defines one run, and the stable id derived from it."""

from __future__ import annotations

import hashlib
import json
import re

from pydantic import BaseModel, ConfigDict, computed_field

from r2bench.config.experiment import (
    FaultSpec,
    NcclTestsOptions,
    RecoveryStrategy,
    TrainingOptions,
)


class ComponentRef(BaseModel):
    """A recipe at a version, as resolved for one run."""

    model_config = ConfigDict(frozen=True)

    recipe: str
    ref: str | None


class RunRecovery(BaseModel):
    """A training run's recovery strategy and the settings it runs with (experiment's
    `recovery:`)."""

    model_config = ConfigDict(frozen=True)

    strategy: RecoveryStrategy
    watchdog_s: int
    checkpoint_every: int
    restart_limit: int
    restart_delay_s: float


class DrawnFault(BaseModel):
    """What one fault of a campaign trial drew (`plan.campaign`): the record of its time."""

    model_config = ConfigDict(frozen=True)

    fault: int
    after_s: float
    update: int | None = None
    drawn_from: str


class RunCampaign(BaseModel):
    """A campaign run's trial: its number, the scenario's seed and trial count, and what each
    drawn fault drew."""

    model_config = ConfigDict(frozen=True)

    trial: int
    trials: int
    seed: int | None
    draws: tuple[DrawnFault, ...] = ()


class RunSpec(BaseModel):
    """One run: a single launch of the benchmark with one set of settings and faults."""

    model_config = ConfigDict(frozen=True)

    experiment: str
    testbed: str
    library_label: str
    library: ComponentRef
    benchmark: ComponentRef
    collective: str
    size_begin: int
    size_end: int
    size_factor: int
    nodes: tuple[str, ...]
    ranks_per_node: int
    env: dict[str, str]
    scenario: str
    faults: tuple[FaultSpec, ...]
    options: NcclTestsOptions
    training: TrainingOptions | None = None
    recovery: RunRecovery | None = None
    campaign: RunCampaign | None = None
    deadline_s: float
    repeat: int
    source: str | None = None  # imported runs: "<file>@<content hash>[#run N]", so no two collide

    @computed_field  # type: ignore[prop-decorator]
    @property
    def run_id(self) -> str:
        """Readable prefix plus a hash of the whole spec: same spec, same id (resume relies on it)."""
        digest = hashlib.sha256(self.canonical_json().encode()).hexdigest()[:10]
        mode = f"-m{self.env['R2CC_MODE']}" if "R2CC_MODE" in self.env else ""
        if self.library_label.endswith(mode):  # a label that names its mode already (r2ccl-m0)
            mode = ""
        job = "train" if self.training is not None else self.collective
        strategy = f"-{self.recovery.strategy.value}" if self.recovery is not None else ""
        trial = f"-t{self.campaign.trial}" if self.campaign is not None else ""
        prefix = f"{job}-{self.library_label}{mode}{strategy}-{self.scenario}{trial}-r{self.repeat}"
        return f"{_slug(prefix)}-{digest}"

    @property
    def ranks(self) -> int:
        """Total ranks of the job."""
        return self.ranks_per_node * len(self.nodes)

    def canonical_json(self) -> str:
        """The spec as sorted-key JSON, without the derived id."""
        data = self.model_dump(mode="json", exclude={"run_id"})
        for newer in (
            "source",
            "training",
            "recovery",
            "campaign",
        ):  # runs keep the ids they had before these fields
            if data.get(newer) is None:
                data.pop(newer, None)
        for fault in data.get("faults") or ():
            trigger = fault.get("trigger") or {}
            for newer in ("within_s", "within_updates"):  # drawn triggers are newer still
                if trigger.get(newer) is None:
                    trigger.pop(newer, None)
        return json.dumps(data, sort_keys=True, separators=(",", ":"))


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)[:80]
