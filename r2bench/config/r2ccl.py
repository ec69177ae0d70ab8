"""What R-2CCL's code does with its environment (pure facts), per revision of the library.

One home for the library's semantics that the plan checks, the emulator and the recovery metrics
share, so that they cannot disagree. The library changed a lot after the commit r2bench pins
(f45cbcb), so the facts are kept per revision (`REVISIONS`, chosen from a recipe's ref by
`revision_for`); the module-level helpers below the table describe f45cbcb, which is what the
emulator follows and what runs on the lent GPUs:
- the failover timeout is ``NCCL_R2CC_FAILOVER_TIMEOUT_MS`` (declared with NCCL_PARAM, which adds
  the ``NCCL_`` prefix); unset, f45cbcb derives it from the IB retry settings (32 s), upstream's
  main uses 5000 ms;
- the failure response (hot repair onto the channel's backup connection, on NIC ``netDev XOR 1``)
  runs in every mode; modes 1-3 only *simulate* a NIC that failed before the job started;
- ``R2CC_DISCONNECTED_HCA`` is injected by the IB transport only, at ``R2CC_DISCONNECTED_STEP``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

FAILOVER_TIMEOUT_VAR = "NCCL_R2CC_FAILOVER_TIMEOUT_MS"
# The bare name looks right but is never read: NCCL_PARAM prepends "NCCL_".
IGNORED_TIMEOUT_VAR = FAILOVER_TIMEOUT_VAR.removeprefix("NCCL_")
IB_TIMEOUT_DEFAULT = 20
IB_RETRY_CNT_DEFAULT = 7
IB_TIMEOUT_MAX = 31
"""The IB local ACK timeout is a 5-bit field: NCCL_IB_TIMEOUT above 31 means nothing to the
NIC, and 2^(x-20) of a larger x overflows a float (NCCL_IB_TIMEOUT=5000 once killed `import`)."""
IB_RETRY_CNT_MAX = 7
"""The IB retry count is a 3-bit field."""
DISCONNECTED_STEP_DEFAULT = 10
# R2CC_MODE after a hot repair, from the next collective on, for the communicator's life.
MODE_AFTER_REPAIR = 2


# R2CC_DISCONNECTED_HCA values that name no device (the variable is then off).
NO_DEVICE = frozenset({"", "none", "-1"})


def arms_software_fault(value: object) -> bool:
    """Whether R2CC_DISCONNECTED_HCA=`value` names a device to fail."""
    return str(value).strip().lower() not in NO_DEVICE


R2CC_PREFIXES = ("R2CC_", "NCCL_R2CC_")
# R-2CCL's variables outside those prefixes.
R2CC_OTHERS = frozenset({"FAILURE2_SAME_SERVER"})


def is_r2cc_variable(name: str) -> bool:
    """Whether `name` is one of R-2CCL's own variables (stock NCCL reads none of them)."""
    return name.startswith(R2CC_PREFIXES) or name in R2CC_OTHERS


@dataclass(frozen=True)
class FailoverTimeout:
    """The receive-stall timeout R-2CCL applies, and where it came from."""

    ms: float
    source: str  # "set" (the variable) or "derived" (from NCCL_IB_TIMEOUT / NCCL_IB_RETRY_CNT)
    basis: str


def _int_env(env: Mapping[str, object], name: str, default: int) -> int:
    try:
        return int(str(env[name]).strip())
    except (KeyError, ValueError):
        return default


def derived_timeout_ms(ib_timeout: int, retry_cnt: int) -> float:
    """R-2CCL's default at f45cbcb: 2^(IB_TIMEOUT-20) x 4 x (RETRY_CNT+1) s; the factor never
    goes below 1. Both inputs are held to the range of their IB fields (timeout 0-31, retries
    0-7), so any value a user writes gives a finite number."""
    ib_timeout = min(max(ib_timeout, 0), IB_TIMEOUT_MAX)
    retry_cnt = min(max(retry_cnt, 0), IB_RETRY_CNT_MAX)
    factor = max(2.0 ** (ib_timeout - IB_TIMEOUT_DEFAULT), 1.0)
    return factor * 4.0 * (retry_cnt + 1) * 1000.0


def failover_timeout(env: Mapping[str, object]) -> FailoverTimeout:
    """The failover timeout a run of R-2CCL with `env` waits before its hot repair."""
    text = str(env.get(FAILOVER_TIMEOUT_VAR, "")).strip()
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if value > 0 and math.isfinite(value):
        return FailoverTimeout(value, "set", f"{FAILOVER_TIMEOUT_VAR}={text}")
    ib_timeout = _int_env(env, "NCCL_IB_TIMEOUT", IB_TIMEOUT_DEFAULT)
    retry = _int_env(env, "NCCL_IB_RETRY_CNT", IB_RETRY_CNT_DEFAULT)
    return FailoverTimeout(
        derived_timeout_ms(ib_timeout, retry),
        "derived",
        f"{FAILOVER_TIMEOUT_VAR} unset: derived from NCCL_IB_TIMEOUT={ib_timeout}, "
        f"NCCL_IB_RETRY_CNT={retry}",
    )


def backup_nic(nic: int, count: int) -> int:
    """The NIC holding a channel's backup connection: NICs pair up 0-1, 2-3, ...; with an odd
    count the last NIC backs itself up."""
    partner = nic ^ 1
    return partner if partner < count else nic


def simulated_failed_nics(mode: int, count: int, two_failures: bool = False) -> frozenset[int]:
    """NICs that R2CC_MODE 2/3 mask off from the first collective (a failure that did not happen):
    the last NIC, or the last two with FAILURE2_SAME_SERVER=1. Mode 1 masks nothing: it moves
    NIC 0's channels onto their backup instead (see `simulated_migrated_nics`)."""
    if mode not in (2, 3) or count < 2:
        return frozenset()
    failed = 2 if two_failures and count > 2 else 1
    return frozenset(range(count - failed, count))


def simulated_migrated_nics(mode: int, count: int) -> frozenset[int]:
    """NICs whose channels R2CC_MODE 1 puts on their backup connection from setup (NIC 0)."""
    return frozenset({0}) if mode == 1 and count > 1 else frozenset()
