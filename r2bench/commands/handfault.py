"""A fault by hand, with the sweep's interlocks: what `r2bench inject` and `r2bench revert`
share (their options, `fault_by_hand`; the fault's planning; running it on its node).

A hand-made fault is written as a one-fault experiment and planned like any other, so it
passes the very checks an experiment file does (the management NIC, the bootstrap interface,
the NIC kind, missing parameters) and gets the same node-side command, tag and lease.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from r2bench.commands.options import TestbedOpt
from r2bench.errors import ExitCode

# The config models, the planner and ssh are imported where they are used: `r2bench inject
# --help` and `r2bench revert --help` load none of them.
if TYPE_CHECKING:
    from r2bench.config.errors import ConfigIssue
    from r2bench.plan.model import FaultStep, NodeCommand

DEFAULT_LEASE_S = 300.0
MANUAL_TAG_RUN = "manual"


@dataclass(frozen=True)
class ManualFault:
    """A fault given on the command line."""

    kind: str
    node: str
    nic: str
    params: dict[str, str]
    lease_s: float = DEFAULT_LEASE_S


def manual_fault_step(testbed_file: Path, fault: ManualFault) -> tuple[FaultStep, str]:
    """Plan a one-fault experiment; ConfigError with located messages when refused.

    Returns the fault's step and the testbed's work folder."""
    import yaml

    from r2bench.config.errors import ConfigError
    from r2bench.config.experiment import Experiment
    from r2bench.config.load import load_testbed
    from r2bench.config.recipes import load_recipes
    from r2bench.config.source import parse_yaml
    from r2bench.config.validate import validate_model
    from r2bench.faults.catalogue import FAULT_KINDS
    from r2bench.plan.build import LEASE_GRACE_S, Inputs, make_plan

    testbed_doc_name = str(testbed_file)
    testbed = load_testbed(testbed_file)
    # By hand, a fault that runs on a SmartNIC runs on the one that carries the NIC (if any;
    # plan refuses it otherwise, with the fix).
    kind = FAULT_KINDS.get(fault.kind)
    carrier = testbed.smartnic_of(fault.node, fault.nic) if kind and kind.on_smartnic else None
    executor = carrier.name if carrier else None
    text = yaml.safe_dump(
        {
            "name": "manual",
            "libraries": {"system": {"recipe": "system"}},
            "benchmark": {"recipe": "nccl-tests"},
            "scenarios": [
                {
                    "name": "by-hand",
                    "faults": [
                        {
                            "kind": fault.kind,
                            "node": fault.node,
                            "nic": fault.nic,
                            "trigger": {"after_s": 0},
                            "params": fault.params,
                            **({"executor": executor} if executor else {}),
                        }
                    ],
                }
            ],
            "sweep": {"matrix": {"scenario": ["by-hand"]}},
            "deadline_s": max(fault.lease_s - LEASE_GRACE_S, 1.0),
        },
        sort_keys=False,
    )
    doc = parse_yaml(text, _WRITTEN)
    try:
        experiment = validate_model(Experiment, doc)
        inputs = Inputs(experiment, testbed, load_recipes(None), doc, _WRITTEN, testbed_doc_name)
        plan = make_plan(inputs)
    except ConfigError as exc:
        raise ConfigError([_at_arguments(issue) for issue in exc.issues]) from exc
    step = next(r for r in plan.runs if r.faults).faults[0]
    return _retagged(step, manual_tag(fault)), testbed.paths.work_dir


_WRITTEN = "<experiment written for the arguments>"
"""The name of the one-fault experiment `manual_fault_step` writes: no file of the user's."""
_FAULT_PATH: tuple[str | int, ...] = ("scenarios", 0, "faults", 0)
_ARGUMENT_OF = {"deadline_s": ("lease_s",), "trigger": ()}


