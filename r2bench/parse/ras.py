"""NCCL RAS records: what a user's own monitoring saw during a run, to put beside the truth.

NCCL RAS (NCCL >= 2.24; JSON output 2.28.7, live monitoring `-m` 2.29) runs on the nodes
during a sweep (`r2bench.sweep.observers` starts and collects it) and its output is kept as
`node/<node>/ncclras.json` (RAS_FILE). This module only reads that record, so that the tables
and report can judge it without anything that talks to nodes: `ras_verdict` reads a stream of
JSON documents (one per report or event, pretty-printed or one per line) and any plain text
lines between them.

The parser reads the format loosely: any status, state or error field whose value is not a
healthy one ("RUNNING", "OK", "SUCCESS", "ncclSuccess", ...), and any non-empty `errors`,
`warnings`, `problems` or `events` list, is a problem; a `timestamp`/`time` beside it is when.
It has been tested only against outputs written from NCCL's documentation, never a real
capture (no NCCL RAS where r2bench is developed).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from r2bench.parse.numbers import MEASURE_MAX, BadNumber, bounded_float

RAS_FILE = "ncclras.json"
"""The name of a node's RAS record in the run folder: `node/<node>/ncclras.json`."""
_HEALTHY = {"running", "ok", "success", "ncclsuccess", "healthy", "none", "finalized", "init"}
_STATE_KEYS = ("status", "state", "async_error", "asyncerror", "error", "health")
_LIST_KEYS = ("errors", "warnings", "problems", "events", "dead_peers", "missing")


@dataclass(frozen=True)
class RasVerdict:
    """What RAS said: `ok` (None when it said nothing), a summary and its first problem."""

    ok: bool | None
    summary: str
    reports: int = 0
    first_problem: str | None = None
    first_problem_at: float | None = None


def _documents(text: str) -> Iterator[Any]:
    """Every JSON value in `text` (concatenated, one per line or pretty-printed); other text
    is skipped."""
    decoder = json.JSONDecoder()
    i, n = 0, len(text)
    while i < n:
        start = min((p for p in (text.find("{", i), text.find("[", i)) if p >= 0), default=-1)
        if start < 0:
            return
        try:
            value, end = decoder.raw_decode(text, start)
        except RecursionError:  # nested too deeply to read: skip the whole run of openers
            i = start + 1
            while i < n and text[i] in "[{ \t\r\n":
                i += 1
            continue
        except ValueError:
            i = start + 1
            continue
        yield value
        i = end


def _time(value: Any) -> float | None:
    """Epoch seconds of a timestamp (seconds or microseconds); None when it is no time."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:  # bounded first: float() of a 400-digit whole number overflows
            seconds = bounded_float(value, "time", low=1e8, high=MEASURE_MAX)
        except BadNumber:
            return None
        return seconds / 1e6 if seconds > 1e14 else seconds
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None
    return None


def _problems(value: Any, when: float | None, path: str) -> Iterator[tuple[str, float | None]]:
    if isinstance(value, dict):
        for key in ("timestamp", "time", "ts"):
            if key in value and (t := _time(value[key])) is not None:
                when = t
        for key, item in value.items():
            low = key.lower()
            if low in _STATE_KEYS and isinstance(item, str) and item.lower() not in _HEALTHY:
                yield f"{path}{key}={item}", when
            elif low in _LIST_KEYS and isinstance(item, list) and item:
                yield f"{path}{key}: {json.dumps(item[0], sort_keys=True)[:200]}", when
            else:
                yield from _problems(item, when, f"{path}{key}.")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _problems(item, when, f"{path}{i}.")


def ras_verdict(text: str) -> RasVerdict:
    """The verdict of an `ncclras -m -f json` output (see the module's note on the format)."""
    docs = list(_documents(text))
    if not docs:
        said = text.strip().splitlines()[-1][:200] if text.strip() else "no output"
        return RasVerdict(None, f"no RAS report ({said})")
    found = [p for doc in docs for p in _problems(doc, None, "")]
    if not found:
        return RasVerdict(True, f"all OK in {len(docs)} report(s)", len(docs))
    timed = [p for p in found if p[1] is not None]
    first = min(timed, key=lambda p: p[1] or 0.0) if timed else found[0]
    return RasVerdict(
        False,
        f"{len(found)} problem(s) in {len(docs)} report(s); first: {first[0]}",
        len(docs),
        first[0],
        first[1],
    )
