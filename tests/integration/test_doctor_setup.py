"""Doctor's checks of what the r7525 testbed keeps in place: mlnx_qos limits, the topology file,
the SmartNICs' Open vSwitch (r2bench/doctor/testbed_setup.py).

This module holds those with real processes; the same subject's other tests:
tests/unit/test_doctor_setup.py (its pure tests).
"""

from __future__ import annotations

import subprocess

from r2bench.doctor.testbed_setup import setup_sections
from tests.support.doctor_setup import r7525_testbed


def test_each_limit_is_read_where_it_is_held() -> None:
    testbed = r7525_testbed()
    host = setup_sections(testbed, testbed.node("node-1"))  # type: ignore[arg-type]
    bf = setup_sections(testbed, testbed.node("node-1-bf"))  # type: ignore[arg-type]
    assert "qos.node-1.mlx5_0@@" in host and "mlnx_qos -i eno33np0" in host
    assert "mlx5_2" not in host and "/mydata/topo.xml" in host and "ovs" not in host
    assert "qos.node-1.mlx5_2@@" in bf and "sudo -n mlnx_qos -i p0" in bf
    assert "qos.node-1.mlx5_3@@" in bf and "mlnx_qos -i p1" in bf and "ovs-vsctl list-br" in bf
    assert "topo" not in bf
    for script in (host, bf):
        assert subprocess.run(["bash", "-n", "-c", script], check=False).returncode == 0
