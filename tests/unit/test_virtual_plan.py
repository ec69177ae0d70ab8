"""Pure planning of the virtual testbed: names, addresses, commands, the written testbed YAML."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest
import yaml

from r2bench.config import testbed as testbed_model
from r2bench.config.load import load_testbed
from r2bench.testbeds.virtual.describe import build_testbed, to_yaml
from r2bench.testbeds.virtual.features import _checks
from r2bench.testbeds.virtual.layout import (
    POOL,
    PlanError,
    VirtualSpec,
    host_ifname,
    owns_netns,
    plan_testbed,
    rate_bits,
    router_commands,
    shaping_burst,
)
from r2bench.testbeds.virtual.sshd import (
    known_hosts_text,
    ssh_config_text,
    sshd_config_text,
    start_command,
)
from r2bench.testbeds.virtual.statedir import Manifest, StatePaths
from tests.support import paths
from tests.support.cli_runner import invoke_as_main

SHAPES = [(1, 1), (2, 2), (4, 3), (64, 8)]


def _addresses(plan) -> list[str]:
    out = ["198.18.0.1"]
    for node in plan.nodes:
        out += [node.mgmt_address, *node.nic_addresses]
    return out


def _tc(plan) -> list[tuple[str, ...]]:
    return [argv for step in plan.steps for argv in step.commands if argv[0] == "tc"]


# ---- the embedded virtual testbed's rate is checked at plan time -----------------------------

QUICKSTART = paths.REPO / "experiments" / "quickstart.yaml"
VIRTUAL_TB = paths.REPO / "experiments" / "testbeds" / "virtual-example.yaml"


@pytest.mark.parametrize(("nodes", "nics"), SHAPES)
def test_addresses_in_pool_and_unique(nodes: int, nics: int) -> None:
    plan = plan_testbed(VirtualSpec("t", nodes, nics))
    addresses = _addresses(plan)
    assert all(ipaddress.ip_address(a) in POOL for a in addresses)
    assert len(set(addresses)) == len(addresses)
    for argv in (a for step in plan.steps for a in step.commands):
        for token in argv:
            if "/" in token and token[0].isdigit():
                assert ipaddress.ip_network(token, strict=False).subnet_of(POOL)


@pytest.mark.parametrize(("nodes", "nics"), SHAPES)
def test_interface_names_short_and_unique(nodes: int, nics: int) -> None:
    plan = plan_testbed(VirtualSpec("a-very-long-name-012345", nodes, nics))
    for names in plan.interface_names().values():
        assert all(1 <= len(name) <= 15 for name in names)
        assert len(set(names)) == len(names)
    for argv in (a for step in plan.steps for a in step.commands):
        for flag in ("add", "name"):
            if flag in argv and argv[0] == "ip" and "link" in argv:
                assert len(argv[argv.index(flag) + 1]) <= 15


def test_rails_on_distinct_subnets() -> None:
    plan = plan_testbed(VirtualSpec("t", 3, 4))
    subnets = [ipaddress.ip_network(s.subnet) for s in (plan.mgmt, *plan.rails)]
    assert len(set(subnets)) == len(subnets)
    for node in plan.nodes:
        assert ipaddress.ip_address(node.mgmt_address) in subnets[0]
        for rail, address in enumerate(node.nic_addresses):
            assert ipaddress.ip_address(address) in subnets[rail + 1]
            assert address == f"198.18.{rail + 1}.{10 + node.index}"


def test_every_created_object_is_tagged_and_recorded_first() -> None:
    plan = plan_testbed(VirtualSpec("tb1", 2, 2, router=True))
    created = [step.creates for step in plan.steps if step.creates]
    namespaces = [obj.name for obj in created if obj.kind == "netns"]
    assert sorted(namespaces) == sorted(plan.namespaces)
    assert all(owns_netns("tb1", ns) for ns in namespaces)
    assert [obj.name for obj in created if obj.kind == "link"] == [plan.host_if]
    root_cmds = [
        a for s in plan.steps for a in s.commands if a[:2] in (("ip", "link"), ("ip", "addr"))
    ]
    assert all(plan.host_if in argv for argv in root_cmds)


def test_netns_ownership_has_no_prefix_collisions() -> None:
    assert owns_netns("a", "r2b-a-node0")
    assert not owns_netns("a", "r2b-a-b-node0")
    assert not owns_netns("a", "r2b-a-node0x")
    assert host_ifname("a") != host_ifname("a-b")


@pytest.mark.parametrize("name", ["", "Bad", "a b", "a/b", "-x", "x" * 25, "a_b", "a;rm"])
def test_bad_names_rejected(name: str) -> None:
    with pytest.raises(PlanError):
        VirtualSpec(name)


@pytest.mark.parametrize(("nodes", "nics"), [(0, 1), (65, 1), (2, 0), (2, 9)])
def test_bad_sizes_rejected(nodes: int, nics: int) -> None:
    with pytest.raises(PlanError):
        VirtualSpec("t", nodes, nics)


def test_router_table_in_rail0_switch() -> None:
    plan = plan_testbed(VirtualSpec("t", router=True))
    assert plan.router is not None and plan.router.netns == plan.rails[0].netns
    cmds = router_commands(plan.router)
    assert all(argv[:4] == ("ip", "netns", "exec", plan.rails[0].netns) for argv in cmds)
    assert plan_testbed(VirtualSpec("t")).router is None


def test_yaml_round_trips_through_the_model(tmp_path: Path) -> None:
    spec = VirtualSpec("rt", 2, 2, state_dir=tmp_path / "state")
    testbed = build_testbed(plan_testbed(spec), {"veth": True, "netem": False}, python="python3")
    path = tmp_path / "testbed.yaml"
    path.write_text(to_yaml(testbed))
    loaded = load_testbed(path)
    assert loaded == testbed
    assert loaded.kind is testbed_model.TestbedKind.VIRTUAL
    assert loaded.features == {"veth": True, "netem": False}
    node1 = loaded.node("node1")
    assert node1 is not None and node1.address == "198.18.0.11"
    assert [n.netdev for n in node1.data_nics] == ["nic0", "nic1"]
    assert [n.name for n in node1.nics if n.management] == ["mgmt0"]
    assert node1.ssh.strict_host_key_checking and node1.ssh.user == "root"
    assert loaded.launcher.allow_run_as_root and loaded.launcher.bootstrap_interface == "mgmt0"
    assert loaded.launcher.mca["plm_rsh_agent"] == f"ssh -F {tmp_path}/state/ssh_config"


def test_ssh_texts_point_into_state_dir(tmp_path: Path) -> None:
    plan = plan_testbed(VirtualSpec("t", state_dir=tmp_path))
    paths = StatePaths(tmp_path)
    node = plan.nodes[1]
    conf = sshd_config_text(paths, node, "/usr/bin:/bin")
    assert f"ListenAddress {node.mgmt_address}:22" in conf
    assert f"AuthorizedKeysFile {paths.authorized_keys}" in conf
    assert "UsePAM no" in conf and "PasswordAuthentication no" in conf
    assert "/etc/ssh" not in conf and "/root/.ssh" not in conf
    client = ssh_config_text(paths, plan.nodes)
    assert "Host node1 198.18.0.11" in client and "StrictHostKeyChecking yes" in client
    keys = {n.hostname: f"ssh-ed25519 KEY{n.index} comment" for n in plan.nodes}
    assert "node1,198.18.0.11 ssh-ed25519 KEY1" in known_hosts_text(keys, plan.nodes)
    argv = start_command("/usr/sbin/sshd", paths, node)
    assert argv[:4] == ["ip", "netns", "exec", node.netns] and "--uts" in argv


def test_probe_never_targets_root_namespace() -> None:
    for commands in _checks("r2b-t-probe").values():
        for argv in commands:
            assert "r2b-t-probe" in argv


def test_manifest_is_written_on_every_record(tmp_path: Path) -> None:
    manifest = Manifest(name="t", state_dir=str(tmp_path))
    manifest.record("netns", name="r2b-t-mgmt")
    manifest.record("netns", name="r2b-t-mgmt")
    loaded = Manifest.load(tmp_path)
    assert loaded is not None and loaded.of_kind("netns") == [
        {"kind": "netns", "name": "r2b-t-mgmt"}
    ]
    assert yaml.safe_load(StatePaths(tmp_path).manifest.read_text())["name"] == "t"


def test_cli_refuses_unknown_kind_and_bad_name() -> None:
    assert invoke_as_main("testbed", "up", "cloudlab").exit_code == 2
    assert invoke_as_main("testbed", "up", "virtual", "--name", "Bad Name").exit_code == 2
    assert invoke_as_main("testbed", "down", "bad/name").exit_code == 2


def test_up_needs_root(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr("r2bench.testbeds.virtual.lifecycle.os.geteuid", lambda: 1000)
    args = ["up", "virtual", "--name", "nr", "--state-dir", str(tmp_path / "s")]
    result = invoke_as_main("testbed", *args)
    assert result.exit_code == 2 and "needs root" in result.output
    assert not (tmp_path / "s").exists()


def test_up_names_missing_tools_and_packages(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr("r2bench.testbeds.virtual.lifecycle.os.geteuid", lambda: 0)
    monkeypatch.setattr(
        "r2bench.testbeds.virtual.lifecycle.which",
        lambda tool: None if tool in ("nft", "sshd") else "/x",
    )
    args = ["up", "virtual", "--name", "nt", "--router", "--state-dir", str(tmp_path / "s")]
    result = invoke_as_main("testbed", *args)
    assert result.exit_code == 2
    assert "nft (apt install nftables)" in result.output
    assert "sshd (apt install openssh-server)" in result.output
    # Without --router, nft is not needed (offline GPU hosts often lack it).
    result = invoke_as_main("testbed", *[a for a in args if a != "--router"])
    assert result.exit_code == 2 and "nft" not in result.output


def test_rate_shapes_both_ends_of_every_data_cable_with_the_fixed_handle() -> None:
    assert _tc(plan_testbed(VirtualSpec("t", 2, 4))) == []
    plan = plan_testbed(VirtualSpec("t", 2, 4, rate="400mbit"))
    tc = _tc(plan)
    assert len(tc) == 2 * 4 * 2
    ends = {(argv[2], argv[6]) for argv in tc}
    for node in plan.nodes:
        for i, nic in enumerate(node.nic_names):
            assert (node.netns, nic) in ends
            assert (plan.rails[i].netns, f"n{node.index}") in ends
    assert not any("mgmt" in ns or dev == "mgmt0" for ns, dev in ends)
    for argv in tc:
        assert argv[7:11] == ("root", "handle", "f2b0:", "tbf")
        assert argv[argv.index("rate") + 1] == "400mbit"
        assert int(argv[argv.index("burst") + 1]) == 200_000
    # tbf.sh draws its handles from 1000..60999 (0x3e8..0xee48): f2b0 is outside
    assert int("f2b0", 16) > 60999


@pytest.mark.parametrize(
    ("rate", "bits"), [("400mbit", 4 * 10**8), ("1gbit", 10**9), ("1.5mbps", 12 * 10**6)]
)
def test_rates_parse(rate: str, bits: int) -> None:
    assert rate_bits(rate) == bits
    assert shaping_burst(rate) >= 64 * 1024


@pytest.mark.parametrize("rate", ["", "400", "400mb", "fast", "1kbit", "-1mbit", "400 mbit"])
def test_bad_rates_rejected(rate: str) -> None:
    with pytest.raises(PlanError):
        VirtualSpec("t", rate=rate)


def test_rate_is_written_on_every_data_nic(tmp_path: Path) -> None:
    spec = VirtualSpec("rt", 2, 4, state_dir=tmp_path / "state", rate="400mbit")
    testbed = build_testbed(plan_testbed(spec), {"tbf": True}, python="python3")
    path = tmp_path / "testbed.yaml"
    path.write_text(to_yaml(testbed))
    loaded = load_testbed(path)
    assert loaded == testbed
    for node in loaded.nodes:
        assert [nic.rate for nic in node.data_nics] == ["400mbit"] * 4
        assert [nic.rate for nic in node.nics if nic.management] == [None]
    unshaped = build_testbed(plan_testbed(VirtualSpec("rt", 2, 4)), {}, python="python3")
    assert "rate" not in to_yaml(unshaped)


@pytest.mark.parametrize(
    "rate",
    ['"0bit"', '""', '"10mbit; reboot"', '"10mbit\\n"', '"50kbit"', '"99tbit"', "12", '"1e9bit"'],
)
def test_a_bad_virtual_testbed_rate_fails_plan_located(tmp_path: Path, rate: str) -> None:
    text = QUICKSTART.read_text()
    text = text.replace("\nvirtual_testbed:", "\nvirtual_testbed_was:")
    path = tmp_path / "experiment.yaml"
    path.write_text(text + f"virtual_testbed: {{nodes: 2, nics: 4, rate: {rate}}}\n")
    result = invoke_as_main("plan", str(path), "-t", str(VIRTUAL_TB))
    assert result.exit_code == 2, result.output
    assert "virtual_testbed.rate" in result.output and f"{path.name}:" in result.output


@pytest.mark.parametrize("rate", ["250mbit", "1gbit", "100kbit", "125mbps", "null"])
def test_a_good_virtual_testbed_rate_plans(tmp_path: Path, rate: str) -> None:
    text = QUICKSTART.read_text().replace("\nvirtual_testbed:", "\nvirtual_testbed_was:")
    path = tmp_path / "experiment.yaml"
    path.write_text(text + f"virtual_testbed: {{nodes: 2, nics: 4, rate: {rate}}}\n")
    result = invoke_as_main("plan", str(path), "-t", str(VIRTUAL_TB))
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("rate", ["10mbit\n", "10mbit\nreboot", "1gbit "])
def test_a_virtual_rate_with_a_trailing_line_is_refused(rate: str) -> None:
    with pytest.raises(PlanError):
        rate_bits(rate)
