"""The NIC sampler keeps sampling every NIC when one counter is not a number.

Older kernels print `N/A (no PMA)` in a port counter of a device without a performance
management agent (Linux drivers/infiniband/core/sysfs.c, `show_pma_counter`; see
tests/data/hardware/README.md). Before, the sampler's arithmetic on that text stopped it for
every NIC of the node.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from r2bench.tables.counters import read_counters_file
from tests.support import fake_sysfs, paths

SAMPLER = paths.REPO / "injectors" / "sampler.sh"
NO_PMA = "N/A (no PMA)"


def sample(tmp_path: Path, sampler: Path = SAMPLER, count: int = 8) -> list[str]:
    """Run the sampler on a host whose mlx5_0 has no PMA and mlx5_3 counts; its output lines."""
    devices = fake_sysfs.dgx_h100()
    devices = [
        fake_sysfs.Device(
            d.name, d.bdf, (fake_sysfs.Port("InfiniBand", xmit_words=NO_PMA, rcv_words="7"),)
        )
        if d.name == "mlx5_0"
        else d
        for d in devices
    ]
    sysfs = fake_sysfs.build(tmp_path / "sys", devices)
    (sysfs / "class/infiniband/mlx5_3/ports/1/counters/port_xmit_data").write_text("250\n")
    out, pidfile = tmp_path / "counters.tsv", tmp_path / ".pid"
    env = {**os.environ, "R2B_SYSFS": str(sysfs)}
    nics = ["mlx5_0::mlx5_0:1", "mlx5_3::mlx5_3:1"]
    subprocess.run(
        ["bash", str(sampler), "start", str(out), str(pidfile), "10", *nics],
        env=env, check=True, timeout=10,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            rows = [ln for ln in out.read_text().splitlines() if "\tmlx5_3\t" in ln]
            if len(rows) >= count:
                break
            time.sleep(0.02)
    finally:
        subprocess.run(["bash", str(sampler), "stop", str(pidfile)], check=True, timeout=10)
    return out.read_text().splitlines()


def test_a_counter_without_pma_is_missing_the_others_are_sampled(tmp_path: Path) -> None:
    lines = sample(tmp_path)
    rows = [ln.split("\t") for ln in lines if not ln.startswith(("#", "time\t"))]
    other = [r for r in rows if r[1] == "mlx5_3"]
    assert len(other) >= 8, lines[:6]
    assert {r[3] for r in other} == {"1000"}  # 250 words x 4
    broken = [r for r in rows if r[1] == "mlx5_0"]
    assert broken and {(r[3], r[4], r[5]) for r in broken} == {("-", "28", "ACTIVE")}
    notes = [ln for ln in lines if ln.startswith("# unreadable:")]
    assert len(notes) == 1, notes  # said once, not once a sample
    assert "nic=mlx5_0" in notes[0] and "port_xmit_data" in notes[0] and "value=N/A" in notes[0]
    frame = read_counters_file(tmp_path / "counters.tsv", "run-x", "node0")
    assert set(frame["nic"]) == {"mlx5_0", "mlx5_3"}
