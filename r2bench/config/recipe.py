"""Build recipes (the YAML files in `plugin/`): where a component's source comes from and how to
build and run it. Recipes are data; building them is the node layer's job."""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from enum import Enum
from pathlib import Path, PurePosixPath
from typing import Literal

from pydantic import Field, PrivateAttr, field_validator, model_validator

from r2bench.config.types import EnvName, FreeText, GitRef, Name, StrictModel


class RecipeKind(str, Enum):
    """A communication library under test, or a benchmark that runs on top of one."""

    LIBRARY = "library"
    BENCHMARK = "benchmark"


class GitSource(StrictModel):
    """Clone this repository at this ref on every node."""

    git: FreeText = Field(description="Repository URL.")
    ref: GitRef = Field(description="Default tag, branch or commit (an experiment may override).")


class LocalSource(StrictModel):
    """Copy a source tree from the controller to every node (air-gapped clusters, tests)."""

    path: FreeText = Field(
        description="Path on the controller; `{r2bench}` is this package's root."
    )


class KnownFailure(StrictModel):
    """A build-log pattern with the explanation a user needs when it appears."""

    pattern: FreeText
    explain: FreeText


_OPERATORS: dict[str, Callable[[tuple[int, ...], tuple[int, ...]], bool]] = {
    ">=": operator.ge,
    "<=": operator.le,
    "==": operator.eq,
    "!=": operator.ne,
    ">": operator.gt,
    "<": operator.lt,
}
_CLAUSE = re.compile(r"^\s*(>=|<=|==|!=|>|<)\s*([0-9]+(?:\.[0-9]+)*)\s*$")

Version = tuple[int, ...]


def parse_version(text: str) -> Version:
    """'13.0' -> (13, 0)."""
    return tuple(int(part) for part in text.split("."))


def parse_constraint(text: str) -> list[tuple[str, Version]]:
    """'>=12.2,<13' -> [('>=', (12, 2)), ('<', (13,))]; raises ValueError on anything else."""
    clauses = []
    for clause in text.split(","):
        match = _CLAUSE.match(clause)
        if not match:
            raise ValueError(
                f"'{clause.strip()}' is not a version clause (use e.g. '>=13' or '>=12.2,<13')"
            )
        clauses.append((match.group(1), parse_version(match.group(2))))
    return clauses


def satisfies(version: Version, constraint: str) -> bool:
    """Whether `version` meets every clause; missing parts count as 0 (13 == 13.0)."""
    for op, bound in parse_constraint(constraint):
        width = max(len(version), len(bound))
        left = version + (0,) * (width - len(version))
        right = bound + (0,) * (width - len(bound))
        if not _OPERATORS[op](left, right):
            return False
    return True


class PatchCondition(StrictModel):
    """Facts of the node that a patch needs; every field given must hold."""

    cuda: FreeText | None = Field(
        None, description="CUDA toolkit version on the node, e.g. '>=13' or '>=12.2,<13'."
    )

    @field_validator("cuda")
    @classmethod
    def _valid_constraint(cls, value: str | None) -> str | None:
        if value is not None:
            parse_constraint(value)
        return value


class RecipePatch(StrictModel):
    """A unified diff (in `plugin/patches/`) applied to the fetched source before building."""

    file: FreeText = Field(description="File name inside the recipe folder's patches/.")
    when: PatchCondition | None = Field(None, description="Apply only on nodes matching this.")
    description: FreeText = ""

    @field_validator("file")
    @classmethod
    def _inside_patches(cls, value: str) -> str:
        path = PurePosixPath(value)
        if path.is_absolute() or ".." in path.parts or not value.strip():
            raise ValueError(f"'{value}' must be a file name inside plugin/patches/")
        return value


class BuildSpec(StrictModel):
    """Shell steps run in the source tree. Placeholders: {jobs} {cuda_home} {mpi_home}
    {gencode} {nccl_home} (the library under test's home, for benchmarks) {python} (the
    testbed's paths.python)."""

    steps: list[FreeText] = Field(default_factory=list)
    known_failures: list[KnownFailure] = Field(default_factory=list)


