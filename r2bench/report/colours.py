"""The report's colours, chosen once so a thing has the same colour in every chart.

Each event kind (`parse.models.EventKind`) has its colour for good, whatever kinds a run
logged: errors in reds and oranges, R-2CCL's failover steps in blues, greens and purples,
the rest in greys. A fault window is shaded with `FAULT_FILL` everywhere.
"""

from __future__ import annotations

from r2bench.parse.models import EventKind

FAULT_FILL = "rgba(214, 39, 40, 0.15)"
FAULT_TEXT = "rgb(180, 30, 30)"
GREY = "rgb(150, 150, 150)"
SERIES = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22",
    "#7f7f7f", "#d62728",
)  # fmt: skip
"""Lines of series, in order (plotly's default colours, red last: red means a fault)."""

_ERRORS = ("#d62728", "#ff7f0e", "#8b0000", "#e377c2", "#a0522d", "#f2c500", "#ff9896",
           "#7b3f00")  # fmt: skip
_R2CC = ("#1f77b4", "#2ca02c", "#9467bd", "#17becf", "#0b3d6b", "#98df8a", "#6a3d9a",
         "#1a7a6e", "#aec7e8")  # fmt: skip
_OTHER = ("#7f7f7f", "#a0a0a0", "#5a5a5a", "#bcbd22", "#c0a060", "#c7c7c7", "#404040")
_ERROR_KINDS = (
    EventKind.SOCKET_ERROR, EventKind.NET_IB_COMPLETION_ERROR, EventKind.TEST_NCCL_FAILURE,
    EventKind.TEST_FAILURE, EventKind.TEST_TIMEOUT, EventKind.MPI_JOB_ABORTED,
    EventKind.MPI_PROCESS_SIGNALED, EventKind.MPI_PROCESS_EXIT,
)  # fmt: skip
"""The error kinds the timelines mark, each its own warm colour (the unmarked ones share
greys with the rest)."""


def _palette() -> dict[str, str]:
    errors = [k.value for k in _ERROR_KINDS]
    r2cc = [k.value for k in EventKind if k.value.startswith("r2cc_")]
    rest = [k.value for k in EventKind if k.value not in errors and k.value not in r2cc]
    out: dict[str, str] = {}
    for kinds, colours in ((errors, _ERRORS), (r2cc, _R2CC), (rest, _OTHER)):
        out.update({k: colours[i % len(colours)] for i, k in enumerate(kinds)})
    return out


EVENT_COLOURS: dict[str, str] = _palette()


def event_colour(kind: str) -> str:
    """The colour of an event kind in every chart (grey for a kind r2bench does not know)."""
    return EVENT_COLOURS.get(kind, GREY)


def series_colour(index: int) -> str:
    """The colour of the index-th series of a chart."""
    return SERIES[index % len(SERIES)]
