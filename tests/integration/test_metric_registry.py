"""Adding a recovery metric is one registry entry plus its function (docs/recovery.md).

The example of the docs is added to `analysis.metrics.REGISTRY` before anything else of r2bench
is imported (as an edit of metrics.py would), in a fresh interpreter; the runs table, the
report's recovery table and compare's policy must all carry it without any other change.

This module holds those with real processes; the same subject's other tests:
tests/unit/test_metric_registry.py (its pure tests).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from tests.support import paths

SCRIPT = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    import r2bench.analysis.metrics as m

    def first_result(inp):
        after = [s for s in inp.samples if s.end > inp.first.applied]
        if not after:
            return m.undefined(inp.failed or "no measurement completed after the fault")
        return m.Metric(after[0].end - inp.first.applied, basis=f"first completion; {inp.timing}")

    m.REGISTRY = (*m.REGISTRY, m.MetricDef(
        "first_result_s", "s", False, "fault applied -> first completion after it",
        first_result, compared=True))
    m.METRICS = tuple(d.name for d in m.REGISTRY)

    sys.path.insert(0, sys.argv[1])
    from tests.support.sample_sweep import SampleConfig, write_sample_sweep
    from r2bench.compare.policy import RECOVERY_METRICS, UNITS
    from r2bench.tables.build import build_tables
    from r2bench.report.recovery import recovery_table, run_metrics

    store = write_sample_sweep(Path(sys.argv[2]), Path(sys.argv[1]) / "tests" / "data" / "nccl-tests",
                               SampleConfig(modes=("1",), repeats=2))
    tables = build_tables(store.sweep_dir)
    faulted = tables.runs[tables.runs["n_faults"] > 0]
    assert faulted["first_result_s"].notna().all(), faulted["first_result_s_reason"]
    assert (faulted["first_result_s"] <= faulted["stall_s"] + 1e-9).all()
    assert faulted["first_result_s_basis"].str.startswith("first completion").all()
    table = recovery_table(run_metrics(tables))
    assert table["first_result_s n"].tolist() == [2], table
    assert "first_result_s" in RECOVERY_METRICS and UNITS["first_result_s"] == "s"
    print("first_result_s", *faulted["first_result_s"].round(3))
    """
)


def test_a_new_metric_is_one_registry_entry(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(paths.REPO), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("first_result_s ")
