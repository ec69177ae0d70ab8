"""Recipe patches: which of a recipe's patches a node gets, their identity for the cache key and
the stamp, and the shell line that applies one (pure).

A patch is a unified diff kept in `plugin/patches/`, applied in the recipe's order to the fresh
source (after fetching or copying) and before the build steps. A patch with a `when` condition
is applied only on nodes whose probed facts match (e.g. CUDA >= 13); on a node where a fact is
unknown the condition does not hold. The patch's content hash is part of the build key, so
editing a patch rebuilds, and the stamp lists what was applied and why.
"""

from __future__ import annotations

import hashlib
import posixpath
import shlex
from dataclasses import dataclass
from pathlib import Path

from r2bench.config.recipe import Recipe, RecipePatch, satisfies
from r2bench.errors import InputError
from r2bench.setup.probe import NodeFacts

PATCH_FOLDER = ".r2bench-patches"
"""Where patches are copied inside the component's folder on the node."""
HASH_LENGTH = 16


@dataclass(frozen=True)
class SelectedPatch:
    """A patch that applies on this node, with the reason and its content hash."""

    file: str
    path: Path
    sha256: str
    why: str

    @property
    def key(self) -> str:
        """Its part of the cache key: file name and content hash."""
        return f"{self.file}:{self.sha256[:HASH_LENGTH]}"

    def record(self) -> dict[str, str]:
        """What the build stamp says about it."""
        return {"file": self.file, "sha256": self.sha256, "why": self.why}


class PatchMissing(InputError):
    """A recipe names a patch file that is not there."""


def condition_holds(patch: RecipePatch, facts: NodeFacts) -> tuple[bool, str]:
    """Whether `patch` applies on the node described by `facts`, and why (for logs and stamps)."""
    when = patch.when
    if when is None or when.cuda is None:
        return True, "always"
    release = facts.cuda_release
    if release is None:
        return False, f"CUDA version unknown on {facts.node}, needs {when.cuda}"
    shown = ".".join(str(part) for part in release)
    if satisfies(release, when.cuda):
        return True, f"CUDA {shown} matches {when.cuda}"
    return False, f"CUDA {shown} does not match {when.cuda}"


def select(recipe: Recipe, facts: NodeFacts) -> tuple[tuple[SelectedPatch, ...], tuple[str, ...]]:
    """(patches to apply in order, notes about the ones left out) for one node.

    Raises PatchMissing when a patch that applies is not on the controller.
    """
    chosen: list[SelectedPatch] = []
    skipped: list[str] = []
    for patch in recipe.patches:
        holds, why = condition_holds(patch, facts)
        if not holds:
            skipped.append(f"patch {patch.file} not applied: {why}")
            continue
        path = recipe.patch_path(patch)
        if not path.is_file():
            raise PatchMissing(
                f"recipe {recipe.name} lists patch {patch.file}, not found at {path}"
            )
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        chosen.append(SelectedPatch(patch.file, path, digest, why))
    return tuple(chosen), tuple(skipped)


def remote_path(directory: str, patch: SelectedPatch) -> str:
    """Where the patch file goes on the node (inside the component's folder)."""
    return posixpath.join(directory, PATCH_FOLDER, posixpath.basename(patch.file))


def apply_command(directory: str, patch_file: str) -> str:
    """Check, then apply, one patch in `directory` (git apply; `patch -p1` where git is missing).

    Git looks for a repository no higher than `directory`, so a source tree that sits inside
    some other checkout is patched as plain files. The check runs first so that a patch that
    does not apply leaves the tree untouched.
    """
    d, p = shlex.quote(directory), shlex.quote(patch_file)
    ceiling = shlex.quote(posixpath.dirname(directory.rstrip("/")) or "/")
    git = f"GIT_CEILING_DIRECTORIES={ceiling} git apply"
    return (
        f"cd {d} && if command -v git >/dev/null 2>&1; "
        f"then {git} --check {p} && {git} --verbose {p}; "
        f"else patch -p1 --forward --batch --dry-run -i {p} >/dev/null "
        f"&& patch -p1 --forward --batch -i {p}; fi"
    )


def restore_command(directory: str) -> str:
    """Undo earlier patches in a git checkout before fetching again (no-op elsewhere)."""
    d = shlex.quote(directory)
    return f"if [ -d {d}/.git ]; then git -C {d} checkout -q -- . ; fi"
