"""The `counters` table: per-NIC traffic counters sampled on the nodes during a run.

`node/<node>/counters.tsv` (written by `injectors/sampler.sh`) has one line per NIC per
sample: node epoch time, NIC name, source (`net`: /sys/class/net statistics; `ib`: RDMA port
counters, already converted from 4-byte words to bytes), tx and rx bytes, link state. The table
has one row per node x NIC x sample, with the throughput since the NIC's previous sample
(Gbit/s; NaN for the first sample and across a counter that went backwards or was unreadable).
"""

from __future__ import annotations

from pathlib import Path

from r2bench.records import store as st
from r2bench.records.nictraffic import COUNTERS_FILE, parse_counter_line

# pandas/numpy come with the `report` extra; the sweep imports records.tables (and so this
# module) on machines without it, where no table is built.
try:
    import numpy as np
    import pandas as pd
except ImportError:  # pragma: no cover - exercised in a subprocess test
    pass

COUNTER_COLUMNS = (
    *("run_id", "node", "nic", "source", "time", "tx_bytes", "rx_bytes", "state"),
    *("tx_gbit_s", "rx_gbit_s"),
)


def empty_counters() -> pd.DataFrame:
    """The table with no rows (typed columns)."""
    return _typed(pd.DataFrame({c: [] for c in COUNTER_COLUMNS}))


def _typed(frame: pd.DataFrame) -> pd.DataFrame:
    for name in ("run_id", "node", "nic", "source", "state"):
        frame[name] = frame[name].astype(object)
    for name in ("time", "tx_gbit_s", "rx_gbit_s"):
        frame[name] = frame[name].astype("float64")
    for name in ("tx_bytes", "rx_bytes"):
        frame[name] = frame[name].astype("Int64")
    return frame


def read_counters_file(path: Path, run_id: str, node: str) -> pd.DataFrame:
    """One node's samples, with throughput from the deltas; empty on an unreadable file.

    Read line by line rather than with read_csv: files are small and many (two per faulted
    run), where pandas' per-call overhead would dominate a sweep's table build."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return empty_counters()
    samples = [s for s in map(parse_counter_line, text.splitlines()) if s is not None]
    if not samples:
        return empty_counters()
    raw = pd.DataFrame(samples, columns=["time", "nic", "source", "tx_bytes", "rx_bytes", "state"])
    raw = raw.sort_values(["nic", "time"], kind="stable", ignore_index=True)
    nic = raw["nic"].to_numpy()
    same_nic = np.r_[False, nic[1:] == nic[:-1]]  # a delta only within one NIC's samples
    dt = _deltas(raw["time"].to_numpy(float), same_nic)
    for direction in ("tx", "rx"):
        delta = _deltas(raw[f"{direction}_bytes"].to_numpy(float), same_nic)
        with np.errstate(divide="ignore", invalid="ignore"):
            rate = np.where((dt > 0) & (delta >= 0), delta * 8 / dt / 1e9, np.nan)
        raw[f"{direction}_gbit_s"] = rate
    raw.insert(0, "node", node)
    raw.insert(0, "run_id", run_id)
    return _typed(raw[list(COUNTER_COLUMNS)])


def _deltas(values: np.ndarray, same_nic: np.ndarray) -> np.ndarray:
    """Each value minus the one before it of the same NIC (NaN for a NIC's first sample)."""
    out = np.full(len(values), np.nan)
    out[1:] = values[1:] - values[:-1]
    out[~same_nic] = np.nan
    return out


def run_counters(record: st.RunRecord) -> pd.DataFrame | None:
    """Every node's samples of one run folder, or None when it has none."""
    frames = [
        read_counters_file(path, record.run_id, path.parent.name)
        for path in record.node_files()
        if path.name == COUNTERS_FILE
    ]
    frames = [f for f in frames if len(f)]
    return pd.concat(frames, ignore_index=True) if frames else None
