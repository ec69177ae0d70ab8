"""The import graph of r2bench's modules, read with `ast` (nothing is imported): no cycles,
the sweep stays free of the report extra, no package imports the command layer above it, and
each room (a top-level package or module) imports only rooms on its own floor or below
(`FLOORS`: the data path parse -> runfolder -> analysis -> tables -> report | compare | figures).

Every import counts, module-level or inside a function (a lazy import still runs), except
those under `if TYPE_CHECKING:`. `from pkg import name` counts as importing `pkg.name` when
that is a module, else `pkg`.

This module holds its pure tests; the same subject's other tests:
tests/integration/test_import_graph.py (those with real processes).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from tests.support import paths
from tests.support.import_graph import within

PACKAGE = paths.REPO / "r2bench"

COMMAND_LAYER = (
    "r2bench.entry",
    "r2bench.cli",
    "r2bench.commandtable",
    "r2bench.tophelp",
    "r2bench.commands",
)

FLOORS: tuple[tuple[str, ...], ...] = (
    (
        "r2bench",
        "errors",
        "safeio",
        "textsafe",
        "textinput",
        "resources",
        "extras",
        "markup",
        "shellwords",
        "plaintable",
    ),
    ("config",),
    ("nodes", "launch", "workloads"),
    ("faults", "doctor", "testbeds"),
    ("plan",),
    ("parse",),
    ("runfolder",),
    ("analysis",),
    ("tables",),
    ("setup",),
    ("sweep", "report", "compare", "figures"),
    ("commands", "cli", "commandtable", "tophelp", "entry"),
)

REPORT_EXTRA = ("pandas", "pyarrow", "r2bench.tables.build")


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _runtime_imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement that runs, skipping `if TYPE_CHECKING:` bodies."""
    for node in ast.iter_child_nodes(tree):
        runs = node.orelse if isinstance(node, ast.If) and _is_type_checking(node) else [node]
        for child in runs:
            if isinstance(child, ast.Import | ast.ImportFrom):
                yield child
            yield from _runtime_imports(child)