def _at_arguments(issue: ConfigIssue) -> ConfigIssue:
    """An issue of the experiment written for a fault given by hand, located at the argument
    it came from (kind, node, nic, params, lease_s); issues of the testbed file stay there."""
    if issue.file != _WRITTEN:
        return issue
    path = issue.path
    if path[: len(_FAULT_PATH)] == _FAULT_PATH:
        path = path[len(_FAULT_PATH) :]
    if path and path[0] in _ARGUMENT_OF:
        path = (*_ARGUMENT_OF[str(path[0])], *path[1:])
    return replace(issue, file="r2bench inject arguments", line=None, column=None, path=path)


def manual_tag(fault: ManualFault) -> str:
    """The tag of a hand-made fault: the same for its inject and its revert."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", f"r2b-hand-{fault.node}-{fault.nic}")[:64]


def _retagged(step: FaultStep, tag: str) -> FaultStep:
    def swap(command: NodeCommand) -> NodeCommand:
        argv = shlex.split(command.command)
        argv[argv.index("--tag") + 1] = tag
        return command.model_copy(update={"command": shlex.join(argv)})

    return step.model_copy(
        update={
            "tag": tag,
            "inject": swap(step.inject),
            "revert": swap(step.revert),
            "status": swap(step.status),
        }
    )


def fault_command(testbed_file: Path, fault: ManualFault, action: str, console: Console) -> int:
    """Inject or revert one fault by hand; prints the injector's event line."""
    from r2bench.config.load import load_testbed
    from r2bench.nodes import NodePool
    from r2bench.sweep.nodeside import injectors_dir, install_injectors

    step, _ = manual_fault_step(testbed_file, fault)
    command = step.inject if action == "inject" else step.revert
    testbed = load_testbed(testbed_file)
    with NodePool.from_testbed(testbed) as pool:
        node = pool[step.inject.node]  # the node, or the SmartNIC that carries its NIC
        install_injectors(node, injectors_dir(testbed))
        result = node.run(command.command, root=True, timeout=300, check=False)
    for text in (result.stdout + result.stderr).splitlines():
        console.print(text, markup=False, highlight=False)
    if action == "inject" and result.ok:
        console.print(
            f"undo with: r2bench revert -t {testbed_file} {fault.kind} {fault.node} {fault.nic} "
            f"(or wait {step.lease_s:g} s: the node reverts by itself)"
        )
    return ExitCode.OK if result.ok else ExitCode.FAILED


def fault_by_hand(action: str) -> Callable[..., None]:
    """The `command` of `r2bench inject` or `r2bench revert` (`action`): the same arguments and
    options, the help with its verb."""

    def command(
        kind: Annotated[
            str,
            typer.Argument(
                help="Fault kind: ib_port_down, link_down, route_drop, bandwidth_cap, flow_drop."
            ),
        ],
        node: Annotated[str, typer.Argument(help="Node name in the testbed.")],
        nic: Annotated[str, typer.Argument(help="NIC name of that node.")],
        testbed: TestbedOpt,
        param: Annotated[
            list[str] | None,
            typer.Option(
                "--param",
                "-p",
                help="KEY=VALUE kind setting (e.g. rate=1gbit); repeatable.",
                metavar="KEY=VALUE",
            ),
        ] = None,
        lease_s: Annotated[
            float,
            typer.Option(
                "--lease-s",
                help="The node reverts by itself after this many seconds.",
                metavar="SECONDS",
                min=1,
                max=86400,
            ),
        ] = 300.0,
    ) -> None:
        console = Console(stderr=True)
        params = dict(p.split("=", 1) for p in param or [] if "=" in p)
        fault = ManualFault(kind, node, nic, params, lease_s)
        raise typer.Exit(fault_command(testbed, fault, action, console))

    verb = "Inject" if action == "inject" else "Revert"
    command.__doc__ = (
        f"{verb} one fault by hand, with a sweep's safety checks.\n\n"
        "The same interlocks as an experiment file: never the management NIC, the bootstrap "
        "interface or the controller's path.\n\n"
        f"Example: [bold]r2bench {action} link_down node1 nic1 -t testbed.yaml[/]"
    )
    return command
