"""How long a dead link takes to show: the expected detection time of a run (pure).

An RDMA send to a dead peer is retried by the NIC; the error (`IBV_WC_RETRY_EXC_ERR`, NCCL's
`error 12`) surfaces once the retries run out. Two models of when:

- **textbook** (the IB specification, NCCL's documentation): 4.096 us x 2^T x (R+1), T =
  `NCCL_IB_TIMEOUT` (default 20), R = `NCCL_IB_RETRY_CNT` (default 7): 34.4 s at the defaults.
- **ConnectX floor** (measured on ConnectX-6, firmware 20.43, with the ACK-timeout floor on, its
  default): T below 16 acts as 16, and each retry after the first costs twice the nominal
  timeout: t x (2 + 2 (R-1)) = 2 R t for R >= 1 (t alone for R = 0). T=20, R=7: 60.1 s
  (measured 58.5-59.8 s); any T <= 16, R=7: 3.76 s (measured 3.66 s).

A library with its own timer (R-2CCL's `NCCL_R2CC_FAILOVER_TIMEOUT_MS`) acts at whichever comes
first: the prediction is labelled **timer-bound** when its timer fires before the retries run
out, **retry-bound** when the IB error comes first (stock NCCL is always retry-bound). r2bench's
emulator keeps the textbook model; real ConnectX NICs follow the floor.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum

from r2bench.config.r2ccl import (
    IB_RETRY_CNT_DEFAULT,
    IB_RETRY_CNT_MAX,
    IB_TIMEOUT_DEFAULT,
    IB_TIMEOUT_MAX,
)

TICK_S = 4.096e-6
"""The IB local ACK timeout unit: 4.096 us x 2^T."""
CONNECTX_FLOOR_T = 16
"""Below this T, a ConnectX NIC with its ACK-timeout floor on waits as if T were 16."""


class Bound(str, Enum):
    """What bounds a run's detection (the `detect_bound` column)."""

    TIMER = "timer-bound"
    RETRY = "retry-bound"


def nominal_timeout_s(t: int) -> float:
    """One nominal ACK timeout: 4.096 us x 2^T."""
    return TICK_S * 2.0**t


def textbook_s(t: int, retries: int) -> float:
    """The textbook time to an IB error: 4.096 us x 2^T x (R+1)."""
    return nominal_timeout_s(t) * (retries + 1)


def connectx_floor_s(t: int, retries: int) -> float:
    """The time to an IB error on ConnectX with the ACK-timeout floor: T below 16 acts as 16,
    the first try and the first retry cost one timeout each, every later retry two."""
    timeout = nominal_timeout_s(max(t, CONNECTX_FLOOR_T))
    if retries <= 0:
        return timeout
    return timeout * (2 + 2 * (retries - 1))


@dataclass(frozen=True)
class DetectionPrediction:
    """A run's expected detection time under both models, and what bounds each."""

    t: int
    retries: int
    timer_s: float | None
    """The library's own failover timer (None: it has none)."""
    textbook_s: float
    floor_s: float
    textbook_bound: Bound
    floor_bound: Bound

    @property
    def basis(self) -> str:
        """What the prediction rests on, in words."""
        timer = f", failover timer {self.timer_s:g} s" if self.timer_s is not None else ""
        return f"NCCL_IB_TIMEOUT={self.t}, NCCL_IB_RETRY_CNT={self.retries}{timer}"


def _ib_setting(env: Mapping[str, str], name: str, default: int, limit: int) -> int:
    """An IB setting of the run (its default when unset or unreadable), held to its field."""
    try:
        value = int(str(env.get(name, default)).strip())
    except ValueError:
        value = default
    return min(max(value, 0), limit)


def predict(env: Mapping[str, str], timer_s: float | None = None) -> DetectionPrediction:
    """The expected detection time of a run with `env` (NCCL_IB_TIMEOUT, NCCL_IB_RETRY_CNT)
    and the library's failover timer in seconds (None, or infinite: no timer)."""
    t = _ib_setting(env, "NCCL_IB_TIMEOUT", IB_TIMEOUT_DEFAULT, IB_TIMEOUT_MAX)
    retries = _ib_setting(env, "NCCL_IB_RETRY_CNT", IB_RETRY_CNT_DEFAULT, IB_RETRY_CNT_MAX)
    timer = timer_s if timer_s is not None and math.isfinite(timer_s) else None
    book, floor = textbook_s(t, retries), connectx_floor_s(t, retries)
    return DetectionPrediction(
        t,
        retries,
        timer,
        min(book, timer) if timer is not None else book,
        min(floor, timer) if timer is not None else floor,
        _bound(book, timer),
        _bound(floor, timer),
    )


def _bound(retry_s: float, timer_s: float | None) -> Bound:
    return Bound.TIMER if timer_s is not None and timer_s < retry_s else Bound.RETRY
