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
    source: str
    """`set` (the variable), `derived` (from NCCL_IB_TIMEOUT / NCCL_IB_RETRY_CNT, f45cbcb),
    `default` (the revision's fixed default) or `off` (<= 0 where that turns it off)."""
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


# ---- the semantics of each revision -----------------------------------------------------------

PINNED_COMMIT = "f45cbcb9f75e241531f014cd17c8586988ff4cd8"
"""The commit plugin/r2ccl.yaml pins (what runs on the lent GPUs and what the emulator follows)."""
AR_STAGE2_CHUNKS_MAX = 16


@dataclass(frozen=True)
class Variable:
    """One environment variable as one revision of R-2CCL reads it."""

    name: str
    default: str | None
    """What the library does when it is unset, as text (None: unset means off)."""
    meaning: str
    same_on_all_ranks: bool = True
    """The library needs one value on every rank (f45cbcb: silently mixed; newer: rank 0's value
    wins with a WARN), so it must never be set per node."""


@dataclass(frozen=True)
class LogLine:
    """A line the library prints and what it means."""

    text: str
    """The line's fixed text (a prefix or a distinctive part of it)."""
    meaning: str


@dataclass(frozen=True)
class Revision:
    """R-2CCL's semantics at one revision: variables, modes, timeout, declared failure, logs."""

    key: str
    """Short name: `f45cbcb`, `main`."""
    described_by: str
    """Where the facts were read."""
    commits: tuple[str, ...]
    """Commits (full or abbreviated) and branch names that select this table."""
    variables: Mapping[str, Variable]
    modes: Mapping[int, str]
    timeout_default_ms: float | None
    """The failover timer when NCCL_R2CC_FAILOVER_TIMEOUT_MS is unset (None: derived from the IB
    retry settings, `derived_timeout_ms`)."""
    timeout_watches: str
    timeout_off_at_or_below_zero: bool
    declared_failure: str
    """Which NIC modes 2/3 take as failed, and what selects it."""
    wrong_data_modes: Mapping[int, str] = field(default_factory=dict)
    """Modes that return wrong results at this revision, and why."""
    log_lines: tuple[LogLine, ...] = ()
    ar_min_bytes: int | None = None
    """Below this size R2CC-AllReduce falls back to Balance (None: no such rule)."""

    def reads(self, name: str) -> bool:
        """Whether this revision reads `name` (one of its own variables)."""
        return name in self.variables

    def failover_timeout(self, env: Mapping[str, object]) -> FailoverTimeout:
        """The failover timer a run of this revision with `env` applies."""
        text = str(env.get(FAILOVER_TIMEOUT_VAR, "")).strip()
        if self.timeout_default_ms is None or not text:
            if self.timeout_default_ms is None:
                return failover_timeout(env)
            return FailoverTimeout(
                self.timeout_default_ms,
                "default",
                f"{FAILOVER_TIMEOUT_VAR} unset: {self.key}'s default",
            )
        try:
            value = float(text)
        except ValueError:
            return FailoverTimeout(
                self.timeout_default_ms, "default", f"{FAILOVER_TIMEOUT_VAR}={text} unreadable"
            )
        if not math.isfinite(value):
            return FailoverTimeout(
                self.timeout_default_ms, "default", f"{FAILOVER_TIMEOUT_VAR}={text} not finite"
            )
        if value <= 0 and self.timeout_off_at_or_below_zero:
            return FailoverTimeout(math.inf, "off", f"{FAILOVER_TIMEOUT_VAR}={text} (<= 0: off)")
        return FailoverTimeout(value, "set", f"{FAILOVER_TIMEOUT_VAR}={text}")

    def timeout_summary(self) -> str:
        """The timer's default in words, e.g. `5000 ms` or `derived (32 s at the IB defaults)`."""
        if self.timeout_default_ms is not None:
            return f"{self.timeout_default_ms:g} ms"
        default = derived_timeout_ms(IB_TIMEOUT_DEFAULT, IB_RETRY_CNT_DEFAULT) / 1000
        return f"derived from NCCL_IB_TIMEOUT/NCCL_IB_RETRY_CNT ({default:g} s at their defaults)"


def _variables(*items: Variable) -> Mapping[str, Variable]:
    return MappingProxyType({item.name: item for item in items})


_TIMEOUT_F45 = Variable(
    FAILOVER_TIMEOUT_VAR,
    None,
    "how long a receive may stall before the hot repair; unset or <= 0: derived from "
    "NCCL_IB_TIMEOUT and NCCL_IB_RETRY_CNT (32 s at their defaults)",
)
_HOT_REPAIR_LINES = (
    LogLine("OOB: Sent STEP_SYNC", "a rank detected a stalled channel and syncs its step"),
    LogLine("OOB: Broadcast HOT_REPAIR signal", "the detecting rank tells every peer"),
    LogLine("OOB: Received HOT_REPAIR signal", "a peer learns of the repair"),
    LogLine("Step-sync applied", "the channel rolled back and switched to its BACKUP connection"),
    LogLine("type=BACKUP", "init: each channel's backup connection (built in every mode)"),
    LogLine("OOB: Socket Initialized on Port", "init: the out-of-band UDP socket of a rank"),
)

