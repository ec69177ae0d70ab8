"""Was failover possible at all? A per-library check from a run's own log and settings (pure).

A failover claim is only worth scoring where the library had somewhere to fail over to:

- NCCL's IB port failover (`NCCL_IB_RESILIENCY_PORT_FAILOVER=1`, NCCL >= 2.29.7) acts only
  inside a fused virtual device (`NET/IB : Made virtual device [..] name=mlx5_1+mlx5_3 ...
  ndevs=2`). On a node with one port per NIC every communicator logs `Resiliency is enabled on
  a send|recv communicator (...) with a single device. This does not make sense since there is
  no other device to fail over to.`; NCCL refuses to fuse NICs of different NUMA domains
  (`Fusing NET devices from different NUMA domains is not supported`).
- R-2CCL extends the net-plugin table in place: an external net plugin must not be loaded
  (`NCCL_NET_PLUGIN=none`; NCCL logs `NET/Plugin: Loaded net plugin ...` when one is). Its
  variables must agree on every rank (`WARN R2CC parameter X differs across ranks; adopting
  rank 0 value`: the run did not run what was asked). It needs another data NIC on the node
  (one NIC: nothing to move to) and RDMA (over NET/Socket it never fails over).

`armed(...)` says ARMED (a positive sign, nothing against), UNARMED (a sign failover could not
have worked, with the line that says so), UNKNOWN (the log says neither: NCCL_DEBUG=INFO
prints the lines) or NOT_CLAIMED (the run's library has no failover switched on). A run that
is not ARMED is never counted as a failover failure or success.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum


class Armed(str, Enum):
    """Whether a run's failover could have worked (the `armed` column)."""

    ARMED = "armed"
    UNARMED = "unarmed"
    UNKNOWN = "unknown"
    NOT_CLAIMED = "not_claimed"


class Failover(str, Enum):
    """Which failover a run's library has switched on."""

    NCCL_PORT = "nccl_port_failover"
    R2CCL = "r2ccl"
    NONE = "none"


SINGLE_DEVICE_RE = re.compile(r"Resiliency is enabled on a \w+ communicator.*with a single device")
CROSS_NUMA_RE = re.compile(r"Fusing NET devices from different NUMA domains is not supported")
FUSED_RE = re.compile(r"Made virtual device \[\d+\] name=(?P<name>\S+).*?ndevs=(?P<ndevs>\d+)")
NO_DEVICE_LEFT_RE = re.compile(r"No functional devices left")
PLUGIN_LOADED_RE = re.compile(r"NET/Plugin\s*:?\s*Loaded net plugin (?P<name>\S+)")
DIFFERS_RE = re.compile(r"R2CC parameter (?P<name>\S+) differs across ranks")
R2CC_BACKUP_RE = re.compile(r"type=BACKUP|R2CC|OOB: Socket Initialized")

R2CCL_LIKE_RECIPES = ("emulated-lib",)
"""Recipes of other names that behave as R-2CCL (the emulator's library side hot-repairs)."""
_MARKERS = (
    b"Resiliency is enabled",
    b"different NUMA domains",
    b"Made virtual device",
    b"No functional devices left",
    b"Loaded net plugin",
    b"differs across ranks",
    b"type=BACKUP",
)
"""Byte markers of the lines this check reads: a log reader keeps only lines with one."""
MAX_KEPT_LINES = 64
"""Lines kept per run: a few of each kind say all there is (a communicator each repeats them)."""


def is_failover_line(line: bytes) -> bool:
    """Whether a raw log line is one this check reads (cheap: a reader calls it on every line)."""
    return any(marker in line for marker in _MARKERS)


@dataclass(frozen=True)
class ArmedCheck:
    """The answer and the lines (or settings) it rests on."""

    state: Armed
    failover: Failover
    reasons: tuple[str, ...] = field(default=())

    @property
    def text(self) -> str:
        """The reasons joined for a table cell."""
        return "; ".join(self.reasons)


