"""NIC counters: the node-side sampler (on a fake sysfs), the `counters` table, the NIC figure.

This module holds those with real processes; the same subject's other tests:
tests/unit/test_counters.py (its pure tests).
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from r2bench.tables.counters import read_counters_file
from tests.support import paths

SAMPLER = paths.REPO / "injectors" / "sampler.sh"


def _fake_sysfs(root: Path) -> None:
    net = root / "class/net/eth1"
    (net / "statistics").mkdir(parents=True)
    (net / "statistics/tx_bytes").write_text("1000\n")
    (net / "statistics/rx_bytes").write_text("2000\n")
    (net / "operstate").write_text("up\n")
    port = root / "class/infiniband/mlx5_1/ports/1"
    (port / "counters").mkdir(parents=True)
    (port / "counters/port_xmit_data").write_text("250\n")
    (port / "counters/port_rcv_data").write_text("500\n")
    (port / "state").write_text("4: ACTIVE\n")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "Z" not in Path(f"/proc/{pid}/stat").read_text()


def _wait_for_samples(out: Path, nic: str, count: int, limit_s: float = 10.0) -> None:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        text = out.read_text() if out.exists() else ""
        if sum(1 for line in text.splitlines() if f"\t{nic}\t" in line) >= count:
            return
        time.sleep(0.02)
    raise AssertionError(f"fewer than {count} samples of {nic} after {limit_s} s")


def test_sampler_daemonizes_samples_and_stops(tmp_path: Path) -> None:
    _fake_sysfs(tmp_path / "sys")
    out, pidfile = tmp_path / "run/counters.node0.tsv", tmp_path / "run/.sampler.pid"
    env = {**os.environ, "R2B_SYSFS": str(tmp_path / "sys"), "R2B_RUN": "run-x"}
    nics = ["eth1:eth1::1", "ib1::mlx5_1:1", "gone:nosuch::1"]
    started = time.monotonic()
    subprocess.run(
        ["bash", str(SAMPLER), "start", str(out), str(pidfile), "10", *nics],
        env=env, check=True, timeout=10,
    )  # fmt: skip
    assert time.monotonic() - started < 2, "start must return at once"
    pid = int(pidfile.read_text())
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        assert b"R2B_RUN=run-x" in environ  # the run's kill-by-run finds it
        # Wait for samples rather than a fixed time: a busy machine starts the loop late.
        _wait_for_samples(out, "eth1", 10)
        (tmp_path / "sys/class/net/eth1/statistics/tx_bytes").write_text("126000\n")
        (tmp_path / "sys/class/infiniband/mlx5_1/ports/1/state").write_text("1: DOWN\n")
        _wait_for_samples(out, "eth1", 20)
    finally:
        stopping = time.monotonic()
        subprocess.run(["bash", str(SAMPLER), "stop", str(pidfile)], check=True, timeout=10)
    # TERM ends the loop within one interval; the KILL fallback only comes after 0.5 s of
    # polling. Under an init that does not reap (containers), the ended loop stays a zombie:
    # stop must count that as gone, not poll it until the fallback.
    assert time.monotonic() - stopping < 0.45
    time.sleep(0.1)
    assert not _pid_alive(pid) and not pidfile.exists()
    lines = out.read_text().splitlines()
    assert lines[0].startswith("# r2bench counters v1") and lines[1].startswith("time\tnic")
    rows = [ln.split("\t") for ln in lines[2:]]
    assert len(rows) >= 3 * 10  # >= 10 samples of 3 NICs in 0.6 s at 10 ms
    ib = [r for r in rows if r[1] == "ib1"]
    assert ib[0][2:5] == ["ib", "1000", "2000"]  # port counters are 4-byte words
    assert ib[0][5] == "ACTIVE" and ib[-1][5] == "DOWN"
    assert {r[3] for r in rows if r[1] == "gone"} == {"-"}
    frame = read_counters_file(out, "run-x", "node0")
    eth = frame[frame["nic"] == "eth1"]
    assert eth["tx_gbit_s"].max() > 0 and np.isnan(eth["tx_gbit_s"].iloc[0])
    total = np.nansum(eth["tx_gbit_s"].to_numpy() * eth["time"].diff().to_numpy()) * 1e9 / 8
    assert total == pytest.approx(125_000, rel=1e-6)


def test_sampler_stop_leaves_foreign_pids_alone(tmp_path: Path) -> None:
    other = subprocess.Popen(["sleep", "30"])
    try:
        pidfile = tmp_path / "pid"
        pidfile.write_text(f"{other.pid}\n")
        subprocess.run(["bash", str(SAMPLER), "stop", str(pidfile)], check=True, timeout=10)
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()
