"""The `counters` table: per-NIC traffic counters sampled on the nodes during a run.

`node/<node>/counters.tsv` (written by `injectors/sampler.sh`) has one line per NIC per
sample: node epoch time, NIC name, source (`net`: /sys/class/net statistics; `ib`: RDMA port
counters, already converted from 4-byte words to bytes), tx and rx bytes, link state. The table
has one row per node x NIC x sample, with the throughput since the NIC's previous sample
(Gbit/s; NaN for the first sample and across a counter that went backwards or was unreadable).
The lines are read once per run (`parse.nictraffic`, pure): the same samples give the
failure evidence and this table.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from r2bench.parse.nictraffic import COUNTER_COLUMNS, CounterRow, counter_rows, read_counter_file

# pandas/numpy come with the `report` extra; a module that only parses runs imports
# parse.nictraffic instead.
with contextlib.suppress(ImportError):  # pragma: no cover - exercised in a subprocess test
    import pandas as pd


def empty_counters() -> pd.DataFrame:
    """The table with no rows (typed columns)."""
    return typed_counters(pd.DataFrame({c: [] for c in COUNTER_COLUMNS}))


def typed_counters(frame: pd.DataFrame) -> pd.DataFrame:
    """The counters columns with their types (tx/rx bytes nullable integers)."""
    for name in ("run_id", "node", "nic", "source", "state"):
        frame[name] = frame[name].astype(object)
    for name in ("time", "tx_gbit_s", "rx_gbit_s"):
        frame[name] = frame[name].astype("float64")
    for name in ("tx_bytes", "rx_bytes"):
        frame[name] = frame[name].astype("Int64")
    return frame


def counters_frame(run_id: str, rows: list[CounterRow]) -> pd.DataFrame:
    """The counters table of one run's rows (`parse.nictraffic.counter_rows`)."""
    if not rows:
        return empty_counters()
    columns = list(zip(*rows, strict=True))
    data: dict[str, Any] = {"run_id": [run_id] * len(rows)}
    data.update(zip(COUNTER_COLUMNS[1:], columns, strict=True))
    return typed_counters(pd.DataFrame(data, columns=list(COUNTER_COLUMNS)))


def read_counters_file(path: Path, run_id: str, node: str) -> pd.DataFrame:
    """One node's samples (node clock), with throughput from the deltas; empty on an
    unreadable file."""
    lines = {node: read_counter_file(path)}
    return counters_frame(run_id, counter_rows(lines, lambda _: 0.0))