def failover_of(library_recipe: str | None, env: Mapping[str, str]) -> Failover:
    """Which failover a run has on: R-2CCL's (its recipe is an R-2CCL one; it runs in every
    mode), NCCL's port failover (`NCCL_IB_RESILIENCY_PORT_FAILOVER` set to a non-zero value),
    or none."""
    name = (library_recipe or "").lower()
    if "r2ccl" in name or name in R2CCL_LIKE_RECIPES:
        return Failover.R2CCL
    if (env.get("NCCL_IB_RESILIENCY_PORT_FAILOVER") or "0").strip() not in ("", "0"):
        return Failover.NCCL_PORT
    return Failover.NONE


def armed(
    failover: Failover,
    lines: Iterable[str],
    env: Mapping[str, str],
    *,
    data_nics: int | None = None,
    transport: str | None = None,
) -> ArmedCheck:
    """Could the run's failover have worked? From its log `lines` (those `is_failover_line`
    keeps will do), its settings, its node's data NIC count and the transport NCCL set up."""
    if failover is Failover.NONE:
        return ArmedCheck(Armed.NOT_CLAIMED, failover, ("no failover switched on",))
    kept = list(lines)
    if failover is Failover.NCCL_PORT:
        return _nccl_port(kept)
    return _r2ccl(kept, env, data_nics, transport)


def _nccl_port(lines: list[str]) -> ArmedCheck:
    against = _found(lines, SINGLE_DEVICE_RE, 1) + _found(lines, CROSS_NUMA_RE, 1)
    fused = [m for line in lines if (m := FUSED_RE.search(line))]
    if against:
        return ArmedCheck(Armed.UNARMED, Failover.NCCL_PORT, tuple(against))
    multi = [m for m in fused if int(m.group("ndevs")) >= 2]
    if multi:
        names = sorted({m.group("name") for m in multi})
        return ArmedCheck(Armed.ARMED, Failover.NCCL_PORT, (f"fused device {', '.join(names)}",))
    if fused:
        return ArmedCheck(
            Armed.UNARMED, Failover.NCCL_PORT, ("every virtual device has a single port",)
        )
    return ArmedCheck(
        Armed.UNKNOWN,
        Failover.NCCL_PORT,
        ("no virtual-device or resiliency line in the log (NCCL_DEBUG=INFO prints them)",),
    )


def _r2ccl(
    lines: list[str], env: Mapping[str, str], data_nics: int | None, transport: str | None
) -> ArmedCheck:
    against: list[str] = []
    plugin = (env.get("NCCL_NET_PLUGIN") or "").strip()
    if plugin and plugin.lower() != "none":
        against.append(f"NCCL_NET_PLUGIN={plugin}: R-2CCL needs none (it extends the table)")
    against += _found(lines, PLUGIN_LOADED_RE, 1) + _found(lines, DIFFERS_RE, 2)
    if data_nics is not None and data_nics < 2:
        against.append(f"{data_nics} data NIC per node: no other NIC to move to")
    if transport and "NET/Socket" in transport and "NET/IB" not in transport:
        against.append("NET/Socket: R-2CCL fails over only over RDMA (NET/IB)")
    if against:
        return ArmedCheck(Armed.UNARMED, Failover.R2CCL, tuple(against))
    if any("type=BACKUP" in line for line in lines):
        return ArmedCheck(Armed.ARMED, Failover.R2CCL, ("backup connections built",))
    return ArmedCheck(
        Armed.UNKNOWN,
        Failover.R2CCL,
        ("no backup connection line in the log (NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=R2CC)",),
    )


def _found(lines: list[str], pattern: re.Pattern[str], most: int) -> list[str]:
    """The first `most` lines that match, each quoted from the match on (the message, not
    the host and pid prefix)."""
    quotes = []
    for line in lines:
        match = pattern.search(line)
        if match is not None:
            quotes.append(_quote(line[match.start() :]))
            if len(quotes) == most:
                break
    return quotes


def _quote(text: str, limit: int = 160) -> str:
    """A log message as a reason: stripped, and cut to fit a table cell."""
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 3] + "..."
