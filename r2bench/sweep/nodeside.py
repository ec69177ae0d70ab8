"""Getting the node-side scripts (`injectors/`) onto every node, and the agents started."""

from __future__ import annotations

import hashlib
import shlex
from pathlib import Path

from r2bench import resources
from r2bench.config.testbed import Testbed
from r2bench.nodes import Node, NodeError, NodePool
from r2bench.sweep.agent import NodeAgent

DIGEST_FILE = ".digest"


def injectors_source() -> Path:
    """The injectors folder shipped with r2bench (see `r2bench.resources`)."""
    return resources.injectors_dir()


def injectors_dir(testbed: Testbed) -> str:
    """Where the injectors live on the nodes."""
    return f"{testbed.paths.work_dir}/injectors"


def own_records_script(work_dir: str) -> str:
    """A bash line printing this node's active fault records, one path a line (records live
    per node under faults/active/<node id>/, so a shared work folder shows only our own)."""
    node_sh = shlex.quote(f"{work_dir}/injectors/node.sh")
    active = shlex.quote(f"{work_dir}/faults/active")
    return f"( source {node_sh} && r2b_active_records {active} ) 2>/dev/null"


def _digest(files: list[Path]) -> str:
    sha = hashlib.sha256()
    for path in files:
        sha.update(path.name.encode() + b"\0" + path.read_bytes())
    return sha.hexdigest()[:16]


def _injector_files() -> list[Path]:
    return sorted(p for p in injectors_source().iterdir() if p.suffix == ".sh")


def injectors_current(node: Node, target: str, digest: str) -> bool:
    """Whether `target` on `node` holds the injectors of this `digest` (`_digest`)."""
    found = node.run(
        f"cat {shlex.quote(target)}/{DIGEST_FILE} 2>/dev/null", timeout=30, check=False
    )
    return found.stdout.strip() == digest


def install_injectors(node: Node, target: str) -> bool:
    """Copy the injectors to `target` on `node` unless the same set is there; True if copied.

    Files are uploaded under temporary names and renamed, so a node that shares the folder
    with another (an NFS home, the virtual testbed) never runs a half-written script."""
    files = _injector_files()
    digest = _digest(files)
    q = shlex.quote(target)
    if injectors_current(node, target, digest):
        return False
    node.run(["mkdir", "-p", target], timeout=30)
    renames = []
    for path in files:
        node.put(path, f"{target}/.{path.name}.tmp")
        renames.append(shlex.join(["mv", "-f", f".{path.name}.tmp", path.name]))
    node.run(f"cd {q} && {' && '.join(renames)} && echo {digest} > {DIGEST_FILE}", timeout=30)
    return True


def start_agents(pool: NodePool, testbed: Testbed) -> dict[str, NodeAgent]:
    """Install the injectors (node by node: shared folders) and start one agent per node."""
    target = injectors_dir(testbed)
    # Asking every node at once opens the connections in parallel; copies go node by node,
    # each checking again (a folder shared with a node before it is up to date by then).
    digest = _digest(_injector_files())
    current = pool.map(lambda node: injectors_current(node, target, digest))
    for node in pool:
        if current[node.name] is not True:
            install_injectors(node, target)
    started = pool.map(lambda node: NodeAgent(node, target).start())
    agents = {n: a for n, a in started.items() if isinstance(a, NodeAgent)}
    errors = [e for e in started.values() if isinstance(e, NodeError)]
    if errors:
        for agent in agents.values():
            agent.close()
        raise errors[0]
    return agents
