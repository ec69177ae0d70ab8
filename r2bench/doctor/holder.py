"""Doctor on a testbed another live sweep holds: its processes and faults are named as that
sweep's, with the advice to wait for it, never to kill them (`r2bench.testbeds.virtual.hold`).

Only a virtual testbed has a holder (its `state_dir` says where its hold file is); the sweep
that holds it runs doctor on it too, and is then told about leftovers as anyone else would be.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from r2bench.config.testbed import Testbed
from r2bench.doctor.checks import CheckResult, Status
from r2bench.testbeds.virtual.hold import Holder, live_holder

HOLDER_CHECK = "held by"
BUSY_CHECKS = ("stray processes", "active faults")
"""Checks whose failures, on a held testbed, are the holder's runs at work."""


def other_holder(testbed: Testbed) -> Holder | None:
    """The live process other than this one that holds `testbed` (None: free, or ours)."""
    if testbed.state_dir is None:
        return None
    holder = live_holder(Path(testbed.state_dir))
    return None if holder is None or holder.is_me() else holder


def wait_advice(testbed: Testbed, holder: Holder) -> str:
    """What to do on a testbed another sweep holds."""
    return (
        f"testbed {testbed.name} is in use by sweep {holder.describe()}: these are its runs; "
        "do not kill them or heal its faults: wait for it to end (`r2bench sweep "
        "--wait-testbed SECONDS` waits for it), or use another testbed (-t TESTBED.yaml)"
    )


def attribute_to_holder(testbed: Testbed, results: list[CheckResult]) -> list[CheckResult]:
    """`results`, with the busy checks' fixes pointing at the testbed's live holder (if
    another process holds it) and one failed row saying who holds it."""
    holder = other_holder(testbed)
    if holder is None or not testbed.nodes:
        return results
    advice = wait_advice(testbed, holder)
    theirs = (
        f"these belong to sweep pid {holder.pid} (results folder {holder.results or '?'}), "
        f"which holds testbed {testbed.name}: do not kill them; wait for it to end"
    )
    attributed = [
        replace(result, fix=theirs)
        if result.check in BUSY_CHECKS and result.status is Status.FAIL
        else result
        for result in results
    ]
    first = testbed.nodes[0].name
    # Busy is not ready: a sweep given this testbed with -t stops here, before its first run.
    row = CheckResult(first, HOLDER_CHECK, Status.FAIL, f"sweep pid {holder.pid}", advice)
    return [row, *attributed]
