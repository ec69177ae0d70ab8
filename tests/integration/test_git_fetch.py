"""The fetch commands plan gives a git recipe, run by bash against a real repository (a local
origin): each ref checks out the commit it names, and a ref that looks like an option is never
one (its pure tests: tests/unit/test_git_refs.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from r2bench.plan.build import git_fetch_commands

GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.org",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.org",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_CONFIG_NOSYSTEM": "1",
    "PATH": "/usr/bin:/bin",
}


def _git(folder: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(folder), *args], capture_output=True, text=True, env=GIT_ENV, check=True
    )
    return done.stdout.strip()


@pytest.fixture
def origin(tmp_path: Path) -> dict[str, str]:
    """A repository with a default branch, a tag, a branch named with a slash and one named
    like it with an underscore; returns name -> commit."""
    repo = tmp_path / "origin"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    commits = {}
    for name in ("main", "v1", "feature/fast-path", "feature_fast-path"):
        _git(repo, "commit", "-q", "--allow-empty", "-m", name)
        commits[name] = _git(repo, "rev-parse", "HEAD")
    _git(repo, "tag", "v1", commits["v1"])
    _git(repo, "branch", "feature/fast-path", commits["feature/fast-path"])
    _git(repo, "branch", "feature_fast-path", commits["feature_fast-path"])
    _git(repo, "reset", "-q", "--hard", commits["main"])
    return {"url": str(repo), **commits}


def _fetch(url: str, ref: str, folder: Path) -> subprocess.CompletedProcess[str]:
    script = " && ".join(git_fetch_commands(url, ref, str(folder)))
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=GIT_ENV)


@pytest.mark.parametrize("ref", ["main", "v1", "feature/fast-path", "feature_fast-path"])
def test_each_ref_checks_out_its_own_commit(
    origin: dict[str, str], tmp_path: Path, ref: str
) -> None:
    done = _fetch(origin["url"], ref, tmp_path / "src")
    assert done.returncode == 0, done.stderr
    assert _git(tmp_path / "src", "rev-parse", "HEAD") == origin[ref]


def test_a_commit_id_checks_out(origin: dict[str, str], tmp_path: Path) -> None:
    done = _fetch(origin["url"], origin["v1"][:10], tmp_path / "src")
    assert done.returncode == 0, done.stderr
    assert _git(tmp_path / "src", "rev-parse", "HEAD") == origin["v1"]


@pytest.mark.parametrize("ref", ["-f", "--orphan=x", "-"])
def test_a_ref_like_an_option_fails_and_checks_out_nothing_else(
    origin: dict[str, str], tmp_path: Path, ref: str
) -> None:
    """Load refuses these; were one to get past it, git still reads it as a revision: the step
    fails (before: `-f` checked out the default branch and exited 0)."""
    folder = tmp_path / "src"
    first = _fetch(origin["url"], "v1", folder)
    assert first.returncode == 0, first.stderr
    done = _fetch(origin["url"], ref, folder)
    assert done.returncode != 0
    assert _git(folder, "rev-parse", "HEAD") == origin["v1"]
