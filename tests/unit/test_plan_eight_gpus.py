"""The 8-GPU experiments (2 namespace nodes x 4 GPUs, the paper's node shape) plan as they must
before a machine with 8 GPUs runs them: 4 ranks on each node, 8 in all, one GPU each, every
library and mode of the issue's matrix, the cut on a NIC every mode uses."""

from __future__ import annotations

import json
import re

import pytest

from tests.support import paths
from tests.support.cli_runner import invoke_as_main

GPU = paths.REPO / "experiments" / "gpu"


@pytest.mark.parametrize("name", ["eight-gpus.yaml", "eight-gpus-training.yaml"])
def test_each_node_runs_four_ranks(name: str) -> None:
    ran = invoke_as_main("plan", str(GPU / name), "--json")
    assert ran.exit_code == 0, ran.output
    runs = json.loads(ran.output)["runs"]
    for run in runs:
        groups = re.findall(r"-np (\d+) -H (\S+):(\d+)", run["launch"]["command"])
        assert [(n, slots) for n, _, slots in groups] == [("4", "4"), ("4", "4")]
        assert len({host for _, host, _ in groups}) == 2
        assert all(f["nic"] == "nic3" for f in run["spec"]["faults"] or [])


def test_the_collective_matrix_has_every_library_and_mode() -> None:
    ran = invoke_as_main("plan", str(GPU / "eight-gpus.yaml"), "--json")
    specs = [r["spec"] for r in json.loads(ran.output)["runs"]]
    cells = {(s["library_label"], s["scenario"]) for s in specs}
    libraries = ["stock", "vanilla", *(f"r2ccl-m{m}" for m in range(4))]
    assert cells == {(lib, sc) for lib in libraries for sc in ("none", "nic3-down-3s")}
    assert len(specs) == 13  # and the checker's self-test on stock
