"""Draw every registered figure of one or more sweeps into a folder and say what each shows."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from r2bench.figures.registry import FIGURES, Drawn, FigureDef, MissingInput
from r2bench.report.export import FORMATS, ExportResult
from r2bench.safeio import atomic_write, writable
from r2bench.tables.build import TABLE_NAMES, Tables, build_tables

PAPER_DIR = "experiments/paper"


@dataclass(frozen=True)
class Outcome:
    """One figure's result: drawn (with files and claim) or missing (with what to run)."""

    definition: FigureDef
    drawn: Drawn | None = None
    missing: str = ""
    files: tuple[Path, ...] = ()

    @property
    def experiment(self) -> str:
        return f"{PAPER_DIR}/{self.definition.experiment}"


def load_sweeps(sweeps: list[Path]) -> Tables:
    """The tables of several sweep folders, concatenated."""
    parts = [build_tables(sweep) for sweep in sweeps]
    frames = {
        name: pd.concat([getattr(p, name) for p in parts], ignore_index=True)
        for name in TABLE_NAMES
    }
    return Tables(**frames, warnings=[w for p in parts for w in p.warnings])


def draw_all(tables: Tables) -> list[Outcome]:
    """Every figure: drawn, or the reason it could not be."""
    out = []
    for definition in FIGURES:
        try:
            out.append(Outcome(definition, drawn=definition.draw(tables)))
        except MissingInput as exc:
            out.append(Outcome(definition, missing=str(exc)))
    return out


def write_html(drawn: Drawn, path: Path) -> None:
    """One HTML file per figure; plotly.min.js sits once beside them (works offline)."""
    import plotly.graph_objects as go
    from plotly.offline import get_plotlyjs

    fig = go.Figure(drawn.figure.spec)
    # Both files through the atomic writer (plotly's own write_html writes in place: a refused
    # write left half a page, named by no one); the bundle once per folder, as plotly does.
    page = fig.to_html(include_plotlyjs="directory", full_html=True)
    atomic_write(path, page, path.parent, durable=False)
    bundle = path.parent / "plotly.min.js"
    if bundle.is_symlink() or not bundle.is_file():
        atomic_write(bundle, get_plotlyjs(), path.parent, durable=False)


def export_static(drawn: list[Drawn], out_dir: Path, fmt: str) -> ExportResult:
    """`figure-<id>.<fmt>` for every drawn figure with data, at the size its layout asks for
    (plotly's `write_images` draws every figure at 700x500 unless told); never raises."""
    if fmt not in FORMATS:
        return ExportResult(error=f"unknown format {fmt!r} (use one of {', '.join(FORMATS)})")
    try:
        import kaleido  # noqa: F401
        import plotly.graph_objects as go
        import plotly.io as pio
    except ImportError as exc:
        return ExportResult(error=f"static export needs the kaleido package ({exc})")
    figs = [go.Figure(d.figure.spec) for d in drawn if d.figure.spec.get("data")]
    for fig in figs:
        _wrap_legend(fig)
    paths = [
        writable(out_dir, out_dir / f"figure-{d.figure.id}.{fmt}")
        for d in drawn
        if d.figure.spec.get("data")
    ]
    sizes = {"width": [f.layout.width for f in figs], "height": [f.layout.height for f in figs]}
    try:
        if hasattr(pio, "write_images"):
            pio.write_images(figs, paths, format=fmt, **sizes)
        else:  # plotly < 6.1 (write_image draws at the layout's size)
            for fig, path in zip(figs, paths, strict=True):
                fig.write_image(path, format=fmt)
    except Exception as exc:  # kaleido reports a missing browser in many ways
        return ExportResult(error=f"static export with kaleido failed: {exc}".strip()[:500])
    return ExportResult(paths=paths)


LEGEND_PX_PER_CHAR = 8  # the static files' legend font, about 8 px a character


def _wrap_legend(fig: Any) -> None:
    """Legend names wider than a static figure broken into lines at their ` · ` separators: a
    file cannot be scrolled like the HTML page, and several sweeps drawn together give long
    names (everything that tells their series apart)."""
    limit = max(40, int((fig.layout.width or 700) / LEGEND_PX_PER_CHAR) - 10)
    for trace in fig.data:
        if trace.name and len(trace.name) > limit:
            trace.name = wrap_label(trace.name, limit)


def wrap_label(text: str, limit: int, sep: str = " · ") -> str:
    """`text` as lines of at most `limit` characters (`<br>` between them), broken only at
    `sep`; a single part longer than `limit` stays whole."""
    lines: list[str] = []
    line = ""
    for part in text.split(sep):
        joined = f"{line}{sep}{part}" if line else part
        if line and len(joined) > limit:
            lines.append(line)
            line = part
        else:
            line = joined
    return "<br>".join([*lines, line])


def write_all(
    outcomes: list[Outcome], out_dir: Path, fmt: str = "png"
) -> tuple[list[Outcome], str]:
    """HTML for every drawn figure, static files when kaleido works; (outcomes with their
    files, the reason static files are missing or '')."""
    out_dir.mkdir(parents=True, exist_ok=True)
    drawn = [o for o in outcomes if o.drawn is not None]
    static = export_static([o.drawn for o in drawn if o.drawn], out_dir, fmt)
    by_id = {p.stem.removeprefix("figure-"): p for p in static.paths}
    result = []
    for outcome in outcomes:
        if outcome.drawn is None:
            result.append(outcome)
            continue
        html = out_dir / f"{outcome.definition.id}.html"
        write_html(outcome.drawn, html)
        files = [html] + (
            [by_id[outcome.drawn.figure.id]] if outcome.drawn.figure.id in by_id else []
        )
        result.append(Outcome(outcome.definition, outcome.drawn, files=tuple(files)))
    return result, static.error or ""


def summary_json(outcomes: list[Outcome]) -> str:
    """Claims and missing inputs as JSON (written beside the figures)."""
    body = []
    for o in outcomes:
        entry: dict[str, object] = {"id": o.definition.id, "title": o.definition.title,
                                    "needs": list(o.definition.needs), "experiment": o.experiment}  # fmt: skip
        if o.drawn is not None:
            claim = o.drawn.claim
            entry.update(claim=claim.text, verdict=claim.verdict, numbers=claim.numbers,
                         files=[str(p) for p in o.files])  # fmt: skip
        else:
            entry["missing"] = o.missing
        body.append(entry)
    return json.dumps(body, indent=2)
