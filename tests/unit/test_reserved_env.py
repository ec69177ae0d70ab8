"""The library under test is never replaced without a word: a run's environment may not set
the variables that choose which library loads (LD_LIBRARY_PATH, LD_PRELOAD, LD_AUDIT) or
r2bench's own (R2B_RUN, R2B_EMULATED_LIBRARY, ...); each is refused where it is written, at its
key, with the fix, exit 2. A network plugin in an R-2CCL run is a located warning."""

from __future__ import annotations

from pathlib import Path

import pytest

from r2bench.errors import ExitCode
from r2bench.plan.build import load_inputs, make_plan
from tests.support import paths
from tests.support.cli_runner import invoke_as_main

CLOUDLAB = paths.REPO / "experiments" / "testbeds" / "dgx-h100-2node.yaml"
VIRTUAL = paths.REPO / "experiments" / "testbeds" / "virtual-example.yaml"
BASE = "name: t\ncollectives: [all_reduce]\nsizes: {begin: 8, end: 1M}\n"
LIBRARIES = "libraries:\n  stock: {recipe: nccl}\n  r2: {recipe: r2ccl}\n"


def _refusals(tmp_path: Path, body: str, testbed: Path = CLOUDLAB) -> tuple[Path, list[str]]:
    path = tmp_path / "exp.yaml"
    path.write_text(BASE + body)
    ran = invoke_as_main("plan", str(path), "-t", str(testbed))
    assert ran.exit_code == ExitCode.USAGE, ran.output
    assert "Traceback" not in ran.output
    return path, [line for line in ran.output.splitlines() if line.startswith(str(path))]


@pytest.mark.parametrize(
    ("name", "fix"),
    [
        ("LD_LIBRARY_PATH", "r2bench puts each library's own lib folder first itself"),
        ("LD_PRELOAD", "a benchmark recipe's `preload:` names what its runs preload"),
        ("LD_AUDIT", "remove it"),
        ("R2B_EMULATED_LIBRARY", "pick the library with a `libraries:` entry"),
        ("R2B_RUN", "remove it"),
        ("R2B_NIC_MAP", "remove it"),
    ],
)
def test_the_experiments_env_may_not_replace_the_library_or_r2benchs_own(
    tmp_path: Path, name: str, fix: str
) -> None:
    """Before: `env: {LD_LIBRARY_PATH: ...}` replaced the library's build/lib, so "r2ccl" and
    "stock" runs both loaded the system libnccl; R2B_EMULATED_LIBRARY turned the stock
    emulated library into the R-2CCL emulator."""
    path, lines = _refusals(tmp_path, LIBRARIES + f"env:\n  {name}: /opt/x\n")
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"{path}:8:3: env.{name}: {name} may not be set here"), lines
    assert fix in lines[0]


def test_a_library_entrys_env_is_refused_at_its_key(tmp_path: Path) -> None:
    body = "libraries:\n  r2: {recipe: r2ccl, env: {LD_LIBRARY_PATH: /usr/lib}}\n"
    path, lines = _refusals(tmp_path, body)
    assert len(lines) == 1 and lines[0].startswith(f"{path}:5:29: libraries.r2.env."), lines


def test_a_sweep_dimension_is_refused_at_its_key(tmp_path: Path) -> None:
    body = LIBRARIES + "sweep:\n  matrix:\n    LD_PRELOAD: [/a.so, /b.so]\n"
    path, lines = _refusals(tmp_path, body)
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"{path}:9:5: sweep.matrix.LD_PRELOAD: LD_PRELOAD may not be swept")


def test_a_testbed_node_may_not_set_them_for_its_ranks(tmp_path: Path) -> None:
    testbed = tmp_path / "tb.yaml"
    text = VIRTUAL.read_text()
    testbed.write_text(
        text.replace("  - name: node0\n", "  - name: node0\n    env: {LD_PRELOAD: /x.so}\n", 1)
    )
    assert testbed.read_text() != text
    ran = invoke_as_main("plan", str(paths.REPO / "experiments" / "quickstart.yaml"), "-t",
                         str(testbed))  # fmt: skip
    assert ran.exit_code == ExitCode.USAGE, ran.output
    assert "nodes[0].env.LD_PRELOAD: LD_PRELOAD may not be set here" in ran.output


def test_the_workloads_test_hooks_and_other_names_are_settings(tmp_path: Path) -> None:
    path = tmp_path / "exp.yaml"
    path.write_text(
        BASE + LIBRARIES + "env:\n  R2B_VERIFY_CORRUPT: '3'\n  LD_BIND_NOW: '1'\n"
        "sweep:\n  matrix:\n    R2B_PASS: [1, 2]\n"
    )
    plan = make_plan(load_inputs(path, CLOUDLAB))
    assert plan.runs and all(r.spec.env.get("R2B_VERIFY_CORRUPT") == "3" for r in plan.runs)


def test_a_network_plugin_in_r2ccls_runs_is_a_located_warning(tmp_path: Path) -> None:
    path = tmp_path / "exp.yaml"
    path.write_text(BASE + LIBRARIES + "env:\n  NCCL_NET_PLUGIN: aws-ofi\n")
    notes = [n for n in make_plan(load_inputs(path, CLOUDLAB)).notes if "NCCL_NET_PLUGIN" in n]
    assert len(notes) == 1 and notes[0].startswith(f"{path}:8:3: env.NCCL_NET_PLUGIN: warning:")
    assert "library 'r2'" in notes[0] and "measure the plugin" in notes[0]
    path.write_text(BASE + LIBRARIES + "env:\n  NCCL_NET_PLUGIN: none\n")
    assert not [n for n in make_plan(load_inputs(path, CLOUDLAB)).notes if "NET_PLUGIN" in n]
