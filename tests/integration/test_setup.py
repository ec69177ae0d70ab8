"""`r2bench setup`: cache keys and stamps, build-failure extraction, per-node rendering, and the
whole command on a local testbed (LocalNode) with tiny local-source recipes.

This module holds those with real processes; the same subject's other tests:
tests/unit/test_setup.py (its pure tests).
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import yaml
from rich.console import Console

from r2bench.commands.setup import setup_command
from r2bench.setup import cache
from tests.support.helpers_sshd import SshServer, needs_sshd, sshd  # noqa: F401

# ---- the command on a local testbed ---------------------------------------------------------
LIB_RECIPE = """
name: tinylib
kind: library
source: {{path: {src}}}
build:
  steps: ["sh build.sh {{gencode}} -j{{jobs}}"]
  known_failures:
    - {{pattern: "boom", explain: "tinylib needs a CUDA 12.x toolkit"}}
home: build
lib_dir: build/lib
"""
BENCH_RECIPE = """
name: tinybench
kind: benchmark
source: {{path: {src}}}
build:
  steps: ["echo NCCL_HOME={{nccl_home}} > built.txt"]
command: ["{{src}}/run.sh"]
collectives: [all_reduce]
"""
BUILD_OK = """echo "building $*"
mkdir -p build/lib build/include
echo '#define NCCL_VERSION_CODE 22304' > build/include/nccl.h
"""
BUILD_FAIL = """echo "a.c:3:1: warning: unused variable"
echo "a.c:7:2: error: boom" >&2
exit 2
"""


class Local:
    """A local testbed, an experiment and two recipes in a temporary folder."""

    def __init__(self, root: Path) -> None:
        self.root = root
        for name in ("plugin", "lib", "bench"):
            (root / name).mkdir()
        (root / "plugin" / "tinylib.yaml").write_text(LIB_RECIPE.format(src=root / "lib"))
        (root / "plugin" / "tinybench.yaml").write_text(BENCH_RECIPE.format(src=root / "bench"))
        (root / "lib" / "build.sh").write_text(BUILD_OK)
        (root / "bench" / "run.sh").write_text("echo run\n")
        self.testbed = root / "testbed.yaml"
        self.testbed.write_text(
            "name: here\nkind: local\nlauncher: {kind: local}\n"
            "nodes: [{name: local0, address: 127.0.0.1, sudo: false}]\n"
            f"paths: {{work_dir: {root / 'work'}}}\n"
        )
        self.experiment = root / "exp.yaml"
        self.experiment.write_text(
            "name: t\nlibraries: {lib: {recipe: tinylib}}\nbenchmark: {recipe: tinybench}\n"
            "sizes: [8]\n"
        )

    def use_ssh(self, server: SshServer, nodes: int) -> None:
        """Reach `nodes` nodes over ssh, all on this machine (so they share the work folder)."""
        entries = [
            {"name": f"n{i}", "address": "127.0.0.1", "sudo": False, "ssh": server.ssh_settings()}
            for i in range(nodes)
        ]
        testbed = {"name": "loop", "kind": "ssh", "nodes": entries}
        testbed["paths"] = {"work_dir": str(self.root / "work")}
        self.testbed.write_text(yaml.safe_dump(testbed))

    def setup(self, force: bool = False) -> tuple[int, str]:
        out = io.StringIO()
        code = setup_command(
            self.experiment,
            self.testbed,
            force,
            None,
            recipes=self.root / "plugin",
            log_dir=self.root / "logs",
            console=Console(file=out, width=300),
        )
        return code, out.getvalue()

    def stamp(self, recipe: str) -> dict[str, object]:
        folder = "tinybench-local+tinylib-local" if recipe == "tinybench" else f"{recipe}-local"
        return json.loads((self.root / "work" / "src" / folder / cache.STAMP_NAME).read_text())


@pytest.fixture()
def local(tmp_path: Path) -> Local:
    return Local(tmp_path)


def test_local_setup_builds_then_is_a_noop(local: Local) -> None:
    code, out = local.setup()
    assert code == 0, out
    assert "local0: tinylib built in" in out and "local0: tinybench built in" in out
    built = local.root / "work" / "src" / "tinybench-local+tinylib-local" / "built.txt"
    assert built.read_text().strip() == f"NCCL_HOME={local.root}/work/src/tinylib-local/build"
    stamp = local.stamp("tinybench")
    assert stamp["lib_dir"] == f"{local.root}/work/src/tinylib-local/build/lib"
    assert stamp["nccl_version"] == 22304 and stamp["node"] == "local0"
    assert (local.root / "logs" / "local0" / "tinylib.log").read_text().count("building") == 1
    # One log per library a benchmark is built against.
    assert (local.root / "logs" / "local0" / "tinybench+tinylib-local.log").is_file()
    code, out = local.setup()
    assert code == 0, out
    assert f"local0: tinybench up to date (key {stamp['key']}" in out
    assert "built in" not in out and "2 up to date" in out


def test_changed_source_or_force_rebuilds(local: Local) -> None:
    assert local.setup()[0] == 0
    (local.root / "bench" / "run.sh").write_text("echo run2\n")
    code, out = local.setup()
    assert code == 0 and "tinylib up to date" in out and "tinybench built in" in out
    assert (
        local.root / "work" / "src" / "tinybench-local+tinylib-local" / "run.sh"
    ).read_text() == "echo run2\n"
    code, out = local.setup(force=True)
    assert code == 0 and out.count("built in") == 2


def test_failed_build_names_node_error_and_explanation(local: Local) -> None:
    (local.root / "lib" / "build.sh").write_text(BUILD_FAIL)
    code, out = local.setup()
    assert code == 1
    log = local.root / "logs" / "local0" / "tinylib.log"
    assert "local0: tinylib FAILED" in out and "exit code 2" in out
    assert "first error (log line" in out and "a.c:7:2: error: boom" in out
    assert "warning" not in out
    assert "known failure: tinylib needs a CUDA 12.x toolkit" in out
    assert f"log: {log}" in out and "a.c:7:2: error: boom" in log.read_text()
    assert "local0: tinybench skipped: tinylib failed on this node" in out
    assert not (local.root / "work" / "src" / "tinylib-local" / cache.STAMP_NAME).exists()


@needs_sshd
def test_ssh_nodes_sharing_a_folder_build_once(local: Local, sshd: SshServer) -> None:  # noqa: F811
    local.use_ssh(sshd, nodes=2)
    code, out = local.setup()
    assert code == 0, out
    assert out.count("tinylib built in") == 1 and out.count("tinybench built in") == 1
    assert out.count("up to date (key") == 2 and out.count("same work folder") == 2
    code, out = local.setup()
    assert code == 0 and out.count("up to date (key") == 4, out
