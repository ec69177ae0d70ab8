"""Checks that need both files: faults against the testbed, modes against the library (pure)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping

from r2bench.config.errors import ConfigIssue, FieldPath, did_you_mean, name_list
from r2bench.config.experiment import LIBRARY_STRATEGIES, Experiment, FaultSpec, RecoveryStrategy
from r2bench.config.recipe import Recipe, RecipeKind
from r2bench.config.source import SourceDoc
from r2bench.config.testbed import Nic, Node, Testbed, TestbedKind
from r2bench.faults.catalogue import FAULT_KINDS, FaultKind, check_params, link_layer_refusal
from r2bench.faults.interlock import interface_refusal
from r2bench.plan.sweep import Point

MODE_VARIABLE = "R2CC_MODE"
JOB_STRATEGIES = ("restart", "shrink")
"""Strategies the training job carries out itself (a benchmark recipe's `job_recovery`)."""


def _suggest(value: str, known: Iterable[str]) -> str:
    options = sorted(known)
    return did_you_mean(value, options, "known: " + name_list(options) if options else "")


def check_recipes(
    experiment: Experiment, recipes: Mapping[str, Recipe], doc: SourceDoc
) -> list[ConfigIssue]:
    """Every component names an existing recipe of the right kind."""
    issues = []
    wanted: list[tuple[FieldPath, str, RecipeKind]] = [
        (("libraries", label, "recipe"), c.recipe, RecipeKind.LIBRARY)
        for label, c in experiment.libraries.items()
    ]
    wanted.append((("benchmark", "recipe"), experiment.benchmark.recipe, RecipeKind.BENCHMARK))
    for path, name, kind in wanted:
        recipe = recipes.get(name)
        if recipe is None:
            issues.append(
                doc.issue(path, f"no recipe '{name}' in plugin/", _suggest(name, recipes))
            )
        elif recipe.kind is not kind:
            issues.append(
                doc.issue(
                    path, f"recipe '{name}' is a {recipe.kind.value}, expected a {kind.value}"
                )
            )
    bench = recipes.get(experiment.benchmark.recipe)
    if bench is not None:
        issues += _check_workload_fields(experiment, bench, doc)
    if bench is not None and bench.collectives:
        for i, collective in enumerate(experiment.collectives):
            if collective not in bench.collectives:
                hint = _suggest(collective, bench.collectives)
                issues.append(
                    doc.issue(
                        ("collectives", i), f"{bench.name} has no collective '{collective}'", hint
                    )
                )
    return issues


def _check_workload_fields(
    experiment: Experiment, bench: Recipe, doc: SourceDoc
) -> list[ConfigIssue]:
    """`training:` and `since: update` triggers only with a training benchmark."""
    if bench.workload == "training":
        return []
    issues = []
    why = f"{bench.name} is a collective benchmark (nccl-tests' flags), not a training job"
    if experiment.training is not None:
        hint = "use a training benchmark (train-emulated, train-torch) or drop `training:`"
        issues.append(doc.issue(("training",), f"`training:` is given but {why}", hint))
    if experiment.recovery is not None:
        hint = "use a training benchmark (train-emulated) or drop `recovery:`"
        message = f"`recovery:` is a training job's strategy, but {why}"
        issues.append(doc.issue(("recovery",), message, hint, at_key=True))
    for s, scenario in enumerate(experiment.scenarios):
        for f, fault in enumerate(scenario.faults):
            if fault.trigger.update is not None:
                issues.append(
                    doc.issue(
                        ("scenarios", s, "faults", f, "trigger", "since"),
                        f"`since: update` counts a training job's updates, but {why}",
                        "use since: first_result or since: launch",
                    )
                )
    return issues


def check_modes(
    experiment: Experiment, points: list[Point], recipes: Mapping[str, Recipe], doc: SourceDoc
) -> list[ConfigIssue]:
    """Each R2CC_MODE value must be one the run's library knows."""
    issues: dict[FieldPath, ConfigIssue] = {}
    for point in points:
        library = experiment.libraries[point.values["library"]]
        mode = point.values.get(
            MODE_VARIABLE, library.env.get(MODE_VARIABLE, experiment.env.get(MODE_VARIABLE))
        )
        recipe = recipes.get(library.recipe)
        if mode is None or recipe is None:
            continue
        if _mode_known(mode, recipe):
            continue
        label = point.values["library"]
        where = ("libraries", label, "env") if MODE_VARIABLE in library.env else ("env",)
        origin = point.origins.get(MODE_VARIABLE, (*where, MODE_VARIABLE))
        if recipe.modes:
            message = f"library '{label}' ({recipe.name}) has no R2CC_MODE {mode}"
            hint = "known modes: " + ", ".join(map(str, recipe.modes))
        else:
            message = f"library '{label}' ({recipe.name}) does not read R2CC_MODE (found {mode})"
            hint = f"exclude it: {{library: {label}, R2CC_MODE: [...]}}"
        issues.setdefault(origin, doc.issue(origin, message, hint))
    return list(issues.values())


def check_recovery(
    experiment: Experiment, points: list[Point], recipes: Mapping[str, Recipe], doc: SourceDoc
) -> list[ConfigIssue]:
    """A strategy the job carries out (restart, shrink) only with a benchmark whose job does it;
    one that needs the library's help (in_library, shrink) only on a library whose recipe
    offers it: R-2CCL has no ncclCommShrink, stock NCCL no failover."""
    issues: dict[tuple[str, str], ConfigIssue] = {}
    bench = recipes.get(experiment.benchmark.recipe)
    for point in points:
        strategy = point.values.get("recovery")
        label = point.values["library"]
        recipe = recipes.get(experiment.libraries[label].recipe)
        if strategy is None or recipe is None:
            continue
        origin = point.origins.get("recovery", ("recovery", "strategies"))
        if bench is not None and strategy in JOB_STRATEGIES and strategy not in bench.job_recovery:
            does = ", ".join(bench.job_recovery) or "none"
            message = f"benchmark {bench.name} does not {strategy} (its job carries out: {does})"
            hint = f"exclude it: {{recovery: {strategy}}}, or use a job that does"
            issues.setdefault(("", strategy), doc.issue(origin, message, hint))
            continue
        if RecoveryStrategy(strategy) not in LIBRARY_STRATEGIES or strategy in recipe.recovery:
            continue
        offers = ", ".join(recipe.recovery) or "none that needs the library"
        message = f"library '{label}' ({recipe.name}) offers no {strategy} recovery ({offers})"
        hint = f"exclude it: {{library: {label}, recovery: {strategy}}}"
        issues.setdefault((label, strategy), doc.issue(origin, message, hint))
    return list(issues.values())


def _mode_known(mode: str, recipe: Recipe) -> bool:
    try:
        return int(mode) in recipe.modes
    except ValueError:
        return False


def select_nodes(
    experiment: Experiment, testbed: Testbed, doc: SourceDoc
) -> tuple[list[Node], list[ConfigIssue]]:
    """The testbed nodes this experiment runs on."""
    wanted = experiment.nodes
    compute = testbed.compute_nodes  # a SmartNIC runs faults, never a rank
    if wanted is None:
        return list(compute), []
    if isinstance(wanted, int):
        if not 1 <= wanted <= len(compute):
            return [], [
                doc.issue(
                    ("nodes",),
                    f"asks for {wanted} nodes; testbed '{testbed.name}' has {len(compute)} "
                    "that run ranks",
                )
            ]
        return list(compute[:wanted]), []
    nodes: list[Node] = []
    issues = []
    for i, name in enumerate(wanted):
        node = testbed.node(name)
        if node is not None and node in nodes:
            issues.append(
                doc.issue(
                    ("nodes", i),
                    f"node '{name}' appears twice: a run would place two nodes' ranks on one host",
                    "list each node once",
                )
            )
        elif node is not None and not node.runs_ranks:
            issues.append(
                doc.issue(
                    ("nodes", i),
                    f"node '{name}' is a {node.role.value} (of '{node.host_of}'): it runs no rank",
                    "list compute nodes only; a fault reaches the SmartNIC through its `executor`",
                )
            )
        elif node is None:
            known = [n.name for n in testbed.nodes]
            issues.append(
                doc.issue(
                    ("nodes", i),
                    f"no node '{name}' in testbed '{testbed.name}'",
                    _suggest(name, known),
                )
            )
        else:
            nodes.append(node)
    return nodes, issues


def ranks_per_node(
    experiment: Experiment, nodes: list[Node], doc: SourceDoc
) -> tuple[int, list[ConfigIssue]]:
    """One rank per GPU by default; CPU-only nodes (virtual testbed) run one rank each."""
    gpus = min((node.gpus for node in nodes), default=0)
    wanted = experiment.gpus_per_node
    if wanted is None:
        return max(gpus, 1), []
    if gpus and wanted > gpus:
        return wanted, [
            doc.issue(
                ("gpus_per_node",), f"asks for {wanted} GPUs per node; the smallest node has {gpus}"
            )
        ]
    return wanted, []


def check_faults(
    experiment: Experiment, testbed: Testbed, nodes: list[Node], doc: SourceDoc
) -> list[ConfigIssue]:
    """Faults target real, non-management NICs of nodes in the run, inside the deadline."""
    issues: list[ConfigIssue] = []
    names = {node.name for node in nodes}
    for s, scenario in enumerate(experiment.scenarios):
        for f, fault in enumerate(scenario.faults):
            base: FieldPath = ("scenarios", s, "faults", f)
            issues += check_fault(
                fault, base, testbed, names, doc, experiment.deadline_s, experiment.env
            )
        issues += _check_overlaps(scenario.faults, ("scenarios", s, "faults"), testbed, doc)
    return issues


def check_fault(
    fault: FaultSpec,
    base: FieldPath,
    testbed: Testbed,
    names: set[str],
    doc: SourceDoc,
    deadline_s: float | None,
    env: Mapping[str, str],
) -> list[ConfigIssue]:
    """One fault (at `base` in `doc`) against the testbed: its node is in the run, its NIC
    exists and is not the management path under any name, its kind fits, its timing fits in
    the deadline (when known)."""
    kind = FAULT_KINDS.get(fault.kind)
    issues = []
    if kind is None:
        issues.append(
            doc.issue(
                (*base, "kind"),
                f"unknown fault kind '{fault.kind}'",
                _suggest(fault.kind, FAULT_KINDS),
            )
        )
    if deadline_s is not None:
        issues += _check_timing(fault, base, deadline_s, doc)
    for param, problem in check_params(fault.params):
        issues.append(doc.issue((*base, "params", param), problem))
    node = testbed.node(fault.node)
    if node is not None and not node.runs_ranks:
        return [
            *issues,
            doc.issue(
                (*base, "node"),
                f"node '{fault.node}' is a {node.role.value}: a fault names the compute node "
                "whose NIC it affects",
                f"node: {node.host_of}, executor: {node.name}",
            ),
        ]
    if node is None or fault.node not in names:
        where = f"testbed '{testbed.name}'" if node is None else "the nodes this experiment runs on"
        return [
            *issues,
            doc.issue(
                (*base, "node"),
                f"node '{fault.node}' is not in {where}",
                _suggest(fault.node, names),
            ),
        ]
    issues += _check_executor(kind, fault, base, testbed, doc)
    if kind is not None and not kind.targets_nic:
        return issues + _check_process_fault(kind, fault, base, doc)
    if fault.nic is None:
        return [
            *issues,
            doc.issue(
                (*base, "nic"),
                f"a {fault.kind} fault needs a nic",
                "name one of the node's data NICs",
            ),
        ]
    nic = node.nic(fault.nic)
    if nic is None:
        hint = _suggest(fault.nic, [n.name for n in node.nics])
        return [
            *issues,
            doc.issue((*base, "nic"), f"node '{node.name}' has no NIC '{fault.nic}'", hint),
        ]
    refusal = interface_refusal(testbed, node, nic, env=env)
    if refusal is not None:
        hint = f"set by {refusal.source} in the testbed or experiment; {refusal.hint}"
        return [*issues, doc.issue((*base, "nic"), refusal.message, hint)]
    if kind is not None:
        issues += _check_kind_fits(kind, fault, nic, base, testbed, doc)
    return issues


def fault_executor(fault: FaultSpec) -> str:
    """The host that runs a fault's inject, revert, lease, heal and leftover check."""
    return fault.executor or fault.node


def _check_executor(
    kind: FaultKind | None, fault: FaultSpec, base: FieldPath, testbed: Testbed, doc: SourceDoc
) -> list[ConfigIssue]:
    """A fault runs where it can act: a flow_drop on the SmartNIC that carries the NIC (its OVS
    bridges are there), every other kind on the node itself (its kernel, its ranks)."""
    where = (*base, "executor")
    if fault.executor is not None and testbed.node(fault.executor) is None:
        known = [n.name for n in testbed.nodes]
        return [
            doc.issue(
                where,
                f"no host '{fault.executor}' in testbed '{testbed.name}'",
                _suggest(fault.executor, known),
            )
        ]
    if kind is None:
        return []
    executor = fault_executor(fault)
    if not kind.on_smartnic:
        if executor == fault.node:
            return []
        return [
            doc.issue(
                where,
                f"a {kind.name} fault acts on node '{fault.node}' itself and cannot run on "
                f"'{executor}'",
                "remove executor",
            )
        ]
    carrier = testbed.smartnic_of(fault.node, fault.nic or "")
    host = testbed.node(executor)
    if host is not None and carrier is not None and host.name == carrier.name:
        return []
    if carrier is not None:
        hint = f"set executor: {carrier.name} (the SmartNIC that carries {fault.nic})"
    else:
        hint = (
            f"declare the BlueField that carries {fault.nic} as a host of the testbed (role: "
            f"smartnic, host_of: {fault.node}, carries: [{fault.nic}]) and name it in executor"
        )
    what = (
        f"'{executor}' is the node itself"
        if executor == fault.node
        else f"'{executor}' does not carry {fault.node}/{fault.nic}"
    )
    return [
        doc.issue(
            where if fault.executor else base,
            f"a {kind.name} fault runs on the SmartNIC that carries the NIC (its OVS bridge is "
            f"there); {what}",
            hint,
        )
    ]


def _check_process_fault(
    kind: FaultKind, fault: FaultSpec, base: FieldPath, doc: SourceDoc
) -> list[ConfigIssue]:
    """A process fault names a rank (a whole number), no NIC."""
    issues = []
    if fault.nic is not None:
        issues.append(
            doc.issue(
                (*base, "nic"),
                f"a {kind.name} fault targets a rank, not a NIC",
                "remove nic; set params.rank",
            )
        )
    rank = fault.params.get("rank")
    if rank is None or not str(rank).isdigit():
        issues.append(
            doc.issue(
                (*base, "params", "rank"),
                f"a {kind.name} fault needs params.rank: the rank to signal (0, 1, ...)",
                "e.g. params: {rank: 1}",
            )
        )
    return issues


def check_faults_in_invalid_file(doc: SourceDoc, testbed: Testbed) -> list[ConfigIssue]:
    """Cross-file checks on an experiment file that failed its own validation, so that both
    kinds of problem are reported in one go: every fault entry that is valid on its own is
    checked against the testbed (nodes, NICs, interlocks, kinds)."""
    data = doc.data if isinstance(doc.data, dict) else {}
    env = data.get("env")
    env = {str(k): str(v) for k, v in env.items()} if isinstance(env, dict) else {}
    deadline = data.get("deadline_s", 600)
    deadline_s = None
    if isinstance(deadline, int | float) and not isinstance(deadline, bool):
        with contextlib.suppress(OverflowError):
            deadline_s = float(deadline) if 0 < float(deadline) < float("inf") else None
    names = {node.name for node in testbed.nodes}
    scenarios = data.get("scenarios")
    issues: list[ConfigIssue] = []
    for s, scenario in enumerate(scenarios if isinstance(scenarios, list) else []):
        faults = scenario.get("faults") if isinstance(scenario, dict) else None
        for f, raw in enumerate(faults if isinstance(faults, list) else []):
            try:
                fault = FaultSpec.model_validate(raw)
            except ValueError:
                continue  # its own problems are already reported
            base: FieldPath = ("scenarios", s, "faults", f)
            issues += check_fault(fault, base, testbed, names, doc, deadline_s, env)
    return issues


def _check_timing(
    fault: FaultSpec, base: FieldPath, deadline_s: float, doc: SourceDoc
) -> list[ConfigIssue]:
    after = fault.latest_after_s  # a drawn trigger: its range must fit, not only its start
    if after >= deadline_s:
        return [
            doc.issue(
                (*base, "trigger", "within_s" if fault.trigger.within_s else "after_s"),
                f"{'the latest drawn ' if fault.trigger.within_s else ''}trigger at {after:g} s "
                f"is outside the run's deadline ({deadline_s:g} s)",
                "raise deadline_s or trigger earlier",
            )
        ]
    window = fault.active_window_s
    if window is not None and after + window > deadline_s:
        return [
            doc.issue(
                (*base, "duration_s"),
                f"fault would last until {after + window:g} s, past the deadline ({deadline_s:g} s)",
                "shorten duration_s or raise deadline_s",
            )
        ]
    return []


def _check_kind_fits(
    kind: FaultKind, fault: FaultSpec, nic: Nic, base: FieldPath, testbed: Testbed, doc: SourceDoc
) -> list[ConfigIssue]:
    issues = []
    refusal = link_layer_refusal(kind, nic)
    if refusal is not None:
        issues.append(doc.issue((*base, "kind"), refusal[0], refusal[1]))
    if kind.needs_rdma_device and not nic.rdma_device:
        issues.append(
            doc.issue(
                (*base, "nic"), f"{kind.name} needs the NIC's rdma_device; '{nic.name}' has none"
            )
        )
    if kind.needs_netdev and not nic.netdev:
        issues.append(
            doc.issue((*base, "nic"), f"{kind.name} needs the NIC's netdev; '{nic.name}' has none")
        )
    for param in kind.required_params:
        if param not in fault.params:
            issues.append(doc.issue((*base, "params"), f"{kind.name} needs params.{param}"))
    for param in fault.params:
        if param not in (*kind.required_params, *kind.optional_params):
            known = (*kind.required_params, *kind.optional_params)
            issues.append(
                doc.issue(
                    (*base, "params", param),
                    f"{kind.name} has no parameter '{param}'",
                    _suggest(param, known),
                    at_key=True,
                )
            )
    if testbed.kind is TestbedKind.VIRTUAL:
        for feature in kind.kernel_features:
            if testbed.features.get(feature) is False:  # unknown (not probed yet): allowed
                issues.append(
                    doc.issue(
                        (*base, "kind"),
                        f"refused: this virtual testbed's kernel lacks '{feature}', which {kind.name} needs",
                    )
                )
    return issues


def _check_overlaps(
    faults: list[FaultSpec], base: FieldPath, testbed: Testbed, doc: SourceDoc
) -> list[ConfigIssue]:
    """Two faults on one interface at once are refused: one's revert would end the other's
    window. Interfaces are compared as the node's netdevs and RDMA ports (two NIC entries may
    name one netdev), and every cycle of a flap counts."""
    issues = []
    targets = [_interfaces(fault, testbed) for fault in faults]
    for i, first in enumerate(faults):
        for j in range(i + 1, len(faults)):
            shared = targets[i] & targets[j]
            if shared and _overlap(first, faults[j]):
                where = ", ".join(sorted(shared))
                issues.append(
                    doc.issue(
                        (*base, j),
                        f"overlaps fault {i} on the same interface ({first.node}: {where})",
                        "one fault per interface at a time; every flap cycle counts",
                    )
                )
    return issues


def _interfaces(fault: FaultSpec, testbed: Testbed) -> frozenset[str]:
    """What a fault acts on, as comparable names: the NIC's netdev and RDMA port, or the rank."""
    if fault.nic is None:
        return frozenset({f"rank {fault.params.get('rank')}"})
    node = testbed.node(fault.node)
    nic = node.nic(fault.nic) if node is not None else None
    if nic is None:
        return frozenset({f"NIC {fault.nic}"})  # unknown: reported by check_fault
    names = {f"interface {nic.netdev}"} if nic.netdev else set()
    if nic.rdma_device:
        names.add(f"port {nic.rdma_device}/{nic.port}")
    return frozenset(names or {f"NIC {nic.name}"})


def _windows(fault: FaultSpec) -> list[tuple[float, float]]:
    """Every [inject, heal) window of a fault, one per flap cycle (of a drawn trigger: from
    its earliest inject to its latest heal)."""
    start, latest = fault.trigger.after_s, fault.latest_after_s
    if fault.duration_s is None:
        return [(start, float("inf"))]
    period = fault.repeat.period_s if fault.repeat else 0.0
    return [
        (start + k * period, latest + k * period + fault.duration_s) for k in range(fault.cycles)
    ]


def _overlap(a: FaultSpec, b: FaultSpec) -> bool:
    drawn_update = a.trigger.within_updates or b.trigger.within_updates
    if a.trigger.since is not b.trigger.since or a.trigger.update != b.trigger.update:
        return True  # different clocks: cannot prove they are apart
    if drawn_update:
        return True  # updates drawn per trial: cannot prove they are apart
    return any(a0 < b1 and b0 < a1 for a0, a1 in _windows(a) for b0, b1 in _windows(b))


def check_run_interlocks(
    experiment: Experiment, testbed: Testbed, points: list[Point], doc: SourceDoc
) -> list[ConfigIssue]:
    """The bootstrap interlock again for each run's own env: a swept NCCL_SOCKET_IFNAME (or a
    library's env) can give NCCL's bootstrap the very interface a fault takes down. The
    refusal points at the value that does it."""
    issues: dict[FieldPath, ConfigIssue] = {}
    for point in points:
        scenario = experiment.scenario(point.values["scenario"])
        if scenario is None:
            continue
        label = point.values["library"]
        library_env = experiment.libraries[label].env
        env = {**experiment.env, **library_env, **point.env()}
        origins: dict[str, FieldPath] = {n: ("libraries", label, "env", n) for n in library_env}
        origins |= {name: point.origins[name] for name in point.env()}
        for fault in scenario.faults:
            node = testbed.node(fault.node)
            nic = node.nic(fault.nic) if node is not None and fault.nic else None
            if node is None or nic is None:
                continue
            refusal = interface_refusal(testbed, node, nic, env=env)
            name = refusal.source.removeprefix("env.") if refusal else ""
            if refusal is None or name not in origins:
                continue  # none, or one the experiment-wide check already reported
            hint = f"scenario '{scenario.name}' faults {fault.node}/{fault.nic}; {refusal.hint}"
            issues.setdefault(origins[name], doc.issue(origins[name], refusal.message, hint))
    return list(issues.values())
