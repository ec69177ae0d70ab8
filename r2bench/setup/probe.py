"""What a node offers for building: CUDA, MPI, GPU architectures, cores, and which filesystem
holds the work folder. CUDA's folder is the one nvcc itself reports (`TOP` of a dry run), so
wrapper scripts on PATH are seen through. One bash script, one round trip; `parse_facts` is pure.

Nodes that see the same work folder (NFS, or the virtual testbed's namespaces on one host) share
one build: the script links a random id into `<work_dir>/.r2bench-fsid` once (an atomic `ln`), so
nodes that read the same id share a filesystem.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from r2bench.config.testbed import Paths
from r2bench.nodes.base import Node

PROBE_TIMEOUT_S = 60.0
NONE = "none"
_RELEASE = re.compile(r"release\s+([0-9]+(?:\.[0-9]+)*)")

_SCRIPT = r"""
cuda=$R2B_CUDA_HOME
if [ -z "$cuda" ]; then
  if n=$(command -v nvcc 2>/dev/null); then
    top=$("$n" --dryrun -v r2b.cu 2>&1 | sed -n 's/^#\$ TOP=//p' | head -1)
    { [ -n "$top" ] && cuda=$(cd "$top" 2>/dev/null && pwd -P); } || cuda=$(dirname "$(dirname "$(readlink -f "$n")")")
  elif [ -x /usr/local/cuda/bin/nvcc ]; then cuda=/usr/local/cuda; fi
fi
echo "cuda_home=$cuda"
echo "cuda_version=$("$cuda/bin/nvcc" --version 2>/dev/null | grep -o 'release [0-9.]*, V[0-9.]*' | head -1)"
mpi=$R2B_MPI_HOME
if [ -z "$mpi" ] && command -v mpicc >/dev/null 2>&1; then
  inc=$(mpicc --showme:incdirs 2>/dev/null | tr ' ' '\n' | head -1)
  [ -n "$inc" ] && mpi=$(dirname "$inc")
fi
deb=/usr/lib/x86_64-linux-gnu/openmpi
[ -z "$mpi" ] && [ -e "$deb/include/mpi.h" ] && mpi=$deb
echo "mpi_home=$mpi"
run=mpirun; [ -n "$mpi" ] && [ -x "$mpi/bin/mpirun" ] && run=$mpi/bin/mpirun
echo "mpi_version=$("$run" --version 2>/dev/null | head -1)"
echo "gpu_archs=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | tr -d ' .' | tr '\n' ' ')"
echo "nproc=$(nproc)"
mkdir -p "$R2B_WORK" && u=$(cat /proc/sys/kernel/random/uuid) && echo "$u" >"$R2B_WORK/.fsid.$u" \
  && { ln "$R2B_WORK/.fsid.$u" "$R2B_WORK/.r2bench-fsid" 2>/dev/null; rm -f "$R2B_WORK/.fsid.$u"; }
echo "fsid=$(cat "$R2B_WORK/.r2bench-fsid" 2>/dev/null)"
"""


@dataclass(frozen=True)
class NodeFacts:
    """The build environment of one node (empty strings where nothing was found)."""

    node: str
    cuda_home: str = ""
    cuda_version: str = ""
    mpi_home: str = ""
    mpi_version: str = ""
    gpu_archs: tuple[str, ...] = ()
    nproc: int | None = None
    fsid: str = ""

    @property
    def gpu_arch(self) -> str | None:
        """The compute capability to build for (the first GPU's; None without GPUs)."""
        return self.gpu_archs[0] if self.gpu_archs else None

    @property
    def cuda_release(self) -> tuple[int, ...] | None:
        """The CUDA toolkit version, e.g. (13, 0) from 'release 13.0, V13.0.88' (None: unknown)."""
        match = _RELEASE.search(self.cuda_version)
        return tuple(int(part) for part in match.group(1).split(".")) if match else None


def probe_command(paths: Paths) -> str:
    """The shell line that prints a node's facts as key=value lines."""
    env = {
        "R2B_CUDA_HOME": paths.cuda_home or "",
        "R2B_MPI_HOME": paths.mpi_home or "",
        "R2B_WORK": paths.work_dir,
    }
    assignments = " ".join(f"{key}={shlex.quote(value)}" for key, value in env.items())
    return f"{assignments} bash -c {shlex.quote(_SCRIPT)}"


def parse_facts(node: str, text: str) -> NodeFacts:
    """Facts from the probe's output; unknown or missing keys are left empty."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            values[key.strip()] = value.strip()
    nproc = values.get("nproc", "")
    return NodeFacts(
        node=node,
        cuda_home=values.get("cuda_home", ""),
        cuda_version=values.get("cuda_version", ""),
        mpi_home=values.get("mpi_home", ""),
        mpi_version=values.get("mpi_version", ""),
        gpu_archs=tuple(dict.fromkeys(values.get("gpu_archs", "").split())),
        nproc=int(nproc) if nproc.isdigit() else None,
        fsid=values.get("fsid", ""),
    )


def probe(node: Node, paths: Paths) -> NodeFacts:
    """Run the probe on `node` (raises NodeError when the node cannot run it)."""
    result = node.run(probe_command(paths), timeout=PROBE_TIMEOUT_S)
    return parse_facts(node.name, result.stdout)
