"""The build steps of one node (pure): the planner's setup steps, rendered with that node's
CUDA, MPI and GPU architecture, plus what the cache and the stamp need to know about each.

The planner renders commands from the testbed file; here the testbed is first completed with
what the node probe found (only where the testbed leaves a value unset), so that every node gets
NVCC_GENCODE for the GPUs it has and the CUDA/MPI folders it really has.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from r2bench.config.recipe import GitSource, LocalSource, Recipe
from r2bench.config.testbed import Testbed
from r2bench.plan.build import Inputs, make_plan
from r2bench.plan.model import SetupStep
from r2bench.setup.probe import NodeFacts


@dataclass(frozen=True)
class BuildStep:
    """Fetching and building one component on one node."""

    recipe: Recipe
    ref: str | None
    directory: str
    fetch: tuple[str, ...]
    build: tuple[str, ...]
    lib_dir: str | None
    nccl_home: str | None

    @property
    def name(self) -> str:
        """The recipe's name."""
        return self.recipe.name

    @property
    def local_source(self) -> str | None:
        """The controller path of a LocalSource (None for git or pre-installed components)."""
        source = self.recipe.source
        return source.path if isinstance(source, LocalSource) else None


def node_testbed(testbed: Testbed, node: str, facts: NodeFacts) -> Testbed:
    """The testbed with unset CUDA/MPI folders and GPU architecture taken from `facts`."""
    paths = testbed.paths.model_copy(
        update={
            "cuda_home": testbed.paths.cuda_home or facts.cuda_home or None,
            "mpi_home": testbed.paths.mpi_home or facts.mpi_home or None,
        }
    )
    model = testbed.node(node)
    arch = (model.gpu_arch if model else None) or facts.gpu_arch
    nodes = [n.model_copy(update={"gpu_arch": arch}) for n in testbed.nodes] if arch else None
    return testbed.model_copy(update={"paths": paths, "nodes": nodes or testbed.nodes})


def node_steps(inputs: Inputs, node: str, facts: NodeFacts, jobs: int | None) -> list[BuildStep]:
    """Every setup step of the plan that involves `node`, rendered for that node."""
    testbed = node_testbed(inputs.testbed, node, facts)
    plan = make_plan(dataclasses.replace(inputs, testbed=testbed), jobs)
    return [_build_step(step, inputs.recipes) for step in plan.setup if node in step.nodes]


def _build_step(step: SetupStep, recipes: dict[str, Recipe]) -> BuildStep:
    recipe = recipes[step.recipe]
    return BuildStep(
        recipe=recipe,
        ref=step.ref,
        directory=step.directory,
        fetch=tuple(step.fetch) if isinstance(recipe.source, GitSource) else (),
        build=tuple(step.build),
        lib_dir=step.library_lib_dir,
        nccl_home=step.library_home,
    )
