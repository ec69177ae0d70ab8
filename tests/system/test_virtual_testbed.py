"""The virtual testbed for real: namespaces, sshd per node, rails, link faults, clean teardown.

Needs root (network namespaces, sshd). One testbed (2 nodes x 2 NICs, with the rail-0 filter
table) is shared by the tests of this module and torn down at the end, whatever happens.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from r2bench.config.load import load_testbed
from r2bench.testbeds.virtual import sshd
from r2bench.testbeds.virtual.layout import default_state_dir, host_ifname
from r2bench.testbeds.virtual.teardown import owned_pid, teardown
from tests.support.cli_runner import invoke_as_main

pytestmark = [pytest.mark.root]

SERVER = """
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(sys.argv[1])))
s.listen(64)
print("ready", flush=True)
while True:
    s.accept()[0].close()
"""
CLIENT = """
import socket, sys
try:
    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=float(sys.argv[3])).close()
    print("ok")
except OSError as exc:
    print("fail", exc)
"""
PORT = 47011
RATE = "200mbit"
SINK = """
import socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2])))
s.listen(1)
print("ready", flush=True)
c = s.accept()[0]
total, start = 0, None
while data := c.recv(1 << 20):
    start = start or time.monotonic()
    total += len(data)
print(total * 8 / (time.monotonic() - start))
"""
SOURCE = """
import socket, sys
c = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=10)
c.sendall(b"x" * int(sys.argv[3]))
c.close()
"""


@dataclass(frozen=True)
class Live:
    """A testbed brought up for this module, and the host as it was before."""

    name: str
    state: Path
    before: dict[str, set[str]]
    up_seconds: float


def _out(argv: list[str]) -> str:
    return subprocess.run(argv, capture_output=True, text=True, check=True, timeout=30).stdout


def snapshot() -> dict[str, set[str]]:
    """Namespaces, root-namespace links and nft tables of the host."""
    links = {
        line.split(":")[1].strip().split("@")[0] for line in _out(["ip", "-o", "link"]).splitlines()
    }
    return {
        "netns": {line.split()[0] for line in _out(["ip", "netns", "list"]).splitlines() if line},
        "links": links,
        "nft": set(_out(["nft", "list", "tables"]).splitlines()),
    }


def in_node(live: Live, node: str, code: str, *args: str) -> list[str]:
    """argv running Python `code` inside a node's namespace."""
    return ["ip", "netns", "exec", f"r2b-{live.name}-{node}", sys.executable, "-c", code, *args]


def connect(live: Live, address: str, timeout: float = 1.0) -> bool:
    """True when node0 can open a TCP connection to `address`:PORT."""
    return _out(in_node(live, "node0", CLIENT, address, str(PORT), str(timeout))).startswith("ok")


def ssh(live: Live, *args: str) -> subprocess.CompletedProcess[str]:
    """ssh through the testbed's own ssh_config."""
    argv = ["ssh", "-F", str(live.state / "ssh_config"), *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)


@pytest.fixture(scope="module")
def live() -> Iterator[Live]:
    name = f"it-{uuid.uuid4().hex[:8]}"
    state = default_state_dir(name)
    before = snapshot()
    try:
        start = time.monotonic()
        args = ["up", "virtual", "--name", name, "--nodes", "2", "--nics", "2", "--router"]
        args += ["--rate", RATE]
        result = invoke_as_main("testbed", *args)
        assert result.exit_code == 0, result.output
        yield Live(name, state, before, time.monotonic() - start)
    finally:
        teardown(name, state, lambda _: None)


