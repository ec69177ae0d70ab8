"""Warnings about the environment a run gives its library (pure).

A variable the library never reads is silently ignored by it: a misspelt failover timeout, or
one without its NCCL_ prefix, leaves R-2CCL on its derived 32 s timeout, R2CC_* variables given to
stock NCCL do nothing, NCCL ignores a one-character NCCL_SOCKET_IFNAME, and
R2CC_DISCONNECTED_HCA is injected by R-2CCL's IB transport only. None of these stops a sweep,
but each one changes what the figures mean, so `plan` says so, located at the setting.

What R-2CCL reads depends on its revision: the library entry's ref (or its recipe's) selects the
table of `r2bench.config.r2ccl` (`revision_for`), so a variable the pinned commit ignores but
upstream's main reads (R2CC_FAILED_HCA, R2CC_AR_*) is a warning at the one and quiet at the other.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from r2bench.config.errors import ConfigIssue, FieldPath
from r2bench.config.experiment import Component, Experiment
from r2bench.config.ncclenv import NCCL_VARIABLES
from r2bench.config.r2ccl import (
    AR_STAGE2_CHUNKS_MAX,
    DISCONNECTED_STEP_DEFAULT,
    FAILOVER_TIMEOUT_VAR,
    IGNORED_TIMEOUT_VAR,
    REVISIONS,
    Revision,
    RevisionChoice,
    arms_software_fault,
    is_r2cc_variable,
    revision_for,
)
from r2bench.config.recipe import GitSource, Recipe, RecipeKind
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
    revision: Revision | None = None
    """R-2CCL's semantics at the library's ref (None: not R-2CCL)."""


def is_r2ccl_recipe(recipe: Recipe) -> bool:
    """Whether `recipe` builds R-2CCL itself (its `r2ccl` recipe, or a copy of it that clones
    the R-2CCL repository), whose semantics depend on the revision."""
    if recipe.kind is not RecipeKind.LIBRARY:
        return False
    source = recipe.source
    url = source.git.lower() if isinstance(source, GitSource) else ""
    return recipe.name == "r2ccl" or "r-2ccl" in url


def library_revision(recipe: Recipe, component: Component) -> RevisionChoice | None:
    """The R-2CCL semantics table a library entry runs under (None: not R-2CCL)."""
    if not is_r2ccl_recipe(recipe):
        return None
    default = recipe.source.ref if isinstance(recipe.source, GitSource) else None
    return revision_for(component.ref or default)


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
        choice = library_revision(recipe, library)
        revision = choice.revision if choice else None
        for env, base in layers:
            for name, value in env.items():
                origin = (*base, name)
                if base == ("sweep",):  # a dimension: where its value was written
                    origin = point.origins.get(name, origin)
                setting = _Setting(
                    label, recipe, name, str(value), origin, faulted, whole, revision
                )
                seen.setdefault((label, name, str(value), faulted), setting)
    return list(seen.values())


def _reads(recipe: Recipe, name: str, revision: Revision | None = None) -> bool:
    """Whether the library of `recipe` reads `name` (NCCL variables: every NCCL-based library;
    R-2CCL's own: those of its revision's table)."""
    if revision is not None and is_r2cc_variable(name):
        return revision.reads(name)
    return name in recipe.env_knobs or (not is_r2cc_variable(name) and name in NCCL_VARIABLES)


def _known_names(setting: _Setting) -> list[str]:
    """The names a misspelling of `setting.name` is compared with."""
    own = list(setting.revision.variables) if setting.revision else list(setting.recipe.env_knobs)
    return [*own, *(NCCL_VARIABLES if not is_r2cc_variable(setting.name) else ())]


def _unread(setting: _Setting) -> tuple[str, str] | None:
    recipe, name, revision = setting.recipe, setting.name, setting.revision
    if recipe.kind is not RecipeKind.LIBRARY or _reads(recipe, name, revision):
        return None
    where = f"library '{setting.library}' ({recipe.name})"
    if revision is not None:
        where = f"library '{setting.library}' ({recipe.name} at {revision.key})"
    timeout_read = revision.reads(FAILOVER_TIMEOUT_VAR) if revision else None
    if name == IGNORED_TIMEOUT_VAR and (timeout_read or FAILOVER_TIMEOUT_VAR in recipe.env_knobs):
        stays = revision.timeout_summary() if revision else "derived (32 s)"
        return (
            f"warning: {where} never reads {name}: R-2CCL declares it with NCCL_PARAM, which "
            f"adds the NCCL_ prefix, so without it the failover timeout stays at its default: "
            f"{stays}",
            f"did you mean {FAILOVER_TIMEOUT_VAR}?",
        )
    if revision is not None and is_r2cc_variable(name):
        return _unread_at_revision(setting, revision, where)
    if is_r2cc_variable(name) and not any(is_r2cc_variable(k) for k in recipe.env_knobs):
        return (f"warning: {where} reads no R2CC variable: {name} does nothing in its runs", "")
    if not (is_r2cc_variable(name) or name.startswith("NCCL_")):
        return None
    close = difflib.get_close_matches(name, _known_names(setting), n=1, cutoff=0.75)
    hint = f"did you mean {close[0]}?" if close else ""
    return (f"warning: {where} never reads {name}", hint)


def _unread_at_revision(setting: _Setting, revision: Revision, where: str) -> tuple[str, str]:
    """An R2CC variable this revision does not read: say which revision does, or suggest."""
    name = setting.name
    readers = [r.key for r in REVISIONS if r.reads(name)]
    if readers:
        why = f"it is read from {', '.join(readers)} on"
        if name.startswith("R2CC_FAILED_"):
            why += f"; at {revision.key} {revision.declared_failure}"
        return (
            f"warning: {where} never reads {name}: {why}",
            f"set the library's ref to a revision that reads it, or drop {name}",
        )
    close = difflib.get_close_matches(name, _known_names(setting), n=1, cutoff=0.75)
    return (f"warning: {where} never reads {name}", f"did you mean {close[0]}?" if close else "")


def _revision_semantics(setting: _Setting) -> tuple[str, str] | None:
    """What a value means at the library's revision: a mode that returns wrong data, a chunk
    count out of range."""
    revision, name, value = setting.revision, setting.name, setting.value.strip()
    if revision is None:
        return None
    if name == "R2CC_MODE" and value.isdigit() and int(value) in revision.wrong_data_modes:
        return (
            f"warning: library '{setting.library}' ({setting.recipe.name} at {revision.key}): "
            f"{revision.wrong_data_modes[int(value)]}; its busbw is not that of a correct "
            "AllReduce",
            "run R2CC_MODE 3 on a newer ref (libraries.<name>.ref: main), or leave it out",
        )
    chunks_ok = value.isdigit() and 1 <= int(value) <= AR_STAGE2_CHUNKS_MAX
    if name == "R2CC_AR_STAGE2_CHUNKS" and revision.reads(name) and not chunks_ok:
        return (
            f"warning: R2CC_AR_STAGE2_CHUNKS={value} is outside 1-{AR_STAGE2_CHUNKS_MAX}: "
            "the library does not run that K",
            f"pick K in 1-{AR_STAGE2_CHUNKS_MAX}",
        )
    return None


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
    """NCCL at INFO logging to stdout: its buffered lines land inside nccl-tests' result rows.

    Only a library the benchmark loads (one with a `lib_dir`: libnccl.so shares the benchmark's
    stdout) does that. The emulated libraries have none: the emulated benchmark is one program
    that writes its NCCL-style log on stderr and its result rows whole on stdout, where the
    first-result trigger reads them."""
    loaded_by_benchmark = setting.recipe.lib_dir is not None
    if not loaded_by_benchmark or setting.value.strip().upper() not in ("INFO", "TRACE"):
        return None
    if "NCCL_DEBUG_FILE" in setting.env:
        return None
    return (
        f"warning: NCCL_DEBUG={setting.value} with no NCCL_DEBUG_FILE: NCCL writes its log to "
        "stdout in 4 KiB blocks, between the pieces of nccl-tests' result rows, so under a busy "
        "log rows break apart (a fault triggered on the first result never fires)",
        "set NCCL_DEBUG_FILE: /dev/stderr (NCCL then writes each line whole, away from the rows)",
    )


def _net_plugin(setting: _Setting) -> tuple[str, str] | None:
    """A network plugin takes the library's network transport over: R-2CCL's failover lives
    in its built-in IB transport (net_ib.cc), so its runs would measure the plugin."""
    if setting.revision is None or setting.value.strip().lower() in ("", "none"):
        return None
    return (
        f"warning: NCCL_NET_PLUGIN={setting.value} in library '{setting.library}': a network "
        "plugin replaces the library's own network transport, where R-2CCL's failover lives "
        "(its IB transport): these runs measure the plugin, not R-2CCL's failover",
        "leave NCCL_NET_PLUGIN unset (or none) for R-2CCL's runs",
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


def _revision_notes(
    experiment: Experiment, recipes: Mapping[str, Recipe], doc: SourceDoc
) -> list[ConfigIssue]:
    """One note per R-2CCL ref no table names, at the first library entry that uses it."""
    notes: dict[str, ConfigIssue] = {}
    for label, library in experiment.libraries.items():
        recipe = recipes.get(library.recipe)
        choice = library_revision(recipe, library) if recipe else None
        if choice is None or choice.note is None or choice.note in notes:
            continue
        where: FieldPath = ("libraries", label, "ref" if library.ref else "recipe")
        notes[choice.note] = doc.issue(where, choice.note)
    return list(notes.values())


def _per_node_settings(
    experiment: Experiment, recipes: Mapping[str, Recipe], testbed: Testbed, testbed_doc: SourceDoc
) -> list[ConfigIssue]:
    """R-2CCL variables a testbed sets per node: the library needs one value on every rank."""
    revisions = [
        choice.revision
        for library in experiment.libraries.values()
        if (recipe := recipes.get(library.recipe)) and (choice := library_revision(recipe, library))
    ]
    if not revisions:
        return []
    issues = []
    for index, node in enumerate(testbed.nodes):
        for name in node.env:
            variable = next((r.variables[name] for r in revisions if name in r.variables), None)
            if variable is None or not variable.same_on_all_ranks:
                continue
            issues.append(
                testbed_doc.issue(
                    ("nodes", index, "env", name),
                    f"warning: node '{node.name}' sets {name} for its own ranks: R-2CCL's "
                    "variables must agree on every rank (f45cbcb mixes them silently, newer "
                    "revisions adopt rank 0's value with a WARN)",
                    "set it in the experiment's env or a library's env instead",
                    at_key=True,
                )
            )
    return issues


def _timer_outlasts_the_run(
    experiment: Experiment, points: Iterable[Point], recipes: Mapping[str, Recipe], doc: SourceDoc
) -> list[ConfigIssue]:
    """R-2CCL runs whose failover timer (the revision's default where unset: 32 s derived at
    f45cbcb) cannot expire between a fault and the run's deadline: no failover can happen."""
    issues: dict[tuple[str, str], ConfigIssue] = {}
    for point in points:
        scenario = experiment.scenario(point.values["scenario"])
        label = point.values["library"]
        library = experiment.libraries[label]
        recipe = recipes.get(library.recipe)
        choice = library_revision(recipe, library) if recipe else None
        if scenario is None or choice is None:
            continue
        env = {**experiment.env, **library.env, **point.env()}
        timer = choice.revision.failover_timeout(env)
        first = min(f.trigger.after_s for f in scenario.faults)
        left = experiment.deadline_s - first
        if timer.ms / 1000 < left or (label, scenario.name) in issues:
            continue
        origin: FieldPath = ("libraries", label)
        if FAILOVER_TIMEOUT_VAR in point.origins:
            origin = point.origins[FAILOVER_TIMEOUT_VAR]
        elif FAILOVER_TIMEOUT_VAR in library.env:
            origin = ("libraries", label, "env", FAILOVER_TIMEOUT_VAR)
        elif FAILOVER_TIMEOUT_VAR in experiment.env:
            origin = ("env", FAILOVER_TIMEOUT_VAR)
        waits = (
            "never fails over"
            if timer.source == "off"
            else (f"waits {timer.ms / 1000:g} s before it fails over")
        )
        issues[(label, scenario.name)] = doc.issue(
            origin,
            f"warning: library '{label}' ({recipe.name if recipe else '?'} at "
            f"{choice.revision.key}) {waits} ({timer.basis}), but scenario '{scenario.name}' leaves {left:g} s between its "
            "first fault and the deadline: no failover can happen in these runs",
            f"set {FAILOVER_TIMEOUT_VAR} well below {left * 1000:g} ms, or raise deadline_s",
        )
    return list(issues.values())


