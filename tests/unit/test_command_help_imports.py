"""`r2bench <command> --help` loads no heavy module: a command's module imports at its top only
typer, rich and light r2bench modules; ssh, the config models, yaml, the planner, the sweep,
the virtual testbed and the report extra are imported inside the functions that use them (as
`commands/compare.py` does), so each command's help answers as fast as the command table's.

Read with `ast` (nothing is imported): what runs when a module is imported is its top-level
import statements (those under `if TYPE_CHECKING:` excepted), followed through the r2bench
modules they name and their packages' `__init__`. The same subject's process-level check:
tests/integration/test_import_graph.py (`test_command_help_loads_no_heavy_module`).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from r2bench.cli import COMMANDS
from tests.support import paths
from tests.support.import_graph import within

PACKAGE = paths.REPO / "r2bench"
HEAVY = (
    *("paramiko", "fabric", "invoke", "cryptography", "nacl"),  # ssh: about 0.1 s
    *("yaml", "pandas", "pyarrow", "plotly", "rich.progress"),
    *("r2bench.config", "r2bench.nodes", "r2bench.plan", "r2bench.sweep", "r2bench.setup"),
    *("r2bench.doctor", "r2bench.testbeds.virtual", "r2bench.parse", "r2bench.analysis"),
    *("r2bench.tables", "r2bench.report"),
)
"""What a command's --help must not load: ssh, yaml, the report extra, and the r2bench rooms
that bring in the config's pydantic models and the rest (pydantic itself is typer's)."""
NOT_YET = {
    "parse": "commands/parse.py reads the parse models at its top",
    "import": "commands/import_logs.py reads the run folder's models at its top",
    "report": "commands/report.py takes sweep_folder from runfolder.store at its top",
    "cloudlab": "commands/cloudlab.py imports the virtual testbed's layout at its top",
    "schema": "commands/schema.py imports config.schema (every config model) at its top",
}
"""Commands whose help still loads some of HEAVY (their modules are outside this change)."""


def _file_of(module: str) -> Path | None:
    base = PACKAGE.parent.joinpath(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_time_statements(body: list[ast.stmt]) -> Iterator[ast.Import | ast.ImportFrom]:
    """The import statements a module runs when imported: its top level, the branches of its
    `if`/`try`/`with` and its class bodies, not its functions nor `if TYPE_CHECKING:`."""
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If):
            if not _is_type_checking(node):
                yield from _import_time_statements(node.body)
            yield from _import_time_statements(node.orelse)
        elif isinstance(node, ast.Try):
            for part in (node.body, node.orelse, node.finalbody):
                yield from _import_time_statements(part)
            for handler in node.handlers:
                yield from _import_time_statements(handler.body)
        elif isinstance(node, ast.With | ast.ClassDef):
            yield from _import_time_statements(node.body)


def _names_imported(module: str, path: Path) -> set[str]:
    """Every module name `module` imports when it is imported (r2bench's resolved)."""
    names: set[str] = set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in _import_time_statements(ast.parse(path.read_text(), str(path)).body):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
            continue
        base = node.module or ""
        if node.level:
            parts = package.split(".")[: len(package.split(".")) - node.level + 1]
            base = ".".join([*parts, base] if base else parts)
        names.add(base)
        names |= {f"{base}.{a.name}" for a in node.names if _file_of(f"{base}.{a.name}")}
    return names


def loaded_by(module: str) -> set[str]:
    """Every module importing `module` loads: r2bench's followed, with their packages."""
    seen: set[str] = set()
    todo = [module]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        parts = name.split(".")
        todo.extend(".".join(parts[:end]) for end in range(1, len(parts)))  # its packages
        path = _file_of(name) if within(name, ("r2bench",)) else None
        if path is not None:
            todo.extend(_names_imported(name, path) - seen)
    return seen


def heavy_loaded_by(module: str) -> list[str]:
    """The HEAVY modules `module` loads when it is imported."""
    return sorted(m for m in loaded_by(module) if within(m, HEAVY))


def test_the_reader_follows_top_level_imports_and_skips_functions() -> None:
    """It can fail: the sweep's orchestration is heavy; a command module imports it lazily."""
    assert "r2bench.sweep" in heavy_loaded_by("r2bench.sweep.orchestrate")
    assert "paramiko" in loaded_by("r2bench.nodes")
    assert "r2bench.sweep.orchestrate" not in loaded_by("r2bench.commands.sweep")
    assert "r2bench.sweep.orchestrate" in ast.dump(
        ast.parse((PACKAGE / "commands" / "sweep.py").read_text())
    )


def test_not_yet_names_only_commands_that_exist() -> None:
    assert set(NOT_YET) <= set(COMMANDS)


@pytest.mark.parametrize("name", [n for n in COMMANDS if n not in NOT_YET])
def test_command_module_loads_no_heavy_module(name: str) -> None:
    heavy = heavy_loaded_by(f"r2bench.commands.{COMMANDS[name].module}")
    assert not heavy, (
        f"`r2bench {name} --help` loads {heavy}: import them inside the function that uses "
        "them (commands/compare.py does), types only under `if TYPE_CHECKING:`"
    )
