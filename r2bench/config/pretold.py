"""Was the library told which NIC would fail? (pure)

R-2CCL reads a declared failure (`R2CC_FAILED_NODE`, `R2CC_FAILED_HCA`, `R2CC_FAILED_NIC_COUNT`)
and then runs as if that NIC were gone. Its artifact's tests 01, 02 and 08 set them while they
also cut the NIC for real; test 09 runs blind. A result under a real fault says which: a
library told in advance had nothing to detect.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum

DECLARING_VARIABLES = ("R2CC_FAILED_NODE", "R2CC_FAILED_HCA", "R2CC_FAILED_NIC_COUNT")


class Told(str, Enum):
    """The `told` column."""

    PRE_TOLD = "pre-told"
    """A real fault, and the library was told of it in advance."""
    BLIND = "blind"
    """A real fault, and the library was told nothing."""
    DECLARED = "declared"
    """No real fault: a failure declared to the library only (its degraded schedule measured)."""
    NONE = ""
    """Neither a fault nor a declared failure."""


def declared(env: Mapping[str, str]) -> list[str]:
    """The declaring variables a run sets (non-empty), as NAME=value."""
    return [
        f"{name}={env[name]}"
        for name in DECLARING_VARIABLES
        if (env.get(name) or "").strip() not in ("",)
    ]


def told(env: Mapping[str, str], real_fault: bool) -> Told:
    """Whether a run was pre-told, blind, a declared failure, or none of these."""
    if real_fault:
        return Told.PRE_TOLD if declared(env) else Told.BLIND
    return Told.DECLARED if declared(env) else Told.NONE
