"""Doctor's checks of what the r7525 testbed keeps in place: mlnx_qos limits, the topology file,
the SmartNICs' Open vSwitch (r2bench/doctor/testbed_setup.py).

This module holds its pure tests; the same subject's other tests:
tests/integration/test_doctor_setup.py (those with real processes).
"""

from __future__ import annotations

import pytest

from r2bench.doctor.checks import Status
from r2bench.doctor.facts import ABSENT, NodeFacts, parse_sections
from r2bench.doctor.testbed_setup import parse_rate_limits, setup_checks, setup_sections
from tests.support.doctor_setup import r7525_testbed

SHAPED = "\n".join(
    f"tc: {tc} ratelimit: 10.0 Gbps, tsa: vendor\n\t priority: {tc}" for tc in range(8)
)
UNSHAPED = "tc: 0 ratelimit: unlimited, tsa: vendor\ntc: 1 ratelimit: unlimited, tsa: vendor"


def _net(name: str, speed: int = 10000) -> str:
    return f'<net name="{name}" dev="0" speed="{speed}" port="1" gid="3"/>'


TOPOLOGY = "<system>\n" + "\n".join(_net(n) for n in ("mlx5_0", "mlx5_2", "mlx5_3")) + "\n</system>"


def _facts(name: str, sections: dict[str, str]) -> NodeFacts:
    return NodeFacts(name, reachable=True, sections=sections)


def test_mlnx_qos_output_is_read_per_traffic_class() -> None:
    assert parse_rate_limits(SHAPED) == dict.fromkeys(range(8), 10.0)
    assert parse_rate_limits(UNSHAPED) == {0: None, 1: None}
    assert parse_rate_limits("tc: 3 ratelimit: 500.0 Mbps, tsa: ets") == {3: 0.5}


def test_a_lost_limit_a_wrong_speed_and_a_missing_ovs_fail_with_the_fix() -> None:
    testbed = r7525_testbed()
    topology = TOPOLOGY.replace(_net("mlx5_3"), _net("mlx5_3", 100000))
    facts = [
        _facts("node-1", {"qos.node-1.mlx5_0": SHAPED, "topology": TOPOLOGY}),
        _facts("node-2", {"qos.node-2.mlx5_0": UNSHAPED, "topology": topology}),
        _facts("node-3", {"qos.node-3.mlx5_0": ABSENT, "topology": ABSENT}),
        _facts(
            "node-1-bf",
            {"qos.node-1.mlx5_2": SHAPED, "qos.node-1.mlx5_3": SHAPED, "ovs": "ovsbr1\novsbr2"},
        ),
        _facts("node-2-bf", {"ovs": ABSENT}),
        NodeFacts("node-3-bf", reachable=False, error="no route"),
    ]
    results = {(r.node, r.check): r for r in setup_checks(testbed, facts)}
    assert results[("node-1", "rate limit node-1/mlx5_0")].status is Status.OK
    assert results[("node-1", "topology file")].status is Status.OK
    assert results[("node-1-bf", "rate limit node-1/mlx5_2")].status is Status.OK
    assert results[("node-1-bf", "open vswitch")].detail == "bridges: ovsbr1, ovsbr2"
    lost = results[("node-2", "rate limit node-2/mlx5_0")]
    assert lost.status is Status.FAIL and "tc0 unlimited" in lost.detail
    assert lost.fix == "on node-2: sudo mlnx_qos -i eno33np0 -r 10,10,10,10,10,10,10,10"
    speed = results[("node-2", "topology file")]
    assert speed.status is Status.FAIL and "mlx5_3 speed=100000, want 10000" in speed.detail
    assert results[("node-3", "rate limit node-3/mlx5_0")].detail == "mlnx_qos not found"
    assert "copy the testbed's topology XML" in results[("node-3", "topology file")].fix
    ovs = results[("node-2-bf", "open vswitch")]
    assert ovs.status is Status.FAIL and "flow_drop faults cannot run here" in ovs.detail
    bf_limit = results[("node-2-bf", "rate limit node-2/mlx5_2")]
    assert bf_limit.status is Status.FAIL and bf_limit.fix.endswith("-i p0 -r 10,0,0,0,0,0,0,0")
    assert not any(node == "node-3-bf" for node, _ in results)  # unreachable: reported elsewhere


def test_the_sections_round_trip_through_the_parser() -> None:
    testbed = r7525_testbed()
    script = setup_sections(testbed, testbed.node("node-1"))  # type: ignore[arg-type]
    marker = script.splitlines()[0].split("'")[1]
    sections = parse_sections(f"{marker}\n{SHAPED}\n")
    assert parse_rate_limits(sections["qos.node-1.mlx5_0"])[7] == 10.0


def test_a_smartnic_is_held_to_what_it_does(monkeypatch: pytest.MonkeyPatch) -> None:
    """No GPU, MPI or the GPU nodes' OS is asked of a BlueField; a fault left on it fails."""
    from r2bench.doctor import run as doctor_run

    testbed = r7525_testbed()
    mpirun = "/usr/bin/mpirun\nmpirun (Open MPI) 4.1.6"
    facts = [
        _facts(n, {"os": "6.8.0\nUbuntu 22.04", "gpu": "", "mpirun": mpirun, "ssh": ""})
        for n in ("node-1", "node-2", "node-3")
    ]
    facts += [
        _facts("node-1-bf", {"os": "5.15.0-bluefield\nUbuntu 22.04", "mpirun": ABSENT}),
        _facts("node-2-bf", {"faults": "r2b-x-f0\tkind=flow_drop bridge=ovsbr1"}),
        NodeFacts("node-3-bf", reachable=False, error="no route"),
    ]
    monkeypatch.setattr(doctor_run, "gather", lambda testbed, pool: facts)
    results = doctor_run.diagnose(testbed, pool=object())  # type: ignore[arg-type]
    on_bf = {(r.node, r.check): r.status for r in results if r.node.endswith("-bf")}
    asked = ("mpirun", "os/kernel", "gpus", "ssh from first", "transport", "driver")
    assert not any(check in asked for _, check in on_bf)
    assert on_bf[("node-1-bf", "active faults")] is Status.OK
    assert on_bf[("node-2-bf", "active faults")] is Status.FAIL
    assert on_bf[("node-3-bf", "reachable")] is Status.FAIL
    assert doctor_run.ssh_peers_of(testbed, testbed.nodes[0]) == testbed.nodes[1:3]
