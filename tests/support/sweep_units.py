"""What the tiers of test_sweep_units.py share (tests/unit, tests/integration, tests/system)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from r2bench.plan.model import FaultStep, NodeCommand
from tests.support import paths

ROOT = paths.REPO

FILE_FAULT = r"""#!/usr/bin/env bash
# Test-only kind: the "link" is the file --state; down = it holds "down".
KIND=file_fault
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
kind_validate() { need state; }
kind_describe() { echo "state=${OPT[state]}"; }
is_down() { [[ $(cat "${OPT[state]}" 2>/dev/null) == down ]]; }
kind_precheck() { ! is_down || die "already down"; }
kind_inject() { echo down >"${OPT[state]}" && mark_applied && is_down; }
kind_revert() { echo up >"${OPT[state]}"; }
kind_status() { if is_down; then echo active; else echo inactive; fi; }
main "$@"
"""


@pytest.fixture
def injectors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the real injectors plus the test kind; fault records under tmp_path."""
    target = tmp_path / "injectors"
    shutil.copytree(ROOT / "injectors", target)
    (target / "file_fault.sh").write_text(FILE_FAULT)
    monkeypatch.setenv("R2B_FAULT_DIR", str(tmp_path / "faults"))
    return target


def fault_step(injectors: Path, state: Path, **overrides: object) -> FaultStep:
    """A test-kind fault step; `tag` (default t0) names it in its commands too."""
    tag = str(overrides.get("tag", "t0"))

    def command(action: str, *extra: str) -> NodeCommand:
        argv = ["bash", f"{injectors}/file_fault.sh", action, "--tag", tag, *extra]
        return NodeCommand(
            node="node1", command=" ".join([*argv, "--state", str(state)]), root=True
        )

    fields: dict[str, object] = {
        "index": 0,
        "kind": "file_fault",
        "node": "node1",
        "nic": "nic1",
        "tag": tag,
        "inject_after_s": 0.3,
        "since": "launch",
        "heal_after_s": 0.6,
        "lease_s": 30.0,
        "inject": command("inject", "--lease-s", "30"),
        "revert": command("revert"),
        "status": command("status"),
    }
    fields.update(overrides)
    return FaultStep.model_validate(fields)
