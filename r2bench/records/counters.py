"""The `counters` table: per-NIC traffic counters sampled on the nodes during a run.

`node/<node>/counters.tsv` (written by `injectors/sampler.sh`) has one line per NIC per
sample: node epoch time, NIC name, source (`net`: /sys/class/net statistics; `ib`: RDMA port
counters, already converted from 4-byte words to bytes), tx and rx bytes, link state. The table
has one row per node x NIC x sample, with the throughput since the NIC's previous sample
(Gbit/s; NaN for the first sample and across a counter that went backwards or was unreadable).
"""

from __future__ import annotations

import io
from pathlib import Path

from r2bench.records import store as st

# pandas/numpy come with the `report` extra; the sweep imports records.tables (and so this
# module) on machines without it, where no table is built.
try:
    import numpy as np
    import pandas as pd
except ImportError:  # pragma: no cover - exercised in a subprocess test
    pass

COUNTERS_FILE = "counters.tsv"
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
    """One node's samples, with throughput from the deltas; empty on an unreadable file."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return empty_counters()
    lines = [ln for ln in text.splitlines() if ln and not ln.startswith(("#", "time\t"))]
    if not lines:
        return empty_counters()
    raw = pd.read_csv(
        io.StringIO("\n".join(lines)),
        sep="\t",
        header=None,
        names=["time", "nic", "source", "tx_bytes", "rx_bytes", "state"],
        dtype={"nic": str, "source": str, "state": str},
        na_values=["-"],
        keep_default_na=False,
        on_bad_lines="skip",
    )
    raw["time"] = pd.to_numeric(raw["time"].astype(str).str.replace(",", "."), errors="coerce")
    raw = raw.dropna(subset=["time"])
    for name in ("tx_bytes", "rx_bytes"):
        raw[name] = pd.to_numeric(raw[name], errors="coerce")
    raw = raw.sort_values(["nic", "time"], kind="stable").reset_index(drop=True)
    dt = raw.groupby("nic", sort=False)["time"].diff().to_numpy()
    for direction in ("tx", "rx"):
        delta = raw.groupby("nic", sort=False)[f"{direction}_bytes"].diff().to_numpy()
        with np.errstate(divide="ignore", invalid="ignore"):
            rate = np.where((dt > 0) & (delta >= 0), delta * 8 / dt / 1e9, np.nan)
        raw[f"{direction}_gbit_s"] = rate
    raw.insert(0, "node", node)
    raw.insert(0, "run_id", run_id)
    raw["state"] = raw["state"].fillna("")
    return _typed(raw[list(COUNTER_COLUMNS)])


def run_counters(record: st.RunRecord) -> pd.DataFrame | None:
    """Every node's samples of one run folder, or None when it has none."""
    frames = [
        read_counters_file(path, record.run_id, path.parent.name)
        for path in record.node_files()
        if path.name == COUNTERS_FILE
    ]
    frames = [f for f in frames if len(f)]
    return pd.concat(frames, ignore_index=True) if frames else None
