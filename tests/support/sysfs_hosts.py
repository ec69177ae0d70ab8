"""Discovery and preflight run in bash on a sysfs tree, as a node runs them (R2B_SYSFS pointing
at the tree): what tests/integration/test_ib_hosts.py (trees written from facts) and
test_ib_captured_hosts.py (trees captured from hosts) share."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from r2bench.config.testbed import Node as NodeModel
from r2bench.sweep.preflight import node_check_script
from r2bench.testbeds.discover import SCRIPT, Discovered, parse_discovery

QUIET_TOOLS = ("ip", "nvidia-smi")
"""What the discovery script asks besides sysfs (addresses and the default route; GPUs)."""


def run_bash(script: str, sysfs: Path, tools: Path | None = None) -> str:
    """`script`'s output, run by bash with R2B_SYSFS=`sysfs`; `tools` (a folder) comes first
    in PATH."""
    path = "/usr/bin:/bin" if tools is None else f"{tools}:/usr/bin:/bin"
    env = {**os.environ, "R2B_SYSFS": str(sysfs), "PATH": path}
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env,
                          timeout=30)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


def quiet_tools(folder: Path) -> Path:
    """A folder of stand-ins for `ip` and `nvidia-smi` that answer nothing: the discovery of a
    tree then tells only what the tree holds, whatever interfaces, routes and GPUs the machine
    running the test has (a captured host's `eth0` is likely this machine's name too)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in QUIET_TOOLS:
        tool = folder / name
        tool.write_text("#!/bin/sh\nexit 0\n")
        tool.chmod(0o755)
    return folder


def discover_tree(sysfs: Path, tools: Path | None = None) -> Discovered:
    return parse_discovery(run_bash(SCRIPT, sysfs, tools))


def node(nics: Sequence[Mapping[str, object]]) -> NodeModel:
    return NodeModel.model_validate({"name": "n", "address": "10.0.0.1", "nics": list(nics)})


def preflight_problems(nics: Sequence[Mapping[str, object]], sysfs: Path) -> list[str]:
    """The `problem:` lines preflight prints for a node with these NICs."""
    script = node_check_script(node(nics), "/nonexistent-work-dir")
    return [line for line in run_bash(script, sysfs).splitlines() if "problem" in line]
