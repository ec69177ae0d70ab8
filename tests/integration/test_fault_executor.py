"""A fault may run on another host than the node whose NIC it affects (the BlueField that
carries the NIC), and a host that runs no rank never gets ranks (the r7525 testbed).

This module holds those with real processes; the same subject's other tests:
tests/unit/test_fault_executor.py (its pure tests).
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from tests.support import paths

ROOT = paths.REPO


def test_a_fault_run_elsewhere_is_recorded_on_its_nodes_clock(tmp_path: Path) -> None:
    """The BlueField's times are put on node-1's clock: the records take a fault's
    clock_offset_s as its node's (and read that node's counters with it)."""
    from r2bench.nodes.local import LocalNode
    from r2bench.plan.model import PlannedRun
    from r2bench.sweep.agent import NodeAgent
    from r2bench.sweep.faults import FaultDriver
    from tests.support.sweep_units import FILE_FAULT, fault_step

    injectors = tmp_path / "injectors"
    shutil.copytree(ROOT / "injectors", injectors)
    (injectors / "file_fault.sh").write_text(FILE_FAULT)
    state = tmp_path / "link"
    state.write_text("up\n")
    step = fault_step(injectors, state)
    moved = {"node": "node-1-bf"}
    step = step.model_copy(
        update={
            "node": "node1",
            "inject": step.inject.model_copy(update=moved),
            "revert": step.revert.model_copy(update=moved),
            "status": step.status.model_copy(update=moved),
        }
    )
    run = PlannedRun.model_construct(spec=None, run_dir="", launch=step.inject, faults=[step])
    env = {"R2B_FAULT_DIR": str(tmp_path / "faults")}
    with pytest.MonkeyPatch.context() as patch:
        for name, value in env.items():
            patch.setenv(name, value)
        agent = NodeAgent(LocalNode("node-1-bf", sudo=False), str(injectors)).start()
        try:
            # node1's clock is 5 s ahead of the controller's, the BlueField's 2 s (both
            # "measured"; here they share one clock, so the shift alone is visible)
            driver = FaultDriver(run, {"node-1-bf": agent}, {"node1": 5.0, "node-1-bf": 2.0})
            driver.arm()
            launched = time.time()
            driver.start(launched)
            time.sleep(1.2)
            driver.finish()
        finally:
            agent.close()
    assert driver.problems == [] and state.read_text().strip() == "up"
    inject = next(e for e in driver.history if e.action == "inject")
    assert inject.node == "node1" and inject.clock_offset_s == 5.0
    # applied on the BlueField's clock at launch + 0.3 (+2 s offset, shared clock here: +0),
    # recorded as node1's clock reading: + (5 - 2)
    assert inject.applied_at is not None
    assert inject.applied_at - 3.0 == pytest.approx(launched + 0.3, abs=0.2)
