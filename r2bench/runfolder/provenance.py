"""Provenance of a run: what code ran where, with which environment, and how to run it again.

`collect(...)` gathers the controller-side facts (r2bench version, git state of the r2bench
checkout, the job's environment with secrets dropped, the re-run command); the caller adds what
only the nodes know (CUDA, driver, NCCL and MPI versions, hostnames, build commits and flags).
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

import r2bench

SECRET_NAME_RE = re.compile(r"TOKEN|SECRET|PASSWORD|KEY|CREDENTIAL", re.IGNORECASE)
_GIT_TIMEOUT_S = 10


class GitState(BaseModel):
    """A git checkout: commit and whether it had uncommitted changes."""

    model_config = ConfigDict(frozen=True)

    commit: str | None = None
    dirty: bool | None = None
    describe: str | None = None
    path: str | None = None


class BuildInfo(BaseModel):
    """One built component (library under test or benchmark)."""

    model_config = ConfigDict(frozen=True)

    label: str | None = None
    recipe: str | None = None
    ref: str | None = None
    commit: str | None = None
    flags: list[str] = Field(default_factory=list)
    directory: str | None = None


class Provenance(BaseModel):
    """Everything needed to know what produced a run, and to produce it again."""

    model_config = ConfigDict(frozen=True)

    r2bench_version: str = r2bench.__version__
    r2bench_git: GitState | None = None
    library: BuildInfo | None = None
    benchmark: BuildInfo | None = None
    cuda_version: str | None = None
    driver_version: str | None = None
    nccl_version: str | None = None
    nccl_tests_version: str | None = None
    mpi_version: str | None = None
    hostnames: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict, description="secrets dropped")
    env_dropped: list[str] = Field(default_factory=list, description="names of dropped variables")
    launch_command: str | None = Field(default=None, description="the mpirun/srun line")
    rerun_command: str | None = Field(default=None, description="r2bench command to re-run")
    python: str = Field(default_factory=lambda: sys.version.split()[0])
    created_at: str = Field(default_factory=lambda: datetime.now(timezone.utc).isoformat())
    imported_from: str | None = None
    library_basis: str | None = Field(
        default=None,
        description="how the library is known: 'R2CC log lines', 'NCCL version x.y.z' (proven) "
        "or 'guess: ...'",
    )
    node_utc_offset_s: float = Field(
        default=0.0, description="offset of the nodes' local clock (nccl-tests -S stamps) to UTC"
    )
    notes: list[str] = Field(default_factory=list)


def redact_env(env: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """(kept, dropped names): variables whose NAME matches TOKEN|SECRET|PASSWORD|KEY|CREDENTIAL
    are dropped entirely (case-insensitive); the others are kept, sorted by name."""
    kept, dropped = {}, []
    for name in sorted(env):
        if SECRET_NAME_RE.search(name):
            dropped.append(name)
        else:
            kept[name] = str(env[name])
    return kept, dropped


def git_state(path: Path) -> GitState | None:
    """Commit and dirty state of the git checkout holding `path`; None when it is not one."""

    def git(*args: str) -> str | None:
        try:
            proc = subprocess.run(
                ["git", "-C", str(path), *args],
                capture_output=True,
                text=True,
                timeout=_GIT_TIMEOUT_S,
                check=False,
            )
        except (OSError, subprocess.SubprocessError):
            return None
        return proc.stdout.strip() if proc.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    if commit is None:
        return None
    status = git("status", "--porcelain", "--untracked-files=no")
    return GitState(
        commit=commit,
        dirty=None if status is None else bool(status),
        describe=git("describe", "--always", "--dirty", "--tags"),
        path=git("rev-parse", "--show-toplevel"),
    )


def r2bench_checkout() -> Path:
    """The folder of the r2bench package (inside its checkout for an editable install)."""
    return Path(r2bench.__file__).resolve().parent


def collect(
    env: Mapping[str, str],
    *,
    rerun_command: str | None = None,
    launch_command: str | None = None,
    library: BuildInfo | None = None,
    benchmark: BuildInfo | None = None,
    hostnames: list[str] | None = None,
    **versions: str | None,
) -> Provenance:
    """Controller-side provenance of a run. `env` is the job's full environment (secrets are
    dropped here); `versions` may name cuda_version, driver_version, nccl_version,
    nccl_tests_version and mpi_version."""
    kept, dropped = redact_env(env)
    return Provenance(
        r2bench_git=git_state(r2bench_checkout()),
        library=library,
        benchmark=benchmark,
        hostnames=sorted(set(hostnames or [])),
        env=kept,
        env_dropped=dropped,
        launch_command=launch_command,
        rerun_command=rerun_command,
        **{k: v for k, v in versions.items() if v is not None},
    )
