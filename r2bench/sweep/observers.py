"""Observers: the user's own monitoring, run on the nodes beside each run of a sweep.

NCCL RAS (NCCL >= 2.24; JSON output 2.28.7, live monitoring `-m` 2.29): when `ncclras` is on a
node's PATH, the sweep starts `ncclras -m -f json` there for the length of each run (in the
background, with `R2B_RUN=<run id>` in its environment so the teardown's kill-by-run ends it)
and collects its output as `node/<node>/ncclras.json`. Reading that record is
`r2bench.parse.ras` (pure); this module is the part that talks to the nodes.
"""

from __future__ import annotations

import shlex
import tempfile
from collections.abc import Collection
from pathlib import Path
from typing import TYPE_CHECKING

from r2bench.parse.ras import RAS_FILE

if TYPE_CHECKING:
    from r2bench.nodes.pool import NodePool
    from r2bench.plan.model import PlannedRun
    from r2bench.runfolder.store import RunFolder

RAS_COMMAND = "ncclras -m -f json"
RETRY_S = 0.5  # ncclras exits when no NCCL process listens yet: try again until the job starts


def ras_start_command(run_id: str, run_dir: str, node: str, deadline_s: float) -> str:
    """Shell line that starts the RAS observer in the background on a node, if it has one."""
    out = shlex.quote(f"{run_dir}/ncclras-{node}.json")
    loop = shlex.quote(f"until {RAS_COMMAND}; do sleep {RETRY_S}; done")
    return (
        f"command -v ncclras >/dev/null 2>&1 || exit 0; mkdir -p {shlex.quote(run_dir)}; "
        f"R2B_RUN={shlex.quote(run_id)} nohup timeout {int(deadline_s) + 5} sh -c {loop} "
        f"> {out} 2>&1 < /dev/null &"
    )


def start_observers(pool: NodePool, run: PlannedRun, nodes: Collection[str]) -> None:
    """Start `ncclras -m -f json` on the run's nodes among `nodes` (those that have it)."""
    for name in (n for n in run.spec.nodes if n in nodes):
        cmd = ras_start_command(run.spec.run_id, run.run_dir, name, run.spec.deadline_s)
        try:
            pool[name].run(["sh", "-c", cmd], timeout=30, check=False)
        except Exception:  # an observer never fails a run
            continue


def collect_observers(
    pool: NodePool, run: PlannedRun, folder: RunFolder, nodes: Collection[str]
) -> None:
    """Fetch each observed node's RAS output into node/<node>/ncclras.json."""
    for name in (n for n in run.spec.nodes if n in nodes):
        remote = f"{run.run_dir}/ncclras-{name}.json"
        try:
            node = pool[name]
            if not node.run(["test", "-s", remote], timeout=30, check=False).ok:
                continue
            with tempfile.TemporaryDirectory() as tmp:
                local = Path(tmp) / RAS_FILE
                node.get(remote, local)
                folder.write_node_file(name, RAS_FILE, local.read_bytes())
        except Exception:  # an observer never fails a run
            continue
