"""Small multiples for plotly figure dicts: a grid of panels sharing their axes' ranges.

`grid(rows, cols, titles)` gives each panel its axis names (for traces: `xaxis`/`yaxis`; for
shapes: `xref`/`yref`, the y one as `y2 domain` so a shape spans its panel's height) and the
layout entries that place them; only the bottom row labels x and the left column labels y.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from r2bench.report.colours import FAULT_FILL, FAULT_TEXT

GAP_X = 0.035
GAP_Y = 0.09  # room for each panel's title above it
PANEL_PX = 170
FRAME_PX = 130  # title, x axis title and margins


@dataclass(frozen=True)
class Panel:
    """One panel: its axis names and where its title goes (paper coordinates)."""

    x: str  # `x`, `x2`, ... (a trace's `xaxis`)
    y: str
    title_x: float
    title_y: float

    @property
    def y_domain_ref(self) -> str:
        """`y2 domain`: a shape's yref spanning the whole panel."""
        return f"{self.y} domain"


def _axis_key(name: str) -> str:
    """`x2` -> `xaxis2` (the layout key of an axis)."""
    return f"{name[0]}axis{name[1:]}"


def grid(
    rows: int, cols: int, x_title: str, y_title: str, y_max: float | None = None
) -> tuple[list[Panel], dict[str, Any]]:
    """Panels row by row, and the layout entries of their axes (x ranges matched, y from 0 to
    `y_max` in every panel so heights compare)."""
    panels, layout = [], {}
    for r in range(rows):
        for c in range(cols):
            k = r * cols + c + 1
            suffix = "" if k == 1 else str(k)
            x, y = f"x{suffix}", f"y{suffix}"
            xd = (c / cols + GAP_X / 2, (c + 1) / cols - GAP_X / 2)
            yd = (1 - (r + 1) / rows + GAP_Y / 2, 1 - r / rows - GAP_Y / 2)
            layout[_axis_key(x)] = {
                "domain": list(xd),
                "anchor": y,
                "showticklabels": r == rows - 1,
                **({"matches": "x"} if k > 1 else {}),
                **({"title": {"text": x_title}} if r == rows - 1 else {}),
            }
            layout[_axis_key(y)] = {
                "domain": list(yd),
                "anchor": x,
                "showticklabels": c == 0,
                "rangemode": "tozero",
                **({"range": [0, y_max * 1.05]} if y_max else {}),
                **({"title": {"text": y_title}} if c == 0 else {}),
            }
            panels.append(Panel(x, y, (xd[0] + xd[1]) / 2, yd[1]))
    return panels, layout


def height(rows: int) -> int:
    """Pixels for a grid of `rows` panels."""
    return FRAME_PX + PANEL_PX * rows


def title(panel: Panel, text: str, marked: bool = False) -> dict[str, Any]:
    """A panel's title (escaped text), red where `marked` (the faulted NIC)."""
    return {
        "text": text,
        "x": panel.title_x,
        "y": panel.title_y,
        "xref": "paper",
        "yref": "paper",
        "xanchor": "center",
        "yanchor": "bottom",
        "showarrow": False,
        "font": {"size": 12, **({"color": FAULT_TEXT} if marked else {})},
    }


def shade(panel: Panel, x0: float, x1: float) -> dict[str, Any]:
    """A fault window shaded across one panel's height."""
    return {
        "type": "rect",
        "xref": panel.x,
        "yref": panel.y_domain_ref,
        "x0": x0,
        "x1": x1,
        "y0": 0,
        "y1": 1,
        "fillcolor": FAULT_FILL,
        "line": {"width": 0},
        "layer": "below",
    }
