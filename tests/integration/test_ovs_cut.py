"""flow_drop as R-2CCL's authors cut a port: all of its traffic, priority 65000, one cookie."""

from __future__ import annotations

from pathlib import Path

from tests.system.test_injectors import fake_env, run_script


def test_the_default_flow_drops_all_of_the_ports_traffic(tmp_path: Path) -> None:
    env = fake_env(tmp_path)
    (tmp_path / "flows").write_text("priority=0,actions=NORMAL\n")
    args = ("--tag", "cut1", "--bridge", "ovsbr1")
    inject = run_script("ovs_flow.sh", env, "inject", *args)
    assert inject.returncode == 0, inject.stderr
    (added,) = [f for f in (tmp_path / "flows").read_text().splitlines() if "drop" in f]
    assert added.startswith("cookie=0x") and added.endswith(",priority=65000,actions=drop")
    log = (tmp_path / "ovs.log").read_text().splitlines()
    assert all(line.startswith("-O OpenFlow13 ") for line in log)
    status = run_script("ovs_flow.sh", env, "status", *args).stdout
    assert "state=active" in status and "match=all priority=65000" in status
    assert run_script("ovs_flow.sh", env, "revert", *args).returncode == 0
    assert (tmp_path / "flows").read_text() == "priority=0,actions=NORMAL\n"


def test_a_missing_bridge_or_a_port_without_peer_is_refused_before_any_change(
    tmp_path: Path,
) -> None:
    env = fake_env(tmp_path, FAKE_OVS_BRIDGES="ovsbr1 ovsbr2")
    missing = run_script("ovs_flow.sh", env, "inject", "--tag", "c2", "--bridge", "ovsbr9")
    assert missing.returncode == 1 and "no OVS bridge 'ovsbr9'" in missing.stderr
    lone = ("--tag", "c3", "--bridge", "ovsbr1", "--udp-port", "4791")
    refused = run_script("ovs_flow.sh", env, "inject", *lone)
    assert refused.returncode == 1 and "--udp-port needs --peer" in refused.stderr
    assert not (tmp_path / "flows").exists() or "drop" not in (tmp_path / "flows").read_text()
