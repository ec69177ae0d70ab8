"""The import graph of r2bench's modules, read with `ast` (nothing is imported): no cycles,
the sweep stays free of the report extra, no package imports the command layer above it, and
each room (a top-level package or module) imports only rooms on its own floor or below
(`FLOORS`: the data path parse -> runfolder -> analysis -> tables -> report | compare | figures).

Every import counts, module-level or inside a function (a lazy import still runs), except
those under `if TYPE_CHECKING:`. `from pkg import name` counts as importing `pkg.name` when
that is a module, else `pkg`.

This module holds those with real processes; the same subject's other tests:
tests/unit/test_import_graph.py (its pure tests).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.support import paths
from tests.support.import_graph import within

PACKAGE = paths.REPO / "r2bench"


HEAVY_AT_START = ("fabric", "paramiko", "pandas", "pyarrow", "plotly", "r2bench.testbeds.virtual")

_LOADED_AFTER = """
import json, sys
sys.argv = ["r2bench", *sys.argv[1:]]
from r2bench.entry import main  # what the `r2bench` console script runs
code = None
try:
    main()
except SystemExit as end:
    code = end.code
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


def _modules_loaded_by(*args: str) -> tuple[int, list[str]]:
    """Run `r2bench ARGS` in a fresh interpreter; its exit code and every module it loaded."""
    env = dict(os.environ, PYTHONPATH=str(PACKAGE.parent), COLUMNS="100")
    proc = subprocess.run(
        [sys.executable, "-c", _LOADED_AFTER, *args],
        cwd=PACKAGE.parent,  # `python -c` imports from its folder first
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=True,
    )
    result = json.loads(proc.stdout.splitlines()[-1])
    return result["code"], result["modules"]


@pytest.mark.parametrize("flag", ["--version", "--help"])
def test_version_and_help_load_no_heavy_module(flag: str) -> None:
    code, modules = _modules_loaded_by(flag)
    assert code in (0, None)
    heavy = sorted(m for m in modules if within(m, HEAVY_AT_START))
    assert not heavy, f"r2bench {flag} loads {heavy}"


def test_version_is_answered_before_the_command_tree_is_imported() -> None:
    code, modules = _modules_loaded_by("--version")
    assert code in (0, None)
    assert not [m for m in modules if within(m, ("typer", "rich", "click", "r2bench.cli"))]


def test_help_imports_no_command_module() -> None:
    """`r2bench --help` shows the command table's lines: no command's module is imported."""
    code, modules = _modules_loaded_by("--help")
    assert code in (0, None)
    loaded = {m for m in modules if within(m, ("r2bench.commands",))}
    assert loaded <= {"r2bench.commands", "r2bench.commands.failures"}, loaded


def test_a_command_is_loaded_when_it_is_called() -> None:
    """The checks above can fail: `testbed --help` loads its command module, `doctor --help`
    its own; a command loads its own module and no other command's."""
    code, modules = _modules_loaded_by("testbed", "--help")
    assert code in (0, None)
    assert "r2bench.commands.testbed" in modules
    code, modules = _modules_loaded_by("doctor", "--help")
    assert code in (0, None)
    assert "r2bench.commands.doctor" in modules
    assert not {"r2bench.commands.testbed", "r2bench.commands.sweep"} & set(modules)


HEAVY_IN_HELP = (*HEAVY_AT_START, "invoke", "yaml", "rich.progress", "r2bench.sweep.orchestrate")


@pytest.mark.parametrize(
    "argv",
    [("sweep",), ("setup",), ("doctor",), ("plan",), ("testbed", "up"), ("heal",), ("inject",)],
)
def test_command_help_loads_no_heavy_module(argv: tuple[str, ...]) -> None:
    """What tests/unit/test_command_help_imports.py reads from the source, seen in a process:
    a command's --help loads no ssh, yaml, virtual testbed or sweep code."""
    code, modules = _modules_loaded_by(*argv, "--help")
    assert code in (0, None)
    heavy = sorted(m for m in modules if within(m, HEAVY_IN_HELP))
    assert not heavy, f"r2bench {' '.join(argv)} --help loads {heavy}"
