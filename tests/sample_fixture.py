"""The sample sweep generator, imported in one place (change this line if it moves)."""

from __future__ import annotations

from pathlib import Path

from sample_sweep import SampleConfig, write_sample_sweep

CAPTURED = Path(__file__).parent / "data" / "nccl-tests"


def make_sample_sweep(results: Path, **config: object) -> Path:
    """Write the sample sweep under `results` and return its folder."""
    cfg = SampleConfig(**config)  # type: ignore[arg-type]
    write_sample_sweep(results, CAPTURED, cfg)
    return results / cfg.sweep
