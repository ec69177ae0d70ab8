"""Recipe patches: the recipe model, conditions on node facts, the cache key, and setup applying
them on a local testbed (a patch that does not apply is a build failure naming patch and node).

This module holds its pure tests; the same subject's other tests:
tests/integration/test_setup_patches.py (those with real processes).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from r2bench.config.errors import ConfigError
from r2bench.config.recipe import Recipe, RecipePatch, parse_constraint, satisfies
from r2bench.config.recipes import load_recipes
from r2bench.setup import cache, patches
from r2bench.setup.probe import NodeFacts, parse_facts
from tests.support import paths

ROOT = paths.REPO
PLUGIN = ROOT / "plugin"
CUDA13 = NodeFacts("gpu0", cuda_version="release 13.0, V13.0.88")
CUDA12 = NodeFacts("gpu0", cuda_version="release 12.8, V12.8.93")


# ---- model and conditions ------------------------------------------------------------------
@pytest.mark.parametrize(
    ("version", "constraint", "expected"),
    [
        ((13, 0), ">=13", True),
        ((12, 8), ">=13", False),
        ((13,), "==13.0", True),
        ((12, 4), ">=12.2,<13", True),
        ((13, 1), ">=12.2,<13", False),
        ((12, 2), ">12.2", False),
        ((12, 2), "!=12.3", True),
    ],
)
def test_version_constraints(version: tuple[int, ...], constraint: str, expected: bool) -> None:
    assert satisfies(version, constraint) is expected


@pytest.mark.parametrize("bad", ["13", "~=13", ">=13,", ">= x", ">=13;rm -rf /"])
def test_bad_constraints_are_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="not a version clause"):
        parse_constraint(bad)


def test_patch_file_stays_inside_patches() -> None:
    for bad in ("../x.patch", "/etc/passwd", " "):
        with pytest.raises(ValidationError):
            RecipePatch(file=bad)
    assert RecipePatch(file="sub/x.patch").file == "sub/x.patch"


def test_patches_need_a_source() -> None:
    with pytest.raises(ValidationError, match="needs a `source`"):
        Recipe.model_validate({"name": "x", "kind": "library", "patches": [{"file": "a.patch"}]})


def test_bad_condition_in_a_recipe_file_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "x.yaml").write_text(
        "name: x\nkind: library\nsource: {path: /src}\n"
        "patches:\n  - {file: a.patch, when: {cuda: 'newer'}}\n"
    )
    with pytest.raises(ConfigError) as info:
        load_recipes([tmp_path])
    assert "x.yaml" in str(info.value) and "not a version clause" in str(info.value)


def test_cuda_release_from_the_probe() -> None:
    assert CUDA13.cuda_release == (13, 0)
    assert parse_facts("n", "cuda_version=release 12.4, V12.4.131\n").cuda_release == (12, 4)
    assert NodeFacts("n").cuda_release is None


def test_r2ccl_recipe_patches_only_under_cuda13() -> None:
    recipe = load_recipes([PLUGIN])["r2ccl"]
    (patch,) = recipe.patches
    assert patch.when is not None and patch.when.cuda == ">=13"
    chosen, skipped = patches.select(recipe, CUDA13)
    assert [p.file for p in chosen] == [patch.file] and not skipped
    assert chosen[0].why == "CUDA 13.0 matches >=13"
    assert chosen[0].path == PLUGIN / "patches" / patch.file and len(chosen[0].sha256) == 64
    chosen, skipped = patches.select(recipe, CUDA12)
    assert chosen == () and skipped == (
        f"patch {patch.file} not applied: CUDA 12.8 does not match >=13",
    )
    chosen, skipped = patches.select(recipe, NodeFacts("gpu1"))
    assert chosen == () and "CUDA version unknown on gpu1" in skipped[0]


def test_missing_patch_file_is_named(tmp_path: Path) -> None:
    (tmp_path / "x.yaml").write_text(
        "name: x\nkind: library\nsource: {path: /src}\npatches: [{file: gone.patch}]\n"
    )
    recipe = load_recipes([tmp_path])["x"]
    with pytest.raises(
        patches.PatchMissing, match=r"x lists patch gone.patch, not found at .*patches/gone.patch"
    ):
        patches.select(recipe, CUDA13)


# ---- the R-2CCL CUDA 13 patch itself ---------------------------------------------------------
def test_cuda13_patch_guards_every_change() -> None:
    """Every hunk of the R-2CCL patch adds code only under a CUDA >= 13 check."""
    text = (PLUGIN / "patches" / "r2ccl-cuda13.patch").read_text()
    files = [line.split(" b/")[1] for line in text.splitlines() if line.startswith("diff --git")]
    assert files == [
        "makefiles/common.mk",
        "src/include/cudawrap.h",
        "src/misc/cudawrap.cc",
        "src/misc/strongstream.cc",
    ]
    added = [
        line for line in text.splitlines() if line.startswith("+") and not line.startswith("+++")
    ]
    removed = [
        line for line in text.splitlines() if line.startswith("-") and not line.startswith("---")
    ]
    assert 60 <= len(added) <= 110
    guards = [line for line in added if "CUDART_VERSION >= 13000" in line or "-ge 13" in line]
    assert len(guards) == 6
    # The only lines removed turn an `if` into an `elif`/`else if` after a new CUDA 13 branch.
    assert len(removed) == 2
    assert all("if" in line for line in removed)
    assert sum("NCCL_CUDA_PFN_PIN(cu" in line for line in added) == 32


# ---- cache key -------------------------------------------------------------------------------
def test_patches_enter_the_key_only_when_present() -> None:
    bare = cache.BuildKey("r2ccl", "abc", ("make",), "13.0", "4.1.6")
    assert "patches" not in bare.fields()
    patched = cache.BuildKey("r2ccl", "abc", ("make",), "13.0", "4.1.6", patches=("a.patch:1",))
    other = cache.BuildKey("r2ccl", "abc", ("make",), "13.0", "4.1.6", patches=("a.patch:2",))
    assert len({bare.digest(), patched.digest(), other.digest()}) == 3
    assert patched.fields()["patches"] == ["a.patch:1"]


def test_apply_command_quotes_paths() -> None:
    line = patches.apply_command("/w/src/my lib", "/w/src/my lib/.r2bench-patches/a.patch")
    assert "cd '/w/src/my lib'" in line and "GIT_CEILING_DIRECTORIES=/w/src git apply" in line
    assert "--check '/w/src/my lib/.r2bench-patches/a.patch'" in line
