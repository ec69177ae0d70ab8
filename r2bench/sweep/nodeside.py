"""Getting the node-side scripts (`injectors/`) onto every node, and the agents started."""

from __future__ import annotations

import hashlib
import secrets
import shlex
import tarfile
import tempfile
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
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

    One tar file goes over (a copy per script costs a round trip each), is unpacked into a
    temporary folder beside the scripts and each script renamed into place, so a node that
    shares the folder with another (an NFS home, the virtual testbed) never runs a
    half-written script."""
    files = _injector_files()
    digest = _digest(files)
    if injectors_current(node, target, digest):
        return False
    staged = f"/tmp/.r2bench-injectors-{digest}-{secrets.token_hex(4)}.tar"
    with tempfile.TemporaryDirectory(prefix="r2bench-injectors-") as tmp:
        bundle = Path(tmp) / "injectors.tar"
        _write_bundle(files, bundle)
        node.put(bundle, staged)
    node.run(_unpack_script(target, staged, digest), timeout=30)
    return True


def _write_bundle(files: list[Path], bundle: Path) -> None:
    """A tar of the scripts, owned by nobody in particular (root unpacks it as its own)."""
    with tarfile.open(bundle, "w") as tar:
        for path in files:
            info = tar.gettarinfo(str(path), arcname=path.name)
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mode = 0o644
            with path.open("rb") as data:
                tar.addfile(info, data)


def _unpack_script(target: str, staged: str, digest: str) -> str:
    """Unpack `staged` into `target` script by script (each a rename), then stamp it."""
    q, tar = shlex.quote(target), shlex.quote(staged)
    return (
        f'trap \'rm -f {tar}; [ -z "$d" ] || rm -rf "$d"\' EXIT; set -e; '
        f"mkdir -p {q}; cd {q}; d=$(mktemp -d .unpack.XXXXXX); "
        f'tar -xf {tar} -C "$d" --no-same-owner; '
        f'for f in "$d"/*.sh; do mv -f "$f" .; done; '
        f"echo {digest} > {DIGEST_FILE}"
    )


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
        close_agents(agents)
        raise errors[0]
    return agents


def on_every_agent(
    agents: Mapping[str, NodeAgent], operation: Callable[[str, NodeAgent], object]
) -> None:
    """`operation(name, agent)` on every node's agent at once (each waits on its node); the
    first error is raised once all have ended."""
    with ThreadPoolExecutor(max_workers=len(agents) or 1) as threads:
        done = [threads.submit(operation, name, agent) for name, agent in agents.items()]
    for future in done:
        future.result()


def close_agents(agents: Mapping[str, NodeAgent]) -> None:
    """Ask every agent to quit and wait for them all at once."""
    on_every_agent(agents, lambda _, agent: agent.close())
