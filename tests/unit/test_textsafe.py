"""Terminal sizes from the environment (COLUMNS, LINES): odd values are dropped, never a crash."""

from __future__ import annotations

import pytest

from r2bench.textsafe import prepare_streams


@pytest.mark.parametrize(
    "value", ["\u00b2", "\u0668\u0660", pytest.param("9" * 5001, id="5001-digits"), "99999999999"]
)
def test_odd_terminal_sizes_are_dropped_not_a_crash(value: str) -> None:
    environ = {"COLUMNS": value, "LINES": value}
    prepare_streams(environ)
    assert environ == {}


def test_plain_terminal_sizes_are_kept() -> None:
    environ = {"COLUMNS": "120", "LINES": " 40 "}
    prepare_streams(environ)
    assert environ == {"COLUMNS": "120", "LINES": " 40 "}
