"""What the tiers of test_import_graph.py share (tests/unit, tests/integration, tests/system)."""

from __future__ import annotations


def within(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)
