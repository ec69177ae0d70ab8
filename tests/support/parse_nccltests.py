"""What the tiers of test_parse_nccltests.py share (tests/unit, tests/integration, tests/system)."""

from __future__ import annotations

from tests.support import paths

DATA = paths.DATA / "nccl-tests"


def read(name: str) -> str:
    return (DATA / name).read_text()