def check_environment(
    experiment: Experiment,
    points: list[Point],
    recipes: Mapping[str, Recipe],
    testbed: Testbed,
    doc: SourceDoc,
    testbed_doc: SourceDoc | None = None,
) -> list[ConfigIssue]:
    """Located warnings about variables the runs' libraries ignore or that skew the figures,
    read by the semantics of each library's revision (with `testbed_doc`, also the testbed's
    per-node settings), and one note per R-2CCL ref that no table names."""
    issues: dict[tuple[FieldPath, str], ConfigIssue] = {}
    for issue in _revision_notes(experiment, recipes, doc):
        issues[(issue.path, issue.message)] = issue
    for issue in _timer_outlasts_the_run(experiment, points, recipes, doc):
        issues[(issue.path, issue.message)] = issue
    if testbed_doc is not None:
        for issue in _per_node_settings(experiment, recipes, testbed, testbed_doc):
            issues[(issue.path, issue.message)] = issue
    for setting in _settings(experiment, points, recipes):
        env = setting.env
        found = _unread(setting)
        found = found or _revision_semantics(setting)
        if setting.name == "NCCL_DEBUG_SUBSYS" and _reads(
            setting.recipe, "R2CC_MODE", setting.revision
        ):
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
        if setting.name == "NCCL_NET_PLUGIN":
            found = found or _net_plugin(setting)
        if setting.name == "R2CC_DISCONNECTED_HCA" and _reads(
            setting.recipe, setting.name, setting.revision
        ):
            found = found or _disconnected_hca(setting, testbed, env)
        if found is not None:
            message, hint = found
            issue = doc.issue(setting.origin, message, hint, at_key=True)
            issues.setdefault((setting.origin, message), issue)
    return list(issues.values())