def _base(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute name `from <base> import ...` refers to."""
    if not node.level:
        return node.module or ""
    parts = module.split(".") if is_package else module.split(".")[:-1]
    parts = parts[: len(parts) - node.level + 1]
    return ".".join([*parts, node.module] if node.module else parts)


def _imported(module: str, is_package: bool, tree: ast.AST, known: set[str]) -> set[str]:
    """Names imported by one module: r2bench modules as modules, others as written."""
    names: set[str] = set()
    for node in _runtime_imports(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
            continue
        base = _base(module, is_package, node)
        subs = {f"{base}.{alias.name}" for alias in node.names}
        names |= subs & known
        if subs - known:  # a name defined in `base` itself
            names.add(base)
    return {_owner(name, known) for name in names}


def _owner(name: str, known: set[str]) -> str:
    """The r2bench module that holds `name` (the longest known prefix); `name` otherwise."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        if (prefix := ".".join(parts[:end])) in known:
            return prefix
    return name


def import_graph() -> dict[str, set[str]]:
    """{module: every name it imports}, for every module of the package."""
    files = {_module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}
    known = set(files)
    graph = {}
    for module, path in files.items():
        tree = ast.parse(path.read_text(), str(path))
        imported = _imported(module, path.name == "__init__.py", tree, known)
        graph[module] = imported - {module}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of r2bench modules (its modules, the first repeated at the end), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = 1
        path.append(module)
        for target in sorted(graph[module] & graph.keys()):
            if state.get(target) == 1:
                return [*path[path.index(target) :], target]
            if target not in state and (cycle := visit(target)) is not None:
                return cycle
        path.pop()
        state[module] = 2
        return None

    for module in sorted(graph):
        if module not in state and (cycle := visit(module)) is not None:
            return cycle
    return None


def reachable(graph: dict[str, set[str]], start: set[str]) -> dict[str, str]:
    """{name: the module that imports it} for everything `start`'s modules import,
    transitively (outside names included, not followed)."""
    seen: dict[str, str] = {}
    todo = sorted(start)
    while todo:
        module = todo.pop()
        for target in sorted(graph.get(module, set())):
            if target not in seen and target not in start:
                seen[target] = module
                todo.append(target)
    return seen


def room_of(module: str) -> str:
    """The room an r2bench module is in: `r2bench.parse.nccltests.text` -> `parse`; the
    package's own `__init__` -> `r2bench`."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def floor_of(room: str) -> int | None:
    """The floor of `room` in `FLOORS` (0: the ground floor); None for a room not on one."""
    return next((level for level, rooms in enumerate(FLOORS) if room in rooms), None)


def floor_violations(graph: dict[str, set[str]]) -> list[str]:
    """Every import of an r2bench room on a higher floor than the importer's, and every room
    on no floor, each as one line."""
    problems = []
    for module in sorted(graph):
        if (floor := floor_of(room_of(module))) is None:
            problems.append(f"{module}: room {room_of(module)!r} is on no floor of FLOORS")
            continue
        for target in sorted(graph[module]):
            if not within(target, ("r2bench",)):
                continue
            target_floor = floor_of(room_of(target))
            if target_floor is not None and target_floor > floor:
                problems.append(
                    f"{module} (floor {floor}: {room_of(module)}) imports {target} "
                    f"(floor {target_floor}: {room_of(target)})"
                )
    return problems


def test_the_graph_sees_relative_and_from_imports() -> None:
    """The reader itself: a relative `from . import x`, `from pkg import module` and
    `import a.b` each give the module they import."""
    known = {"r2bench.a", "r2bench.a.b", "r2bench.a.c", "r2bench.d"}
    tree = ast.parse(
        "from . import c\nfrom r2bench.d import thing\nimport r2bench.a.c\n"
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pandas\n"
        "def f():\n    import pyarrow\n"
    )
    imported = _imported("r2bench.a.b", False, tree, known)
    assert imported == {"r2bench.a.c", "r2bench.d", "typing", "pyarrow"}
    graph = {"x": {"y"}, "y": {"z"}, "z": {"x"}}
    assert find_cycle(graph) == ["x", "y", "z", "x"]


def test_no_import_cycles() -> None:
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_floor_rule_finds_an_upward_import_and_a_room_on_no_floor() -> None:
    """The rule itself: parse importing tables is one violation; tables importing parse,
    and a room importing its own floor, are none; an unknown room is named."""
    graph = {
        "r2bench.parse.a": {"r2bench.tables.b", "r2bench.parse.c", "re"},
        "r2bench.tables.b": {"r2bench.parse.a", "r2bench.analysis"},
        "r2bench.report.x": {"r2bench.figures.y"},
        "r2bench.attic.z": set(),
    }
    assert floor_violations(graph) == [
        "r2bench.attic.z: room 'attic' is on no floor of FLOORS",
        "r2bench.parse.a (floor 5: parse) imports r2bench.tables.b (floor 8: tables)",
    ]


def test_every_room_imports_only_its_floor_and_below() -> None:
    """The layers of docs/architecture.md: nothing imports a room above it (FLOORS)."""
    problems = floor_violations(import_graph())
    assert not problems, "\n".join(problems)


def test_the_sweep_never_imports_the_report_extra() -> None:
    """A sweep runs without the report extra (pandas, pyarrow) and without the tables."""
    graph = import_graph()
    sweep = {module for module in graph if within(module, ("r2bench.sweep",))}
    found = reachable(graph, sweep)
    bad = {name: by for name, by in found.items() if within(name, REPORT_EXTRA)}
    assert not bad, "\n".join(f"{by} imports {name}" for name, by in sorted(bad.items()))


def test_no_package_imports_the_command_layer() -> None:
    graph = import_graph()
    below = [module for module in graph if not within(module, COMMAND_LAYER)]
    bad = sorted(
        f"{module} imports {target}"
        for module in below
        for target in graph[module]
        if within(target, COMMAND_LAYER)
    )
    assert not bad, "\n".join(bad)