F45CBCB = Revision(
    key="f45cbcb",
    described_by="R-2CCL sources at f45cbcb (the commit plugin/r2ccl.yaml pins)",
    commits=(PINNED_COMMIT,),
    variables=_variables(
        Variable(
            "R2CC_MODE",
            "0",
            "0 no simulated failure; 1 NIC 0's channels on their backup; 2 the last NIC masked "
            "off (Balance); 3 as 2 plus AllReduce+Broadcast (wrong data); 4/5 one phase of 3",
        ),
        Variable(
            "R2CC_DISCONNECTED_HCA",
            None,
            "HCA names or indices whose channels fail in software (IB transport only)",
        ),
        Variable("R2CC_DISCONNECTED_STEP", "10", "the step at which R2CC_DISCONNECTED_HCA fires"),
        _TIMEOUT_F45,
        Variable("FAILURE2_SAME_SERVER", "0", "mode 3 assumes two failed NICs on one server"),
        Variable("R2CC_FIXED_CHANNEL_SPLIT", None, "tuning switch"),
        Variable("R2CC_P2P_TEST_MODE", None, "test switch"),
        Variable("R2CC_USE_ALL_NIC", None, "tuning switch"),
        Variable("R2CC_LEVEL_1", None, "connection-level logging", same_on_all_ranks=False),
    ),
    modes=MappingProxyType(
        {
            0: "no simulated failure (backup connections built; the failure response runs)",
            1: "live migration: NIC 0's channels on their backup connection from the start",
            2: "R2CC-Balance: the last NIC's channels masked off",
            3: "R2CC-AllReduce as AllReduce on (n-1)/n plus a Broadcast (returns wrong data)",
            4: "first phase of mode 3 only (analysis)",
            5: "second phase of mode 3 only (analysis)",
        }
    ),
    timeout_default_ms=None,
    timeout_watches="receives",
    timeout_off_at_or_below_zero=False,
    declared_failure="modes 2/3 always mask the last NIC (the last two with "
    "FAILURE2_SAME_SERVER=1); R2CC_FAILED_NODE/R2CC_FAILED_HCA do not exist",
    wrong_data_modes=MappingProxyType(
        {3: "mode 3 at f45cbcb returns wrong results (fixed upstream after f45cbcb)"}
    ),
    log_lines=(
        *_HOT_REPAIR_LINES,
        LogLine("hot-repair detected, forcing R2CC_MODE=2", "the job runs as mode 2 for good"),
        LogLine("hot-repair gather complete", "the ranks agreed on the failed-channel mask"),
        LogLine("will simulate disable of device", "mode 1's simulated failure at setup"),
        LogLine("will inject failure at step", "R2CC_DISCONNECTED_HCA armed on a channel"),
    ),
)

# Commits of upstream after f45cbcb that the examples/cloudlab_r7525 facts were read at.
_MAIN_COMMITS = (
    "main",
    "master",
    "HEAD",
    "origin/main",
    "93eea782bb1bdd77464e6091f43622e25b51fcfb",
    "a8c9ec02c281e096d544d1922117224ada21f5fd",
    "43c3ea4282e8df9090f548ae748d00f3cac29a30",
    "21377c6de4f1e3261b710374f9d3a963f1d44b78",
    "24f8d9c31d08558dff71a91b8df9b7893ffb6591",
    "239fe40bcdc1d3bbd2d4bc573a74f86e413c2207",
    "cfc65e1759a4daa1aba2fd24bb5df2d31c1473dc",
    "b21d57d030b59a904129ebbeb0ec83e5b60f81ed",
    "ad4d3f0d2fa21a2aac462cf85f4f1099f4b8c063",
    "da22c17c90cccb4832e051f5cd138abe6cd4d2a5",
    "ef3248ba0ff6d277b79686893268145b605a3a60",
    "c46dcf22679ddc4e87528b7bd0897121a9165a6c",
)

