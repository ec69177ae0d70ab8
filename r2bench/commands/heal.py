"""`r2bench heal`: revert every fault still recorded on every node of a testbed."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.table import Table

from r2bench.commands.options import TestbedOpt
from r2bench.errors import ExitCode

# ssh, the config models and the node-side scripts are imported where they are used:
# `r2bench heal --help` loads none of them.
if TYPE_CHECKING:
    from r2bench.config.testbed import Testbed
    from r2bench.nodes import NodePool


@dataclass(frozen=True)
class HealReport:
    """What `heal.sh` did on one node."""

    node: str
    reverted: list[str]
    failed: list[str]
    left: int
    error: str = ""

    @property
    def clean(self) -> bool:
        """Nothing failed and no fault record is left."""
        return not self.failed and not self.left and not self.error


def heal_node(pool: NodePool, name: str, testbed: Testbed) -> HealReport:
    """Run heal.sh on one node and count what it reverted and what is still recorded."""
    from r2bench.nodes import NodeError
    from r2bench.sweep.agent import parse_fault_line
    from r2bench.sweep.nodeside import injectors_dir, install_injectors, own_records_script

    node = pool[name]
    target = injectors_dir(testbed)
    try:
        install_injectors(node, target)
        out = node.run(["bash", f"{target}/heal.sh"], root=True, timeout=300, check=False)
        left = node.run(
            f"{own_records_script(testbed.paths.work_dir)} | wc -l",
            root=True,
            timeout=30,
            check=False,
        )
    except NodeError as exc:
        return HealReport(name, [], [], 0, exc.message)
    lines = [parse_fault_line(t) for t in (out.stdout + out.stderr).splitlines()]
    reverts = [ln for ln in lines if ln is not None and ln.action == "revert"]
    reverted = [f"{ln.kind} {ln.tag}" for ln in reverts if ln.result == "ok"]
    failed = [ln.text for ln in reverts if ln.result == "failed"]
    return HealReport(name, reverted, failed, int(left.stdout.strip() or 0))


def heal_command(testbed_file: Path, console: Console | None = None) -> int:
    """Revert every fault still recorded on every node; exit 0 when every node is clean."""
    from r2bench.config.load import load_testbed
    from r2bench.nodes import NodeError, NodePool

    console = console or Console()
    testbed = load_testbed(testbed_file)
    with NodePool.from_testbed(testbed) as pool:
        reports = pool.map(lambda node: heal_node(pool, node.name, testbed))
    table = Table(title=f"r2bench heal: {testbed.name}")
    for column in ("node", "reverted", "failed", "still recorded"):
        table.add_column(column, overflow="fold")
    clean = True
    for name, report in reports.items():
        if isinstance(report, NodeError):
            table.add_row(name, "-", report.message, "?")
            clean = False
            continue
        failed = "\n".join(report.failed) or report.error or "-"
        table.add_row(name, "\n".join(report.reverted) or "nothing", failed, str(report.left))
        clean = clean and report.clean
    console.print(table)
    return ExitCode.OK if clean else ExitCode.FAILED


def command(testbed: TestbedOpt) -> None:
    """Revert every r2bench fault still active on a testbed.

    Says what was found and reverted per node. Exit 0 when every node is clean, 1 otherwise.

    Example: [bold]r2bench heal -t experiments/testbeds/dgx-h100-2node.yaml[/]
    """
    raise typer.Exit(heal_command(testbed, Console()))
