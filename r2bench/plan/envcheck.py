"""Warnings about the environment a run gives its library (pure).

A variable the library never reads is silently ignored by it: a misspelt failover timeout, or
one without its NCCL_ prefix, leaves R-2CCL on its derived 32 s timeout, R2CC_* variables given to
stock NCCL do nothing, NCCL ignores a one-character NCCL_SOCKET_IFNAME, and
R2CC_DISCONNECTED_HCA is injected by R-2CCL's IB transport only. None of these stops a sweep,
but each one changes what the figures mean, so `plan` says so, located at the setting.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from r2bench.config.errors import ConfigIssue, FieldPath
from r2bench.config.experiment import Experiment
from r2bench.config.ncclenv import NCCL_VARIABLES
from r2bench.config.r2ccl import (
    DISCONNECTED_STEP_DEFAULT,
    FAILOVER_TIMEOUT_VAR,
    IGNORED_TIMEOUT_VAR,
    arms_software_fault,
    is_r2cc_variable,
)
from r2bench.config.recipe import Recipe, RecipeKind
from r2bench.config.source import SourceDoc
from r2bench.config.testbed import NicKind, Testbed
from r2bench.plan.sweep import Point


@dataclass(frozen=True)
class _Setting:
    """One variable as a run of one library sees it, and where the experiment sets it."""

    library: str
    recipe: Recipe
    name: str
    value: str
    origin: FieldPath
    faulted: bool
    env: Mapping[str, str]
    """The whole environment of the first run seen with this setting."""


def _settings(
    experiment: Experiment, points: Iterable[Point], recipes: Mapping[str, Recipe]
) -> list[_Setting]:
    """Every (library, variable) a run gets, once, with the first place that sets it."""
    seen: dict[tuple[str, str, str, bool], _Setting] = {}
    for point in points:
        label = point.values["library"]
        library = experiment.libraries[label]
        recipe = recipes.get(library.recipe)
        scenario = experiment.scenario(point.values["scenario"])
        faulted = bool(scenario and scenario.faults)
        if recipe is None:
            continue
        layers: list[tuple[Mapping[str, str], FieldPath]] = [
            (experiment.env, ("env",)),
            (library.env, ("libraries", label, "env")),
            (point.env(), ("sweep",)),
        ]
        whole = {k: str(v) for env, _ in layers for k, v in env.items()}
        for env, base in layers:
            for name, value in env.items():
                origin = (*base, name)
                if base == ("sweep",):  # a dimension: where its value was written
                    origin = point.origins.get(name, origin)
                setting = _Setting(label, recipe, name, str(value), origin, faulted, whole)
                seen.setdefault((label, name, str(value), faulted), setting)
    return list(seen.values())


def _reads(recipe: Recipe, name: str) -> bool:
    """Whether the library of `recipe` reads `name` (NCCL variables: every NCCL-based library)."""
    return name in recipe.env_knobs or (not is_r2cc_variable(name) and name in NCCL_VARIABLES)


def _unread(setting: _Setting) -> tuple[str, str] | None:
    recipe, name = setting.recipe, setting.name
    if recipe.kind is not RecipeKind.LIBRARY or _reads(recipe, name):
        return None
    where = f"library '{setting.library}' ({recipe.name})"
    if name == IGNORED_TIMEOUT_VAR and FAILOVER_TIMEOUT_VAR in recipe.env_knobs:
        return (
            f"warning: {where} never reads {name}: R-2CCL declares it with NCCL_PARAM, which "
            f"adds the NCCL_ prefix, so without it the failover timeout stays derived (32 s)",
            f"did you mean {FAILOVER_TIMEOUT_VAR}?",
        )
    if is_r2cc_variable(name) and not any(is_r2cc_variable(k) for k in recipe.env_knobs):
        return (f"warning: {where} reads no R2CC variable: {name} does nothing in its runs", "")
    if not (is_r2cc_variable(name) or name.startswith("NCCL_")):
        return None
    known = [*recipe.env_knobs, *(NCCL_VARIABLES if not is_r2cc_variable(name) else ())]
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.75)
    hint = f"did you mean {close[0]}?" if close else ""
    return (f"warning: {where} never reads {name}", hint)


def _logging_cost(setting: _Setting, debug: str) -> tuple[str, str] | None:
    subsystems = {s.strip().lstrip("^").upper() for s in setting.value.split(",")}
    if setting.faulted or debug.upper() not in ("INFO", "TRACE"):
        return None
    if not subsystems & {"R2CC", "ALL"} or setting.value.strip().startswith("^"):
        return None
    return (
        f"warning: R2CC logging in runs without a fault (library '{setting.library}'): at "
        f"NCCL_DEBUG={debug} R-2CCL logs every network send and test call, which costs "
        "bandwidth and writes gigabytes, so these runs measure the logging",
        "keep R2CC in NCCL_DEBUG_SUBSYS for faulted runs only (zip it with scenario)",
    )


def _log_on_stdout(setting: _Setting) -> tuple[str, str] | None:
    """NCCL at INFO logging to stdout: its buffered lines land inside nccl-tests' result rows."""
    real_library = setting.recipe.home is not None  # the emulator logs to stderr by itself
    if not real_library or setting.value.strip().upper() not in ("INFO", "TRACE"):
        return None
    if "NCCL_DEBUG_FILE" in setting.env:
        return None
    return (
        f"warning: NCCL_DEBUG={setting.value} with no NCCL_DEBUG_FILE: NCCL writes its log to "
        "stdout in 4 KiB blocks, between the pieces of nccl-tests' result rows, so under a busy "
        "log rows break apart (a fault triggered on the first result never fires)",
        "set NCCL_DEBUG_FILE: /dev/stderr (NCCL then writes each line whole, away from the rows)",
    )