class Recipe(StrictModel):
    """One buildable (or pre-installed) component."""

    name: Name
    kind: RecipeKind
    description: FreeText = ""
    source: GitSource | LocalSource | None = Field(
        None, description="Where the code comes from; none for what is already on the nodes."
    )
    build: BuildSpec = BuildSpec()
    patches: list[RecipePatch] = Field(
        default_factory=list,
        description="Patches applied in order after fetching (part of the build's cache key).",
    )
    home: FreeText = Field(
        ".", description="Install prefix inside the source tree (NCCL_HOME for benchmarks)."
    )
    lib_dir: FreeText | None = Field(None, description="Put first on LD_LIBRARY_PATH at run time.")
    modes: list[int] = Field(
        default_factory=list, description="R2CC_MODE values the library knows (empty: none)."
    )
    env_knobs: list[EnvName] = Field(default_factory=list, description="Variables it reads.")
    recovery: list[Literal["in_library", "shrink"]] = Field(
        default_factory=list,
        description="Recovery strategies that need the library's help and that it offers: "
        "in_library (it moves traffic off a failed NIC by itself), shrink (survivors can drop "
        "a failed node's ranks and go on: ncclCommShrink, NCCL >= 2.27).",
    )
    job_recovery: list[Literal["restart", "shrink"]] = Field(
        default_factory=list,
        description="Training benchmark: the recovery strategies the job carries out itself: "
        "restart (checkpoints, a watchdog, resume on start), shrink (survivors drop the failed "
        "node's ranks and train on).",
    )
    env: dict[EnvName, FreeText] = Field(
        default_factory=dict,
        description="Variables every run of this library gets (the experiment's win).",
    )
    command: list[FreeText] = Field(
        default_factory=list,
        description="Benchmark argv; `{collective}` and `{src}` are filled in per run.",
    )
    collectives: list[Name] = Field(default_factory=list, description="Collectives it can run.")
    workload: Literal["collective", "training"] = Field(
        "collective",
        description="collective: nccl-tests' flags; training: the experiment's `training:` "
        "options (docs/training.md).",
    )
    preload: list[FreeText] = Field(
        default_factory=list,
        description="Files every run of this benchmark preloads (LD_PRELOAD, space-separated, "
        "in this order); `{src}` (its folder, built against the run's library) and `{nccl_home}` "
        "(the run's library's home) are filled in. The first `libnccl*` entry is also the file "
        "the run must be served by (R2B_EXPECT_NCCL, which the PyTorch workload checks).",
    )
    nic_map_env: EnvName | None = Field(
        None, description="Variable that receives each node's data-NIC addresses (node=a,b;...)."
    )

    _folder: Path | None = PrivateAttr(None)

    @model_validator(mode="after")
    def _benchmark_has_command(self) -> Recipe:
        if self.kind is RecipeKind.BENCHMARK and not self.command:
            raise ValueError("a benchmark recipe needs `command`")
        return self

    @model_validator(mode="after")
    def _patches_need_a_source(self) -> Recipe:
        if self.patches and self.source is None:
            raise ValueError("`patches` needs a `source` to patch")
        return self

    def with_folder(self, folder: Path) -> Recipe:
        """This recipe, remembering the folder it was loaded from (where patches/ lives)."""
        self._folder = folder
        return self

    def patch_path(self, patch: RecipePatch) -> Path:
        """Where `patch` lives on the controller: <recipe folder>/patches/<file>."""
        folder = self._folder if self._folder is not None else recipe_dirs()[0]
        return folder / "patches" / patch.file


def recipe_dirs() -> list[Path]:
    """Where recipes are looked up: the plugin/ folder shipped with r2bench."""
    from r2bench.resources import plugin_dir

    return [plugin_dir()]
