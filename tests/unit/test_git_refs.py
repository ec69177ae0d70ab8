"""A library's ref never reaches git as an option, and each distinct ref builds in a folder of
its own. The fetch commands run against a real repository: tests/integration/test_git_fetch.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from r2bench.config.recipe import GitSource
from r2bench.errors import ExitCode
from r2bench.plan.build import git_fetch_commands, load_inputs, make_plan
from tests.support import paths
from tests.support.cli_runner import invoke_as_main

CLOUDLAB = paths.REPO / "experiments" / "testbeds" / "dgx-h100-2node.yaml"
BASE = "name: t\ncollectives: [all_reduce]\nsizes: {begin: 8, end: 1M}\n"


@pytest.mark.parametrize("ref", ["-f", "--orphan=x", "-", "--detach", "a b", "x..y", ""])
def test_a_ref_git_would_read_as_an_option_or_refuse_is_refused_at_load_located(
    tmp_path: Path, ref: str
) -> None:
    """Before: `-f` reached `git checkout --detach -f`, which checked out the default branch
    and exited 0: setup built the wrong revision."""
    path = tmp_path / "exp.yaml"
    path.write_text(BASE + f"libraries:\n  r2: {{recipe: r2ccl, ref: '{ref}'}}\n")
    ran = invoke_as_main("plan", str(path), "-t", str(CLOUDLAB))
    assert ran.exit_code == ExitCode.USAGE, ran.output
    assert "Traceback" not in ran.output
    located = [line for line in ran.output.splitlines() if "libraries.r2.ref:" in line]
    assert len(located) == 1 and located[0].startswith(f"{path}:5:"), ran.output
    assert "give a tag, branch or commit" in located[0]
    if ref.startswith("-"):
        assert "git would read it as an option" in located[0]


def test_a_recipe_default_ref_is_checked_alike() -> None:
    with pytest.raises(ValidationError, match="option"):
        GitSource(git="https://example.org/x.git", ref="-f")


@pytest.mark.parametrize(
    "ref", ["main", "v2.23.4-1", "f45cbcb", "feature/fast-path", "refs/tags/v1", "release_2.30"]
)
def test_names_git_takes_are_kept(tmp_path: Path, ref: str) -> None:
    path = tmp_path / "exp.yaml"
    path.write_text(BASE + f"libraries:\n  r2: {{recipe: r2ccl, ref: '{ref}'}}\n")
    plan = make_plan(load_inputs(path, CLOUDLAB))
    assert {step.ref for step in plan.setup if step.recipe == "r2ccl"} == {ref}


def test_two_refs_that_one_folder_name_would_spell_build_apart(tmp_path: Path) -> None:
    """Before: `feature/fast-path` and `feature_fast-path` shared src/r2ccl-feature_fast-path."""
    path = tmp_path / "exp.yaml"
    path.write_text(
        BASE + "libraries:\n"
        "  a: {recipe: r2ccl, ref: feature/fast-path}\n"
        "  b: {recipe: r2ccl, ref: feature_fast-path}\n"
        "  c: {recipe: r2ccl, ref: f45cbcb}\n"
    )
    plan = make_plan(load_inputs(path, CLOUDLAB))
    folders = {step.ref: step.directory for step in plan.setup if step.recipe == "r2ccl"}
    assert len(set(folders.values())) == 3, folders
    assert folders["f45cbcb"].endswith("/src/r2ccl-f45cbcb")  # a plain ref keeps its folder
    assert folders["feature_fast-path"].endswith("/src/r2ccl-feature_fast-path")
    slashed = Path(folders["feature/fast-path"]).name
    assert slashed.startswith("r2ccl-feature_fast-path-") and len(slashed) == 32
    benches = {s.directory for s in plan.setup if s.recipe == "nccl-tests"}
    assert len(benches) == 3  # each library's benchmark build is its own too


def test_every_ref_in_a_git_command_comes_after_end_of_options() -> None:
    clone, fetch = git_fetch_commands("https://example.org/r.git", "feature/x", "/w/src/r")
    assert clone.endswith("git clone --filter=blob:none -- https://example.org/r.git /w/src/r")
    assert fetch.count("feature/x") == 2
    for part in fetch.split("git -C")[1:]:
        if "feature/x" in part:
            assert part.index("--end-of-options") < part.index("feature/x"), part
    assert 'checkout --detach "$commit"' in fetch  # the checkout gets a commit id, never a ref
