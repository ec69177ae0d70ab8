"""The doctor's results as a table (check x node) with the fixes, or as JSON."""

from __future__ import annotations

import json

from rich.console import Console
from rich.table import Table

from r2bench.config.testbed import Testbed
from r2bench.doctor.checks import CheckResult, Status, failed
from r2bench.launch.registry import LAUNCHERS

STYLE = {Status.OK: "green", Status.WARN: "yellow", Status.FAIL: "bold red", Status.SKIP: "dim"}


def results_table(testbed: Testbed, results: list[CheckResult]) -> Table:
    """One row per check, one column per node; each cell: status and what was seen."""
    nodes = [node.name for node in testbed.nodes]
    checks = sorted(dict.fromkeys(result.check for result in results), key=_check_rank)
    cells = {(result.check, result.node): result for result in results}
    table = Table(title=f"r2bench doctor: {testbed.name}", show_lines=True)
    table.add_column("check", style="bold")
    for node in nodes:
        table.add_column(node, overflow="fold")
    for check in checks:
        row = [check]
        for node in nodes:
            result = cells.get((check, node))
            row.append(_cell(result) if result else "")
        table.add_row(*row)
    return table


ROW_ORDER = (
    "held by",
    "reachable",
    "clock",
    "os/kernel",
    "driver",
    "gpus",
    "gpu-nic affinity",
    "gpudirect rdma",
    "nic ",
    *(spec.tool.name for spec in LAUNCHERS.values() if spec.tool),
    "ssh from first",
    "stray processes",
    "active faults",
)


def _check_rank(check: str) -> int:
    """Rows in a fixed order (NIC rows together); unknown checks last."""
    ranks = [i for i, prefix in enumerate(ROW_ORDER) if check.startswith(prefix)]
    return ranks[0] if ranks else len(ROW_ORDER)


def _cell(result: CheckResult) -> str:
    style = STYLE[result.status]
    detail = result.detail.replace("[", r"\[")
    return f"[{style}]{result.status.value}[/] {detail}"


def print_report(testbed: Testbed, results: list[CheckResult], console: Console) -> None:
    """The table, then how to fix each failure and warning."""
    console.print(results_table(testbed, results))
    problems = [r for r in results if r.status in (Status.FAIL, Status.WARN) and r.fix]
    for result in problems:
        style = STYLE[result.status]
        fix = result.fix.replace("[", r"\[")
        console.print(f"[{style}]{result.status.value}[/] {result.node} {result.check}: {fix}")
    verdict = "[bold red]FAILED[/]" if failed(results) else "[green]all checks passed[/]"
    console.print(verdict)


def results_json(testbed: Testbed, results: list[CheckResult]) -> str:
    """The results as JSON: {testbed, ok, results: [{node, check, status, detail, fix}]}."""
    body = {
        "testbed": testbed.name,
        "ok": not failed(results),
        "results": [
            {
                "node": r.node,
                "check": r.check,
                "status": r.status.value,
                "detail": r.detail,
                "fix": r.fix,
            }
            for r in results
        ],
    }
    return json.dumps(body, indent=2)
