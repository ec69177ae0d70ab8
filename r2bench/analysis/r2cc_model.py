"""R-2CCL's performance model: how much longer an AllReduce takes with part of one node's
bandwidth gone, as the paper models it and upstream's artifact README derives it (pure).

One node loses a share X of its bandwidth B (one NIC of three: X = 1/3). With n ranks in the
ring and per-rank data D, a healthy ring AllReduce takes T_nf = 2(n-1)/n * D/B.

- **R2CC-Balance** (R2CC_MODE 2) spreads the whole ring over the node's remaining NICs:
  T/T_nf = 1/(1-X).
- **R2CC-AllReduce** (R2CC_MODE 3) runs a global AllReduce on (1-X)D alongside a partial
  AllReduce of the healthy nodes on XD, then broadcasts XD back to the degraded node (stage 2).
  With the partial AllReduce hidden behind the global one (as on upstream's testbed), and
  stage 2 run as K pipelined chunks (`R2CC_AR_STAGE2_CHUNKS`, default 4), which adds one chunk:
  T/T_nf = 1 + (1 + 1/K) * n X / (2 (n-1) (1-X)); the paper's 1 + nX/(2(n-1)(1-X)) as K grows.
  Below `R2CC_AR_MIN_BYTES` (16 MiB) R-2CCL runs Balance instead.

At n = 6, X = 1/3: Balance 1.5, R2CC-AllReduce 1.375 at K = 4 (1.6, 1.45, 1.3375, 1.31875 at
K = 1, 2, 8, 16). A measurement more than `FLAG_ABOVE` (5 %) off its prediction is flagged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import median

from r2bench.config.r2ccl import AR_STAGE2_CHUNKS_MAX, MAIN

DEFAULT_K = int(str(MAIN.variables["R2CC_AR_STAGE2_CHUNKS"].default))
"""R2CC_AR_STAGE2_CHUNKS when unset (4: upstream's semantics table, config/r2ccl.py)."""
K_MAX = AR_STAGE2_CHUNKS_MAX
AR_MIN_BYTES: int = MAIN.ar_min_bytes if MAIN.ar_min_bytes is not None else 0
"""R2CC_AR_MIN_BYTES: below it R2CC-AllReduce falls back to Balance (16 MiB)."""
FLAG_ABOVE = 0.05
"""A measured T/T_nf further than this share from its prediction is flagged."""
BALANCE_MODE = "2"
ALLREDUCE_MODE = "3"
HEALTHY_MODE = "0"


def _check(n: int, x: float, k: int | None = None) -> None:
    if n < 2:
        raise ValueError(f"n = {n}: the ring needs at least 2 ranks")
    if not 0.0 <= x < 1.0:
        raise ValueError(f"X = {x}: the failed share of a node's bandwidth must be in [0, 1)")
    if k is not None and not 1 <= k <= K_MAX:
        raise ValueError(f"K = {k}: R2CC_AR_STAGE2_CHUNKS must be 1 to {K_MAX}")


def balance_ratio(x: float) -> float:
    """T/T_nf of R2CC-Balance with a share `x` of one node's bandwidth failed: 1/(1-X)."""
    _check(2, x)
    return 1.0 / (1.0 - x)


def allreduce_ratio(n: int, x: float, k: int | None = DEFAULT_K) -> float:
    """T/T_nf of R2CC-AllReduce: 1 + (1 + 1/K) n X / (2 (n-1) (1-X)); `k` None gives the
    paper's K -> infinity limit 1 + n X / (2 (n-1) (1-X))."""
    _check(n, x, k)
    chunks = 1.0 if k is None else 1.0 + 1.0 / k
    return 1.0 + chunks * n * x / (2.0 * (n - 1) * (1.0 - x))


@dataclass(frozen=True)
class Prediction:
    """What the model predicts for one run's settings, and from what."""

    ratio: float
    schedule: str  # "healthy", "R2CC-Balance", "R2CC-AllReduce"
    n: int
    x: float
    k: int | None
    note: str = ""


def predict(
    mode: str, n: int, x: float, k: int | None = None, size_bytes: int | None = None
) -> Prediction | None:
    """T/T_nf for a run of R2CC_MODE `mode` (0 healthy: 1; 2 Balance; 3 R2CC-AllReduce, or
    Balance below AR_MIN_BYTES); None for another mode (the model says nothing of it)."""
    mode = mode.strip()
    if mode == HEALTHY_MODE:
        return Prediction(1.0, "healthy", n, x, None)
    if mode == BALANCE_MODE:
        return Prediction(balance_ratio(x), "R2CC-Balance", n, x, None)
    if mode != ALLREDUCE_MODE:
        return None
    if size_bytes is not None and size_bytes < AR_MIN_BYTES:
        note = f"below R2CC_AR_MIN_BYTES ({AR_MIN_BYTES} B) R2CC-AllReduce runs Balance"
        return Prediction(balance_ratio(x), "R2CC-Balance", n, x, None, note)
    kk = DEFAULT_K if k is None else k
    return Prediction(allreduce_ratio(n, x, kk), "R2CC-AllReduce", n, x, kk)


def failed_share(env: Mapping[str, str]) -> float | None:
    """X from a run's settings: the NICs declared failed (`R2CC_FAILED_NIC_COUNT`, else the
    entries of `R2CC_FAILED_HCA`) over the NICs NCCL uses (`NCCL_IB_HCA`'s entries); None
    when either is not stated."""
    listed = (env.get("NCCL_IB_HCA") or "").strip()
    if listed.startswith("^"):
        return None  # a list of NICs NCCL must not use: the ones it uses are not stated
    hcas = [h for h in listed.lstrip("=").split(",") if h.strip()]
    if not hcas:
        return None
    count = (env.get("R2CC_FAILED_NIC_COUNT") or "").strip()
    failed_hcas = [h for h in (env.get("R2CC_FAILED_HCA") or "").split(",") if h.strip()]
    failed = int(count) if count.isdigit() else len(failed_hcas)
    if failed <= 0 or failed >= len(hcas):
        return None
    return failed / len(hcas)


def stage2_chunks(env: Mapping[str, str]) -> int | None:
    """K from a run's settings (None when unset: the library's default applies)."""
    value = (env.get("R2CC_AR_STAGE2_CHUNKS") or "").strip()
    return int(value) if value.isdigit() else None


def deviation(measured: float, predicted: float) -> float:
    """measured / predicted - 1 (+0.0074 is 0.74 % slower than predicted)."""
    return measured / predicted - 1.0


def flagged(measured: float, predicted: float) -> bool:
    """Whether a measurement is more than FLAG_ABOVE off its prediction."""
    return abs(deviation(measured, predicted)) > FLAG_ABOVE


@dataclass(frozen=True)
class HotRepairRatio:
    """T/T_nf of a hot-repair run: steady iterations after the repair over those before."""

    healthy_ms: float
    degraded_ms: float
    healthy_iterations: tuple[int, ...]
    degraded_iterations: tuple[int, ...]

    @property
    def ratio(self) -> float:
        """The measured T/T_nf."""
        return self.degraded_ms / self.healthy_ms


def hot_repair_ratio(times_ms: Sequence[float], cut_during: int) -> HotRepairRatio | None:
    """The steady-state T/T_nf of a hot-repair run (iterations numbered from 1): the median of
    the iterations before the cut but the first (it sets up the connections) against the
    median of those after the first one after the cut (the first runs one-off work: the
    sub-communicators of R2CC-AllReduce). None when either side has no iteration."""
    healthy = tuple(i for i in range(2, cut_during) if i <= len(times_ms))
    degraded = tuple(range(cut_during + 2, len(times_ms) + 1))
    if not healthy or not degraded:
        return None
    return HotRepairRatio(
        median(times_ms[i - 1] for i in healthy),
        median(times_ms[i - 1] for i in degraded),
        healthy,
        degraded,
    )