MAIN = Revision(
    key="main",
    # The 5000 ms timer default is the README's: src/transport/net.cc at a5e6b81 still declares
    # NCCL_PARAM(R2CCFailoverTimeoutMs, ..., -1); upstream's own harness always sets 5000.
    described_by="upstream's README and examples/cloudlab_r7525 after f45cbcb (read 2026-11-25)",
    commits=_MAIN_COMMITS,
    variables=_variables(
        Variable(
            "R2CC_MODE",
            "0",
            "0 R2CC off (backup connections still built: not stock NCCL); 2 R2CC-Balance; "
            "3 R2CC-AllReduce",
        ),
        Variable(
            FAILOVER_TIMEOUT_VAR,
            "5000",
            "failover timer on posted sends, in ms; <= 0 turns it off",
        ),
        Variable("R2CC_FAILED_NODE", "0", "the node index of the declared failure"),
        Variable("R2CC_FAILED_HCA", None, "HCA name(s) or netDev index(es) declared failed"),
        Variable("R2CC_FAILED_NIC_COUNT", None, "how many NICs of the node are declared failed"),
        Variable("R2CC_AR_AFTER_REPAIR", "2", "mode after a real hot repair: 2 Balance, 3 AR"),
        Variable(
            "R2CC_AR_STAGE2_CHUNKS",
            "4",
            f"K, the stage-2 chunk count of R2CC-AllReduce (1-{AR_STAGE2_CHUNKS_MAX})",
        ),
        Variable("R2CC_AR_SCHEDULE", None, "stage-1 schedule (1: concurrent)"),
        Variable("R2CC_AR_MIN_BYTES", str(16 << 20), "below this, R2CC-AllReduce runs Balance"),
        Variable("R2CC_TRACE_CHANNEL", None, "R2CC_PROXY_STATE lines for one channel (-1: all)"),
        Variable("R2CC_TRACE_STALL_ITERS", None, "proxy iterations before a stall is traced"),
        Variable("R2CC_TRACE_TRANSITIONS", None, "trace every proxy state transition"),
        Variable("R2CC_TEST_CORRUPT", None, "<iter>[,nan]: corrupt one element (checker test)"),
        Variable("R2CC_USE_ALL_NIC", None, "tuning switch"),
        Variable(
            "R2CC_DISCONNECTED_HCA",
            None,
            "software failure of a NIC's channels (documented at f45cbcb; upstream's examples "
            "no longer use it)",
        ),
        Variable("R2CC_DISCONNECTED_STEP", "10", "the step at which R2CC_DISCONNECTED_HCA fires"),
    ),
    modes=MappingProxyType(
        {
            0: "R2CC off: no declared failure (backup connections still built)",
            2: "R2CC-Balance: the declared failed NIC(s) masked off",
            3: "R2CC-AllReduce on ncclCommSplit sub-communicators (Balance below "
            "R2CC_AR_MIN_BYTES, in stream capture, for nonblocking comms, avg/user ops)",
        }
    ),
    timeout_default_ms=5000.0,
    timeout_watches="posted sends",
    timeout_off_at_or_below_zero=True,
    declared_failure="R2CC_FAILED_NODE (default 0), R2CC_FAILED_HCA (names or indices), "
    "R2CC_FAILED_NIC_COUNT",
    log_lines=(
        *_HOT_REPAIR_LINES,
        LogLine("R2CC_PROXY_STATE", "a traced proxy state (R2CC_TRACE_*)"),
        LogLine("differs across ranks; adopting rank 0 value", "an R2CC variable differed"),
        LogLine("falling back to", "R2CC-AllReduce ran as Balance (one WARN)"),
    ),
    ar_min_bytes=16 << 20,
)

REVISIONS: tuple[Revision, ...] = (F45CBCB, MAIN)
"""Oldest first: the last one is the newest, used for a ref no table names."""
NEWEST = REVISIONS[-1]


@dataclass(frozen=True)
class RevisionChoice:
    """The table a ref selects, and a note when the ref was not known."""

    revision: Revision
    note: str | None = None


def revision_for(ref: str | None) -> RevisionChoice:
    """The semantics table of R-2CCL at `ref` (a commit, abbreviated or whole, or a branch).

    No ref means the pinned commit. A ref no table names gets the newest table and a note that
    says so (the caller prints it once)."""
    if ref is None or not ref.strip():
        return RevisionChoice(F45CBCB)
    wanted = ref.strip().lower()
    for revision in REVISIONS:
        for commit in revision.commits:
            known = commit.lower()
            if wanted == known or (len(wanted) >= 7 and known.startswith(wanted)):
                return RevisionChoice(revision)
    return RevisionChoice(
        NEWEST,
        f"R-2CCL ref '{ref}' is not one r2bench has read: its semantics are taken as "
        f"upstream's newest known ({NEWEST.key}: {NEWEST.described_by})",
    )


def failover_timeout_at(env: Mapping[str, object], ref: str | None) -> FailoverTimeout:
    """The failover timer of a run of R-2CCL at `ref` (None: the pinned commit) with `env`:
    the derived 32 s at f45cbcb, 5000 ms at upstream's main."""
    return revision_for(ref).revision.failover_timeout(env)