@pytest.fixture(scope="module")
def server(live: Live) -> Iterator[None]:
    proc = subprocess.Popen(
        in_node(live, "node1", SERVER, str(PORT)), stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        yield
    finally:
        proc.kill()
        proc.wait(timeout=10)


def test_up_is_fast_and_writes_a_valid_testbed(live: Live) -> None:
    assert live.up_seconds < 60
    testbed = load_testbed(live.state / "testbed.yaml")
    assert testbed.name == live.name and testbed.kind.value == "virtual"
    assert testbed.features["veth"] and testbed.features["bridge"]
    assert set(testbed.features) >= {"tbf", "htb", "nftables", "netem", "bonding", "dummy"}
    assert [node.name for node in testbed.nodes] == ["node0", "node1"]


def test_ssh_to_each_node_with_host_key_checking(live: Live) -> None:
    assert ssh(live, "node0", "hostname").stdout.strip() == "node0"
    assert ssh(live, "node1", "hostname").stdout.strip() == "node1"
    hop = ssh(live, "node0", "ssh", "-F", str(live.state / "ssh_config"), "node1", "hostname")
    assert hop.stdout.strip() == "node1", hop.stderr
    unknown = ssh(live, "-o", "UserKnownHostsFile=/dev/null", "node0", "true")
    assert unknown.returncode != 0 and "host key" in unknown.stderr.lower()


def test_tcp_across_each_rail(live: Live, server: None) -> None:
    for address in ("198.18.0.11", "198.18.1.11", "198.18.2.11"):
        assert connect(live, address), address


def _status(live: Live) -> dict:
    result = invoke_as_main("testbed", "status", live.name, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def _wait_connect(live: Live, address: str) -> bool:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if connect(live, address, 0.5):
            return True
    return False


def test_nic_down_cuts_only_its_rail(live: Live, server: None) -> None:
    link = ["ip", "netns", "exec", f"r2b-{live.name}-node1", "ip", "link", "set", "nic1"]
    _out([*link, "down"])
    try:
        assert _status(live)["nodes"][1]["links"]["nic1"] == "down"
        assert not connect(live, "198.18.2.11", 1.0)
        assert connect(live, "198.18.1.11")
    finally:
        _out([*link, "up"])
    assert _wait_connect(live, "198.18.2.11")
    assert _status(live)["nodes"][1]["links"] == {"mgmt0": "up", "nic0": "up", "nic1": "up"}


def test_flow_drop_in_rail0_filter(live: Live, server: None) -> None:
    nft = ["ip", "netns", "exec", f"r2b-{live.name}-rail0", "nft"]
    hook = "{ type filter hook forward priority -10 ; }"
    _out([*nft, "add", "table", "bridge", "r2b_fault_test"])
    try:
        _out([*nft, "add", "chain", "bridge", "r2b_fault_test", "drop_flow", hook])
        rule = ["ip", "daddr", "198.18.1.11", "tcp", "dport", str(PORT), "drop"]
        _out([*nft, "add", "rule", "bridge", "r2b_fault_test", "drop_flow", *rule])
        assert not connect(live, "198.18.1.11", 1.0)
        assert connect(live, "198.18.2.11")
    finally:
        _out([*nft, "delete", "table", "bridge", "r2b_fault_test"])
    assert _wait_connect(live, "198.18.1.11")


def _qdisc(live: Live, suffix: str, dev: str) -> str:
    return _out(["tc", "-n", f"r2b-{live.name}-{suffix}", "qdisc", "show", "dev", dev, "root"])


def test_rate_caps_each_data_nic_at_both_ends(live: Live) -> None:
    for node in (0, 1):
        for nic in (0, 1):
            assert _qdisc(live, f"node{node}", f"nic{nic}").startswith("qdisc tbf f2b0: root")
            assert _qdisc(live, f"rail{nic}", f"n{node}").startswith("qdisc tbf f2b0: root")
        assert "tbf" not in _qdisc(live, f"node{node}", "mgmt0")
    testbed = load_testbed(live.state / "testbed.yaml")
    assert {nic.rate for node in testbed.nodes for nic in node.data_nics} == {RATE}
    assert all(nic.rate is None for node in testbed.nodes for nic in node.nics if nic.management)
    assert _status(live)["rate"] == RATE


@pytest.mark.parametrize(("src", "dst", "address"), [(0, 1, "198.18.2.11"), (1, 0, "198.18.1.10")])
def test_rate_is_the_bottleneck_both_ways(live: Live, src: int, dst: int, address: str) -> None:
    sink = subprocess.Popen(
        in_node(live, f"node{dst}", SINK, address, str(PORT + 1)), stdout=subprocess.PIPE, text=True
    )
    try:
        assert sink.stdout is not None and sink.stdout.readline().strip() == "ready"
        _out(in_node(live, f"node{src}", SOURCE, address, str(PORT + 1), str(10 * 10**6)))
        bits_per_s = float(sink.stdout.readline())
    finally:
        sink.kill()
        sink.wait(timeout=10)
    assert 0.6 * 200e6 < bits_per_s < 1.1 * 200e6


def test_second_testbed_and_second_up_are_refused(live: Live) -> None:
    again = invoke_as_main("testbed", "up", "virtual", "--name", live.name)
    assert again.exit_code == 2 and "already up" in again.output
    other = invoke_as_main("testbed", "up", "virtual", "--name", f"{live.name}x")
    assert other.exit_code == 2 and "198.18.0.0/24 is already used" in other.output
    assert not default_state_dir(f"{live.name}x").exists()


def test_down_restores_the_host_and_is_idempotent(live: Live) -> None:
    pids = [int(p.read_text()) for p in (live.state / "sshd").glob("*.pid")]
    assert len(pids) == 2
    first = invoke_as_main("testbed", "down", live.name)
    assert first.exit_code == 0 and "removed" in first.output
    after = snapshot()
    assert after == live.before
    assert host_ifname(live.name) not in after["links"]
    assert not any(owned_pid(pid, str(live.state)) for pid in pids)
    assert not live.state.exists()
    second = invoke_as_main("testbed", "down", live.name)
    assert second.exit_code == 0 and "nothing to do" in second.output


def test_failed_up_rolls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    name = f"rb-{uuid.uuid4().hex[:8]}"
    before = snapshot()
    monkeypatch.setattr(sshd, "start_command", lambda *_: ["ip", "netns", "exec", "r2b-no-such"])
    try:
        result = invoke_as_main("testbed", "up", "virtual", "--name", name)
        assert result.exit_code == 1
        assert "`ip netns exec r2b-no-such` exited with" in result.output
        assert snapshot() == before
        assert not default_state_dir(name).exists()
    finally:
        teardown(name, default_state_dir(name), lambda _: None)
