"""The node-side injectors, run for real: link/nft/tbf faults in network namespaces this test
creates (198.18.250.0/24), and the IB/BlueField injectors against stand-in tools (tests/support/fakes)
because that hardware does not exist here."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import paths

ROOT = paths.REPO
INJECTORS = ROOT / "injectors"
FAKES = paths.FAKES

needs_root = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("ip"),
    reason="needs root and iproute2 (network namespaces)",
)


def sh(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, check=check, timeout=60)


class Pair:
    """Two namespaces joined by a veth: `va` (198.18.250.1) in ns1, `vb` (.2) in ns2."""

    def __init__(self, fault_dir: Path) -> None:
        suffix = f"{os.getpid()}-{time.monotonic_ns() % 100000}"
        self.ns1, self.ns2 = f"r2b-injt1-{suffix}", f"r2b-injt2-{suffix}"
        self.fault_dir = fault_dir

    def create(self) -> None:
        sh("ip", "netns", "add", self.ns1)
        sh("ip", "netns", "add", self.ns2)
        sh(
            "ip",
            "-n",
            self.ns1,
            "link",
            "add",
            "va",
            "type",
            "veth",
            "peer",
            "name",
            "vb",
            "netns",
            self.ns2,
        )
        for ns, dev, addr in (
            (self.ns1, "va", "198.18.250.1/24"),
            (self.ns2, "vb", "198.18.250.2/24"),
        ):
            sh("ip", "-n", ns, "addr", "add", addr, "dev", dev)
            sh("ip", "-n", ns, "link", "set", dev, "up")
            sh("ip", "-n", ns, "link", "set", "lo", "up")

    def destroy(self) -> None:
        sh("ip", "netns", "del", self.ns1, check=False)
        sh("ip", "netns", "del", self.ns2, check=False)

    def inject(
        self, script: str, action: str, *args: str, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "R2B_FAULT_DIR": str(self.fault_dir)}
        argv = ["ip", "netns", "exec", self.ns1, "bash", str(INJECTORS / script), action, *args]
        return subprocess.run(
            argv, capture_output=True, text=True, env=env, check=check, timeout=90
        )

    def reachable(self) -> bool:
        ping = sh(
            "ip",
            "netns",
            "exec",
            self.ns1,
            "ping",
            "-c",
            "1",
            "-W",
            "1",
            "198.18.250.2",
            check=False,
        )
        return ping.returncode == 0

    def link_up(self) -> bool:
        return "UP" in sh("ip", "-n", self.ns1, "-o", "link", "show", "va").stdout.split(">")[0]


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[Pair]:
    if os.geteuid() != 0 or not shutil.which("ip"):
        pytest.skip("needs root and iproute2 (network namespaces)")
    pair = Pair(tmp_path / "faults")
    try:
        pair.create()
        assert any(pair.reachable() for _ in range(5)), "veth pair never became reachable"
        yield pair
    finally:
        pair.destroy()


def test_link_down_inject_verify_revert_idempotent(pair: Pair) -> None:
    out = pair.inject("link.sh", "inject", "--tag", "t1", "--dev", "va").stdout
    assert "inject tag=t1 kind=link_down result=ok dev=va" in out
    assert not pair.link_up() and not pair.reachable()
    assert (
        "state=active recorded=yes"
        in pair.inject("link.sh", "status", "--tag", "t1", "--dev", "va").stdout
    )
    assert (
        "result=noop already active"
        in pair.inject("link.sh", "inject", "--tag", "t1", "--dev", "va").stdout
    )
    assert "result=ok" in pair.inject("link.sh", "revert", "--tag", "t1", "--dev", "va").stdout
    assert pair.link_up() and pair.reachable()
    assert (
        "result=noop not active"
        in pair.inject("link.sh", "revert", "--tag", "t1", "--dev", "va").stdout
    )
    assert not list((pair.fault_dir / "active").glob("*/*"))


def _armed(pair: Pair, tag: str, word: str) -> subprocess.CompletedProcess[str]:
    """An armed link_down on va, told `word` once it says it is armed."""
    env = {**os.environ, "R2B_FAULT_DIR": str(pair.fault_dir)}
    argv = ["ip", "netns", "exec", pair.ns1, "bash", str(INJECTORS / "link.sh"), "inject"]
    proc = subprocess.Popen(
        [*argv, "--tag", tag, "--armed", "--lease-s", "60", "--dev", "va"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    assert "armed tag=" in proc.stdout.readline()  # the applier runs before this line
    assert pair.link_up()  # armed, nothing touched yet
    out, err = proc.communicate(word + "\n", timeout=30)
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def test_an_armed_link_down_applies_on_go_and_leaves_nothing_on_cancel(pair: Pair) -> None:
    done = _armed(pair, "a1", "go")
    assert done.returncode == 0, done.stderr
    line = next(x for x in done.stdout.splitlines() if "inject tag=a1" in x)
    assert "result=ok dev=va" in line
    fields = dict(w.split("=", 1) for w in line.split() if "=" in w)
    requested, applied = float(fields["requested"]), float(fields["applied"])
    assert 0 <= applied - requested < 0.5  # through the running `ip -batch`: no interpreter
    assert not pair.link_up() and not pair.reachable()
    assert "result=ok" in pair.inject("link.sh", "revert", "--tag", "a1", "--dev", "va").stdout
    assert pair.link_up()
    cancelled = _armed(pair, "a2", "stop")
    assert "inject tag=a2 kind=link_down result=cancelled" in cancelled.stdout
    assert pair.link_up() and not list((pair.fault_dir / "active").glob("*/*"))


def test_link_lease_reverts_without_the_controller(pair: Pair) -> None:
    pair.inject("link.sh", "inject", "--tag", "lease1", "--lease-s", "1", "--dev", "va")
    assert not pair.link_up()
    deadline = time.monotonic() + 10
    (record,) = (pair.fault_dir / "active").glob("*/lease1")
    while (record.exists() or not pair.link_up()) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert pair.link_up(), "the lease timer did not bring the link back"
    assert not record.exists()
    assert (
        "revert tag=lease1 kind=link_down result=ok" in (pair.fault_dir / "lease.log").read_text()
    )


def test_link_refuses_an_interface_it_did_not_take_down(pair: Pair) -> None:
    sh("ip", "-n", pair.ns1, "link", "set", "va", "down")
    result = pair.inject("link.sh", "inject", "--tag", "t2", "--dev", "va", check=False)
    assert result.returncode == 1 and "already down: not ours" in result.stderr
    assert not list((pair.fault_dir / "active").glob("*/t2"))


def test_route_drop_with_tagged_nft_table(pair: Pair) -> None:
    if not shutil.which("nft"):
        pytest.skip("nft not installed")
    pair.inject("nft_drop.sh", "inject", "--tag", "drop.1", "--dev", "va", "--peer", "198.18.250.2")
    tables = sh("ip", "netns", "exec", pair.ns1, "nft", "list", "tables").stdout
    assert "table inet r2b_drop_d1" in tables and pair.link_up() and not pair.reachable()
    pair.inject("nft_drop.sh", "revert", "--tag", "drop.1", "--dev", "va", "--peer", "198.18.250.2")
    assert "r2b_drop_d1" not in sh("ip", "netns", "exec", pair.ns1, "nft", "list", "tables").stdout
    assert pair.reachable()


def test_bandwidth_cap_never_replaces_a_foreign_qdisc(pair: Pair) -> None:
    pair.inject("tbf.sh", "inject", "--tag", "bw", "--dev", "va", "--rate", "8mbit")
    assert "qdisc tbf" in sh("tc", "-n", pair.ns1, "qdisc", "show", "dev", "va", "root").stdout
    pair.inject("tbf.sh", "revert", "--tag", "bw", "--dev", "va", "--rate", "8mbit")
    assert "tbf" not in sh("tc", "-n", pair.ns1, "qdisc", "show", "dev", "va", "root").stdout
    sh("tc", "-n", pair.ns1, "qdisc", "add", "dev", "va", "root", "handle", "1:", "htb")
    refused = pair.inject(
        "tbf.sh", "inject", "--tag", "bw2", "--dev", "va", "--rate", "8mbit", check=False
    )
    assert refused.returncode == 1 and "already has a root qdisc" in refused.stderr
    assert "qdisc htb 1:" in sh("tc", "-n", pair.ns1, "qdisc", "show", "dev", "va", "root").stdout


def test_bandwidth_cap_nests_under_a_capped_testbeds_own_shaping(pair: Pair) -> None:
    """A virtual testbed with --rate shapes each data NIC with its own tbf (handle f2b0:): the
    fault's tbf goes under it (the stricter rate wins) and revert leaves the testbed's cap."""
    tc = ("tc", "-n", pair.ns1, "qdisc")
    sh(
        *tc,
        "add",
        "dev",
        "va",
        "root",
        "handle",
        "f2b0:",
        "tbf",
        "rate",
        "400mbit",
        "burst",
        "2mb",
        "latency",
        "100ms",
    )
    pair.inject("tbf.sh", "inject", "--tag", "bw3", "--dev", "va", "--rate", "8mbit")
    shown = sh(*tc, "show", "dev", "va").stdout
    assert "qdisc tbf f2b0: root" in shown and "parent f2b0:1" in shown and "rate 8Mbit" in shown
    status = pair.inject("tbf.sh", "status", "--tag", "bw3", "--dev", "va", "--rate", "8mbit")
    assert "active" in status.stdout
    pair.inject("tbf.sh", "revert", "--tag", "bw3", "--dev", "va", "--rate", "8mbit")
    shown = sh(*tc, "show", "dev", "va").stdout
    assert "qdisc tbf f2b0: root" in shown and "rate 8Mbit" not in shown


def test_heal_reverts_everything_recorded(pair: Pair) -> None:
    pair.inject("link.sh", "inject", "--tag", "h1", "--dev", "va")
    pair.inject(
        "tbf.sh", "inject", "--tag", "h2", "--dev", "vb", "--rate", "8mbit", check=False
    )  # vb is not in ns1
    env = {**os.environ, "R2B_FAULT_DIR": str(pair.fault_dir)}
    heal = subprocess.run(
        ["ip", "netns", "exec", pair.ns1, "bash", str(INJECTORS / "heal.sh")],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert heal.returncode == 0, heal.stderr
    assert "revert tag=h1 kind=link_down result=ok" in heal.stdout and pair.link_up()
    assert not list((pair.fault_dir / "active").glob("*/*"))


# --- hardware that is not here: stand-in tools, real scripts ------------------------------------


def fake_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "PATH": f"{FAKES}:{os.environ['PATH']}",
        "R2B_FAULT_DIR": str(tmp_path / "faults"),
        "FAKE_IB_LOG": str(tmp_path / "ib.log"),
        "FAKE_OVS_LOG": str(tmp_path / "ovs.log"),
        "FAKE_OVS_FLOWS": str(tmp_path / "flows"),
        "R2B_SYSFS_ROOT": str(tmp_path / "sys"),
        **extra,
    }


def run_script(script: str, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(INJECTORS / script), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


def fake_ib_port(tmp_path: Path) -> Path:
    port = tmp_path / "sys" / "class" / "infiniband" / "mlx5_1" / "ports" / "1"
    port.mkdir(parents=True)
    (port / "phys_state").write_text("5: LinkUp\n")
    (port / "state").write_text("4: ACTIVE\n")
    return port


def test_ib_port_disable_and_enable_address_the_local_hca(tmp_path: Path) -> None:
    port, env = fake_ib_port(tmp_path), fake_env(tmp_path)
    args = ("--tag", "ib1", "--ca", "mlx5_1", "--port", "1")
    assert run_script("ib_port.sh", env, "inject", *args).returncode == 0
    assert (port / "phys_state").read_text().strip() == "3: Disabled"
    assert run_script("ib_port.sh", env, "revert", *args).returncode == 0
    assert (port / "state").read_text().strip() == "4: ACTIVE"
    assert (tmp_path / "ib.log").read_text().splitlines() == [
        "-C mlx5_1 -P 1 -D 0 1 disable",
        "-C mlx5_1 -P 1 -D 0 1 enable",
    ]


def test_ib_port_that_never_comes_back_fails_loudly(tmp_path: Path) -> None:
    fake_ib_port(tmp_path)
    env = fake_env(tmp_path, FAKE_IB_STUCK="1", R2B_IB_ACTIVE_TIMEOUT_S="1")
    args = ("--tag", "ib2", "--ca", "mlx5_1", "--port", "1")
    run_script("ib_port.sh", env, "inject", *args)
    revert = run_script("ib_port.sh", env, "revert", *args)
    assert revert.returncode == 1 and "still faulted; fix it by hand" in revert.stderr
    assert list((tmp_path / "faults" / "active").glob("*/ib2"))  # kept, so heal retries it


def test_ovs_flow_drop_deletes_only_its_own_cookie(tmp_path: Path) -> None:
    env = fake_env(tmp_path)
    (tmp_path / "flows").write_text("priority=0,actions=NORMAL\n")
    args = ("--tag", "ovs1", "--bridge", "ovsbr1", "--peer", "192.0.2.7")
    assert run_script("ovs_flow.sh", env, "inject", *args).returncode == 0
    flows = (tmp_path / "flows").read_text()
    assert "udp,nw_dst=192.0.2.7,tp_dst=4791,actions=drop" in flows
    assert run_script("ovs_flow.sh", env, "revert", *args).returncode == 0
    assert (tmp_path / "flows").read_text() == "priority=0,actions=NORMAL\n"
    deletes = [
        line
        for line in (tmp_path / "ovs.log").read_text().splitlines()
        if "del-flows" in line.split()
    ]
    assert deletes and all("cookie=0x" in line and line.endswith("/-1") for line in deletes)


def test_bad_arguments_are_refused_before_anything_changes(tmp_path: Path) -> None:
    env = fake_env(tmp_path)
    bad = run_script("link.sh", env, "inject", "--tag", "x;rm", "--dev", "va")
    assert bad.returncode == 1 and "--tag must be" in bad.stderr
    missing = run_script("tbf.sh", env, "inject", "--tag", "x", "--dev", "lo")
    assert missing.returncode == 1 and "missing --rate" in missing.stderr
    assert not (tmp_path / "faults" / "active").exists() or not any(
        (tmp_path / "faults" / "active").glob("*/*")
    )


# --- the link layer, checked on the node too (a testbed file may say the wrong kind) -------


def test_ib_port_down_refuses_a_roce_port_before_anything_changes(tmp_path: Path) -> None:
    """tests/data/hardware/roce-cx7-ibstatus-perfquery.txt: a RoCE port has no SMA, and
    ibportstate fails there; refused before the record, nothing called."""
    port = fake_ib_port(tmp_path)
    (port / "link_layer").write_text("Ethernet\n")
    env = fake_env(tmp_path)
    args = ("--tag", "r1", "--ca", "mlx5_1", "--port", "1")
    result = run_script("ib_port.sh", env, "inject", *args)
    assert result.returncode == 1 and "is a RoCE port (link_layer Ethernet)" in result.stderr
    assert "link_down" in result.stderr
    assert not (tmp_path / "ib.log").exists()
    assert not list((tmp_path / "faults").glob("active/*/r1"))
    (port / "link_layer").write_text("InfiniBand\n")
    assert run_script("ib_port.sh", env, "inject", *args).returncode == 0


def test_link_down_refuses_an_ipoib_interface(tmp_path: Path) -> None:
    net = tmp_path / "sys" / "class" / "net" / "ibp24s0"
    net.mkdir(parents=True)
    (net / "type").write_text("32\n")
    env = fake_env(tmp_path, R2B_SYSFS=str(tmp_path / "sys"))
    result = run_script("link.sh", env, "inject", "--tag", "l1", "--dev", "ibp24s0")
    assert result.returncode == 1 and "is an IPoIB interface" in result.stderr
    assert "ib_port_down" in result.stderr
    assert not list((tmp_path / "faults").glob("active/*/l1"))
