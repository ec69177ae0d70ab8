"""The lines a degraded AllReduce is held against: a lower bound, Balance, R-2CCL's model (pure).

One node keeps a share beta = 1 - X of its bandwidth B (one NIC of three lost: beta = 2/3).

- **Lower bound** (the one any reader can derive; the OptCC paper, arXiv 2606.01680, proves a
  tighter one): however the data is routed, the straggler must still send and receive its D
  bytes, so T >= D / (beta B); a healthy ring takes T_nf = 2 (p-1) D / (p B), hence
  T/T_nf >= max(1, p / (2 beta (p-1))). p counts the ring's nodes (a node's ranks share its
  NICs): r7525, 3 servers, beta 2/3: 1.125.
- **Balance** (every channel spread over the node's remaining NICs): T/T_nf = 1/(1-X), 1.5.
- **R-2CCL's model** for the run's schedule and K (`analysis.r2cc_model`): R2CC-AllReduce
  1.375 at n = 6 ranks, X = 1/3, K = 4.

A degraded run's measured T/T_nf sits beside them with its efficiency against the bound
(bound / measured: 1.0 is as fast as any schedule can be).
"""

from __future__ import annotations

from dataclasses import dataclass

from r2bench.analysis import r2cc_model


def lower_bound_ratio(p: int, beta: float) -> float:
    """The smallest T/T_nf any AllReduce schedule can reach with one of `p` ring nodes keeping a
    share `beta` of its bandwidth: max(1, p / (2 beta (p-1)))."""
    if p < 2:
        raise ValueError(f"p = {p}: the ring needs at least 2 nodes")
    if not 0.0 < beta <= 1.0:
        raise ValueError(f"beta = {beta}: the share of bandwidth kept must be in (0, 1]")
    return max(1.0, p / (2.0 * beta * (p - 1)))


@dataclass(frozen=True)
class DegradedLines:
    """A degraded run's reference lines (T/T_nf) and its measurement against them."""

    nodes: int
    ranks: int
    x: float
    bound: float
    balance: float
    model: r2cc_model.Prediction | None
    measured: float | None = None

    @property
    def efficiency(self) -> float | None:
        """bound / measured: 1.0 at the bound, lower the further above it (None unmeasured)."""
        if self.measured is None or self.measured <= 0:
            return None
        return self.bound / self.measured


def degraded_lines(
    nodes: int,
    ranks: int,
    x: float,
    *,
    mode: str | None = None,
    k: int | None = None,
    size_bytes: int | None = None,
    measured: float | None = None,
    after_repair: str | None = None,
) -> DegradedLines:
    """The lines of a run on `nodes` nodes and `ranks` ranks that lost a share `x` of one
    node's bandwidth; R-2CCL's model for its `mode`. After a real repair a run of mode 0 or 1
    goes on as `R2CC_AR_AFTER_REPAIR` says (`after_repair`; unset: 2, Balance)."""
    model_mode = mode or r2cc_model.BALANCE_MODE
    if model_mode in ("0", "1"):
        model_mode = (after_repair or r2cc_model.BALANCE_MODE).strip()
    model = r2cc_model.predict(model_mode, max(ranks, 2), x, k, size_bytes)
    return DegradedLines(
        nodes=nodes,
        ranks=ranks,
        x=x,
        bound=lower_bound_ratio(nodes, 1.0 - x),
        balance=r2cc_model.balance_ratio(x),
        model=model,
        measured=measured,
    )


def one_nic_share(nics: int) -> float | None:
    """X of a fault that takes one of a node's `nics` data NICs (None: one NIC or none, the
    node loses everything and nothing is degraded)."""
    return 1.0 / nics if nics >= 2 else None
