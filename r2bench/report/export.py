"""Static figures (PNG, SVG, PDF) of a report, through plotly's kaleido engine when it works.

kaleido is optional: `export_figures` never raises; it returns the files written, or the
reason it could not write them (kaleido missing, or no browser for it to drive).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from r2bench.report.charts import Figure
from r2bench.safeio import writable

FORMATS = ("png", "svg", "pdf")


@dataclass
class ExportResult:
    """Files written, or why none were."""

    paths: list[Path] = field(default_factory=list)
    error: str | None = None


def export_figures(figures: list[Figure], out_dir: Path, fmt: str, stem: str) -> ExportResult:
    """Write `<out_dir>/<stem>-<figure id>.<fmt>` for every figure with data."""
    if fmt not in FORMATS:
        return ExportResult(error=f"unknown format {fmt!r} (use one of {', '.join(FORMATS)})")
    try:
        import kaleido  # noqa: F401
        import plotly.graph_objects as go
        import plotly.io as pio
    except ImportError as exc:
        return ExportResult(error=f"static export needs the kaleido package ({exc})")
    todo = [f for f in figures if f.spec.get("data")]
    out_dir.mkdir(parents=True, exist_ok=True)
    # kaleido writes by name: a link left at a figure's name is removed, never written through
    paths = [writable(out_dir, out_dir / f"{stem}-{f.id}.{fmt}") for f in todo]
    try:
        figs = [go.Figure(f.spec) for f in todo]
        if hasattr(pio, "write_images"):
            # each at its own size: without it kaleido draws every figure at 700 x 500
            widths = [f.layout.width or 1100 for f in figs]
            heights = [f.layout.height or 500 for f in figs]
            pio.write_images(figs, paths, format=fmt, width=widths, height=heights)
        else:  # plotly < 6.1: one browser start per figure
            for fig, path in zip(figs, paths, strict=True):
                fig.write_image(path, format=fmt)
    except Exception as exc:  # kaleido reports a missing browser in many ways
        return ExportResult(error=f"static export with kaleido failed: {exc}".strip()[:500])
    return ExportResult(paths=paths)
