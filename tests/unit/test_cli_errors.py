"""No command ends in a traceback on bad paths and folders: one line, exit 2.

This module holds its pure tests; the same subject's other tests:
tests/integration/test_cli_errors.py (those with real processes).
"""

from __future__ import annotations

from r2bench.commands.failures import debug_requested


def test_debug_is_read_from_the_root_options_only() -> None:
    assert debug_requested(["--debug", "plan"])
    assert debug_requested(["-v", "--debug", "plan"])
    assert not debug_requested(["plan", "x.yaml", "--debug"])
    assert not debug_requested([])
