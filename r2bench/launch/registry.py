"""Which launcher a testbed's `launcher.kind` names (pure).

A new launcher is one module defining its `LauncherSpec` plus its line here (and its value in
`LauncherKind`); docs/launchers.md walks through it.
"""

from __future__ import annotations

from r2bench.config.testbed import LauncherKind
from r2bench.launch.base import CrashMessage, LauncherSpec
from r2bench.launch.local import LOCAL
from r2bench.launch.mpirun import MPIRUN
from r2bench.launch.srun import SRUN

LAUNCHERS: dict[LauncherKind, LauncherSpec] = {spec.kind: spec for spec in (MPIRUN, SRUN, LOCAL)}
"""Every launcher, in the order their crash messages are tried on a log line."""


def launcher_for(kind: LauncherKind) -> LauncherSpec:
    """The launcher of a testbed's `launcher.kind`."""
    return LAUNCHERS[kind]


def crash_messages() -> tuple[CrashMessage, ...]:
    """Every launcher's crash messages: a log does not say which launcher wrote it."""
    return tuple(message for spec in LAUNCHERS.values() for message in spec.crash_messages)
