"""One holder per virtual testbed (r2bench.testbeds.virtual.hold): a live holder is refused with its pid
and results folder, a dead one is taken over, and doctor and `testbed down` name the holder
instead of telling anyone to kill its runs or remove its testbed.

This module holds its pure tests; the same subject's other tests:
tests/integration/test_testbed_hold.py (those with real processes).
"""

from __future__ import annotations

import pytest
from rich.console import Console

from r2bench.commands.doctor import doctor_command


def test_doctor_with_no_testbed_says_the_embedded_one_is_not_up(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = doctor_command(None, False, Console(), names=("r2b-never-up",))
    assert code == 1
    said = " ".join(capsys.readouterr().err.split())
    assert "the embedded virtual testbed r2b-never-up is not up" in said
    assert "r2bench sweep EXPERIMENT.yaml" in said and "--keep-testbed" in said
    assert "-t TESTBED.yaml" in said