def _socket_transport(testbed: Testbed, env: Mapping[str, str]) -> bool:
    """Whether the library can only talk NET/Socket: IB disabled, or no RDMA NIC at all."""
    if str(env.get("NCCL_IB_DISABLE", "0")).strip() == "1":
        return True
    rdma = (NicKind.IB, NicKind.ROCE)
    return not any(nic.kind in rdma for node in testbed.nodes for nic in node.data_nics)


def _disconnected_hca(
    setting: _Setting, testbed: Testbed, env: Mapping[str, str]
) -> tuple[str, str] | None:
    if not arms_software_fault(setting.value):
        return None
    if _socket_transport(testbed, env):
        return (
            f"warning: {setting.name}={setting.value} does nothing here: R-2CCL injects it in "
            "its IB transport only, and these runs talk NET/Socket (no IB/RoCE NIC, or "
            "NCCL_IB_DISABLE=1); such runs are recorded as `fault_not_injected`",
            "fault a NIC instead (link_down, bandwidth_cap)",
        )
    if "R2CC_DISCONNECTED_STEP" not in env:
        return (
            f"warning: {setting.name} fires at step {DISCONNECTED_STEP_DEFAULT} "
            "(R2CC_DISCONNECTED_STEP unset), a count that grows across collectives: it lands in "
            "nccl-tests' warm-up, before any timed iteration",
            "set R2CC_DISCONNECTED_STEP past the warm-up's steps",
        )
    return None


def check_environment(
    experiment: Experiment,
    points: list[Point],
    recipes: Mapping[str, Recipe],
    testbed: Testbed,
    doc: SourceDoc,
) -> list[ConfigIssue]:
    """Located warnings about variables the runs' libraries ignore or that skew the figures."""
    issues: dict[tuple[FieldPath, str], ConfigIssue] = {}
    for setting in _settings(experiment, points, recipes):
        env = setting.env
        found = _unread(setting)
        if setting.name == "NCCL_DEBUG_SUBSYS" and _reads(setting.recipe, "R2CC_MODE"):
            found = found or _logging_cost(setting, str(env.get("NCCL_DEBUG", "")))
        if setting.name == "NCCL_DEBUG":
            found = found or _log_on_stdout(setting)
        if setting.name == "NCCL_SOCKET_IFNAME" and len(setting.value.strip()) <= 1:
            found = (
                f"warning: NCCL ignores NCCL_SOCKET_IFNAME={setting.value!r} (it wants more than "
                "one character) and picks another interface: faults on the NICs you meant hit "
                "nothing the job uses",
                "name the interfaces, e.g. nic0,nic1,nic2,nic3",
            )
        if setting.name == "R2CC_DISCONNECTED_HCA" and _reads(setting.recipe, setting.name):
            found = found or _disconnected_hca(setting, testbed, env)
        if found is not None:
            message, hint = found
            issue = doc.issue(setting.origin, message, hint, at_key=True)
            issues.setdefault((setting.origin, message), issue)
    return list(issues.values())
