"""Build recipes (the YAML files in `plugin/`): where a component's source comes from and how to
build and run it. Recipes are data; building them is the node layer's job."""

from __future__ import annotations

from enum import Enum
from pathlib import Path

from pydantic import Field, model_validator

from r2bench.config.types import EnvName, FreeText, Name, StrictModel


class RecipeKind(str, Enum):
    """A communication library under test, or a benchmark that runs on top of one."""

    LIBRARY = "library"
    BENCHMARK = "benchmark"


class GitSource(StrictModel):
    """Clone this repository at this ref on every node."""

    git: FreeText = Field(description="Repository URL.")
    ref: FreeText = Field(description="Default tag, branch or commit (an experiment may override).")


class LocalSource(StrictModel):
    """Copy a source tree from the controller to every node (air-gapped clusters, tests)."""

    path: FreeText = Field(
        description="Path on the controller; `{r2bench}` is this package's root."
    )


class KnownFailure(StrictModel):
    """A build-log pattern with the explanation a user needs when it appears."""

    pattern: FreeText
    explain: FreeText


class BuildSpec(StrictModel):
    """Shell steps run in the source tree. Placeholders: {jobs} {cuda_home} {mpi_home}
    {gencode} {nccl_home} (the library under test's home, for benchmarks)."""

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
    home: FreeText = Field(
        ".", description="Install prefix inside the source tree (NCCL_HOME for benchmarks)."
    )
    lib_dir: FreeText | None = Field(None, description="Put first on LD_LIBRARY_PATH at run time.")
    modes: list[int] = Field(
        default_factory=list, description="R2CC_MODE values the library knows (empty: none)."
    )
    env_knobs: list[EnvName] = Field(default_factory=list, description="Variables it reads.")
    command: list[FreeText] = Field(
        default_factory=list,
        description="Benchmark argv; `{collective}` and `{src}` are filled in per run.",
    )
    collectives: list[Name] = Field(default_factory=list, description="Collectives it can run.")
    nic_map_env: EnvName | None = Field(
        None, description="Variable that receives each node's data-NIC addresses (node=a,b;...)."
    )

    @model_validator(mode="after")
    def _benchmark_has_command(self) -> Recipe:
        if self.kind is RecipeKind.BENCHMARK and not self.command:
            raise ValueError("a benchmark recipe needs `command`")
        return self


def recipe_dirs() -> list[Path]:
    """Where recipes are looked up: the plugin/ folder shipped with r2bench."""
    from r2bench.resources import plugin_dir

    return [plugin_dir()]
