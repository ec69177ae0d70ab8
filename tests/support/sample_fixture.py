"""The sample sweep generator, imported in one place (change this line if it moves)."""

from __future__ import annotations

from pathlib import Path

from tests.support import paths
from tests.support.sample_sweep import SampleConfig, write_sample_sweep

CAPTURED = paths.DATA / "nccl-tests"


def make_sample_sweep(results: Path, **config: object) -> Path:
    """Write the sample sweep under `results` and return its folder."""
    cfg = SampleConfig(**config)  # type: ignore[arg-type]
    write_sample_sweep(results, CAPTURED, cfg)
    return results / cfg.sweep
