"""The emulated library's control-plane gather under the real mpirun: the ranks that arrive
first wait asleep, not in MPI's busy poll that took the CPU from the ranks still computing."""

from __future__ import annotations

import ast
import os
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.needs_mpirun, pytest.mark.needs_mpi4py]

RANKS = """
import sys, time
from mpi4py import MPI
from r2bench.workloads.transport import sleeping_allgather
comm = MPI.COMM_WORLD
gather = sleeping_allgather(comm) if sys.argv[1] == "sleeping" else comm.allgather
if comm.rank == 0:
    time.sleep(1.0)  # the last rank to arrive
cpu = time.process_time()
values = gather(comm.rank * 10)
spent = comm.gather((values, time.process_time() - cpu), root=0)  # after the measurement
if comm.rank == 0:
    print(repr(spent), flush=True)
"""


def gather_cpu_s(kind: str) -> dict[int, float]:
    """Each rank's CPU seconds spent in the gather, rank 0 arriving a second late."""
    cmd = ["mpirun", "--oversubscribe", "-np", "3"]
    cmd += ["--allow-run-as-root"] if os.geteuid() == 0 else []
    proc = subprocess.run(
        [*cmd, sys.executable, "-c", RANKS, kind],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    spent = ast.literal_eval(proc.stdout.strip())
    assert [values for values, _ in spent] == [[0, 10, 20]] * 3, proc.stdout
    return {rank: seconds for rank, (_, seconds) in enumerate(spent)}


def test_early_ranks_wait_for_the_last_asleep() -> None:
    cpu = gather_cpu_s("sleeping")
    assert cpu[1] < 0.3 and cpu[2] < 0.3, cpu


def test_mpis_own_allgather_spins_the_wait_the_sleeping_one_avoids() -> None:
    """The reference: without the sleeping wait, an early rank burns the second on a core."""
    cpu = gather_cpu_s("plain")
    assert max(cpu[1], cpu[2]) > 0.5, cpu
