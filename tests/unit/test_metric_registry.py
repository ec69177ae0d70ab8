"""Adding a recovery metric is one registry entry plus its function (docs/recovery.md).

The example of the docs is added to `analysis.metrics.REGISTRY` before anything else of r2bench
is imported (as an edit of metrics.py would), in a fresh interpreter; the runs table, the
report's recovery table and compare's policy must all carry it without any other change.

This module holds its pure tests; the same subject's other tests:
tests/integration/test_metric_registry.py (those with real processes).
"""

from __future__ import annotations

from r2bench.analysis.metrics import METRICS, REGISTRY, metric, of_unit
from r2bench.compare import policy


def test_the_registry_describes_every_metric() -> None:
    assert METRICS == ("detect_s", "stall_s", "recover_s", "degraded_ratio", "failback_ratio",
                       "lossless")  # fmt: skip
    assert of_unit("s") == ("detect_s", "stall_s", "recover_s")
    assert of_unit("ratio") == ("degraded_ratio", "failback_ratio")
    assert metric("failback_ratio").higher_is_better and not metric("stall_s").higher_is_better
    assert tuple(m.name for m in REGISTRY if m.compared) == policy.RECOVERY_METRICS
