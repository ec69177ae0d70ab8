"""Node-side safety of the injectors: per-node fault records in a shared folder, the interface
guard of a hand-run injector, leases that end completely, heal's count, distinct nft tables,
and no `faults/` folder inside a checkout. Nodes are told apart by hostname (a UTS namespace
per simulated node); IB ports are stand-ins (tests/support/fakes)."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from r2bench.doctor.facts import NODE_ID_SHELL
from tests.support import paths
from tests.support.proc_groups import group_members

ROOT = paths.REPO
INJECTORS = ROOT / "injectors"
FAKES = paths.FAKES

needs_root = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("ip"),
    reason="needs root, unshare and iproute2 (UTS and network namespaces)",
)


def fake_ib(tmp_path: Path, ca: str = "mlx5_1", netdev: str | None = None) -> Path:
    port = tmp_path / "sys" / "class" / "infiniband" / ca / "ports" / "1"
    port.mkdir(parents=True, exist_ok=True)
    (port / "phys_state").write_text("5: LinkUp\n")
    (port / "state").write_text("4: ACTIVE\n")
    if netdev:
        (port / "gid_attrs" / "ndevs").mkdir(parents=True)
        (port / "gid_attrs" / "ndevs" / "0").write_text(f"{netdev}\n")
    return port


def env_for(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "PATH": f"{FAKES}:{os.environ['PATH']}",
        "R2B_FAULT_DIR": str(tmp_path / "faults"),
        "FAKE_IB_LOG": str(tmp_path / "ib.log"),
        "R2B_SYSFS_ROOT": str(tmp_path / "sys"),
        **extra,
    }


def on_node(
    host: str | None, env: dict[str, str], *argv: str, netns: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run argv as node `host` (its own hostname in a UTS namespace; None: this host)."""
    prefix: list[str] = []
    if netns:
        prefix += ["ip", "netns", "exec", netns]
    if host:
        prefix += ["unshare", "--uts", "bash", "-c", f'hostname {host} && exec "$@"', "_"]
    return subprocess.run(
        [*prefix, *argv], capture_output=True, text=True, env=env, timeout=90, check=False
    )


def injector(script: str, *args: str) -> list[str]:
    return ["bash", str(INJECTORS / script), *args]


def records(fault_dir: Path) -> list[Path]:
    return sorted((fault_dir / "active").glob("*/*"))


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


def lease_pid(record: Path) -> int:
    return int(
        next(line for line in record.read_text().splitlines() if line.startswith("lease_pid="))[10:]
    )


IB_ARGS = ("--ca", "mlx5_1", "--port", "1")


# ---- 1. per-node records ---------------------------------------------------------------------


@needs_root
def test_heal_on_another_node_leaves_the_fault_and_its_lease_alone(tmp_path: Path) -> None:
    """Before: heal.sh on node0 'reverted' node1's fault, deleted its record, killed its lease."""
    port, env = fake_ib(tmp_path), env_for(tmp_path)
    inject = on_node(
        "node1", env, *injector("ib_port.sh", "inject", "--tag", "f1", "--lease-s", "300", *IB_ARGS)
    )
    assert inject.returncode == 0, inject.stderr
    (record,) = records(tmp_path / "faults")
    assert record.parent.name.startswith("node1.")
    pid = lease_pid(record)
    try:
        heal0 = on_node("node0", env, *injector("heal.sh"))
        assert heal0.returncode == 0, heal0.stderr
        assert "reverted 0" in heal0.stdout
        assert record.exists() and alive(pid)
        assert (port / "phys_state").read_text().strip() == "3: Disabled"
        status0 = on_node("node0", env, *injector("ib_port.sh", "status", "--tag", "f1", *IB_ARGS))
        assert "recorded=no" in status0.stdout
        revert0 = on_node("node0", env, *injector("ib_port.sh", "revert", "--tag", "f1", *IB_ARGS))
        assert "result=noop" in revert0.stdout and record.exists() and alive(pid)
        heal1 = on_node("node1", env, *injector("heal.sh"))
        assert heal1.returncode == 0, heal1.stderr
        assert "reverted 1 fault(s), 0 failed" in heal1.stdout
        assert not record.exists() and (port / "state").read_text().strip() == "4: ACTIVE"
        deadline = time.monotonic() + 5
        while group_members(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not group_members(pid)
    finally:
        for member in group_members(pid):
            os.kill(member, 15)


@needs_root
def test_a_record_copied_into_another_nodes_folder_is_refused(tmp_path: Path) -> None:
    port, env = fake_ib(tmp_path), env_for(tmp_path)
    assert (
        on_node("node1", env, *injector("ib_port.sh", "inject", "--tag", "f2", *IB_ARGS)).returncode
        == 0
    )
    (record,) = records(tmp_path / "faults")
    ids = on_node("node0", env, "bash", "-c", NODE_ID_SHELL + "\nr2b_node_id").stdout.strip()
    forged = tmp_path / "faults" / "active" / ids / "f2"
    forged.parent.mkdir()
    shutil.copy(record, forged)
    heal0 = on_node("node0", env, *injector("heal.sh"))
    assert heal0.returncode == 1 and "belongs to node1." in heal0.stderr
    assert (port / "phys_state").read_text().strip() == "3: Disabled" and record.exists()


@needs_root
def test_doctor_and_the_injectors_compute_the_same_node_identity(tmp_path: Path) -> None:
    env = env_for(tmp_path)
    for host in ("node0", "node1"):
        doctor = on_node(host, env, "bash", "-c", NODE_ID_SHELL + "\nr2b_node_id").stdout
        lib = on_node(host, env, "bash", "-c", f"source {INJECTORS}/node.sh && r2b_node_id").stdout
        assert doctor.strip() == lib.strip() and doctor.startswith(f"{host}.")


# ---- 2. the interface guard on the node --------------------------------------------------------


class Netns:
    """One namespace with a veth pair `va`/`vb` (198.18.251.1/24 on va)."""

    def __init__(self) -> None:
        self.name = f"r2b-guard-{os.getpid()}-{time.monotonic_ns() % 100000}"

    def ip(self, *args: str) -> None:
        subprocess.run(["ip", "-n", self.name, *args], check=True, timeout=30)

    def up(self) -> bool:
        out = subprocess.run(
            ["ip", "-n", self.name, "-o", "link", "show", "va"], capture_output=True, text=True
        ).stdout
        return "UP" in out.split(">")[0]


@pytest.fixture
def netns() -> Iterator[Netns]:
    if os.geteuid() != 0 or not shutil.which("ip"):
        pytest.skip("needs root and iproute2")
    ns = Netns()
    subprocess.run(["ip", "netns", "add", ns.name], check=True)
    try:
        ns.ip("link", "add", "va", "type", "veth", "peer", "name", "vb")
        ns.ip("addr", "add", "198.18.251.1/24", "dev", "va")
        ns.ip("link", "set", "va", "up")
        ns.ip("link", "set", "vb", "up")
        yield ns
    finally:
        subprocess.run(["ip", "netns", "del", ns.name], check=False)


@pytest.mark.parametrize("script,extra", [("link.sh", ()), ("tbf.sh", ("--rate", "8mbit"))])
def test_a_hand_run_injector_refuses_a_protected_interface(
    netns: Netns, tmp_path: Path, script: str, extra: tuple[str, ...]
) -> None:
    """Before: `link.sh inject --dev mgmt0` ran; the injectors had no guard of their own."""
    env = env_for(tmp_path)
    args = ("inject", "--tag", "g1", "--protect-if", "eno1,va", "--dev", "va", *extra)
    result = on_node(None, env, *injector(script, *args), netns=netns.name)
    assert result.returncode == 1 and "refused: va" in result.stderr, result.stderr
    assert "protected" in result.stderr and netns.up() and not records(tmp_path / "faults")


def test_the_interface_holding_the_default_route_is_refused(netns: Netns, tmp_path: Path) -> None:
    netns.ip("route", "add", "default", "via", "198.18.251.2", "dev", "va")
    result = on_node(
        None,
        env_for(tmp_path),
        *injector("link.sh", "inject", "--tag", "g2", "--dev", "va"),
        netns=netns.name,
    )
    assert result.returncode == 1 and "default route" in result.stderr, result.stderr
    assert netns.up()


def test_the_interface_of_the_ssh_session_is_refused(netns: Netns, tmp_path: Path) -> None:
    env = env_for(tmp_path, SSH_CONNECTION="198.18.251.9 50000 198.18.251.1 22")
    result = on_node(
        None, env, *injector("link.sh", "inject", "--tag", "g3", "--dev", "va"), netns=netns.name
    )
    assert result.returncode == 1 and "ssh session" in result.stderr, result.stderr
    assert netns.up()


def test_an_hca_port_whose_netdev_is_protected_is_refused(tmp_path: Path) -> None:
    port = fake_ib(tmp_path, netdev="ib1")
    args = ("inject", "--tag", "g4", "--protect-if", "ib1", *IB_ARGS)
    result = subprocess.run(
        injector("ib_port.sh", *args),
        capture_output=True,
        text=True,
        env=env_for(tmp_path),
        timeout=60,
    )
    assert result.returncode == 1 and "refused: ib1" in result.stderr, result.stderr
    assert (port / "phys_state").read_text().strip() == "5: LinkUp"


# ---- 3. leases end completely ---------------------------------------------------------------


def test_disarmed_leases_leave_no_process_behind(tmp_path: Path) -> None:
    """Before: each disarm killed the timer's bash and left its `sleep` running."""
    fake_ib(tmp_path)
    env = env_for(tmp_path)
    leases = []
    try:
        for cycle in range(10):
            tag = f"c{cycle}"
            inject = subprocess.run(
                injector("ib_port.sh", "inject", "--tag", tag, "--lease-s", "600", *IB_ARGS),
                capture_output=True,
                text=True,
                env=env,
                timeout=60,
            )
            assert inject.returncode == 0, inject.stderr
            (record,) = records(tmp_path / "faults")
            leases.append(lease_pid(record))
            deadline = time.monotonic() + 5
            while len(group_members(leases[-1])) < 2 and time.monotonic() < deadline:
                time.sleep(0.05)  # the timer and its sleep, once setsid has run
            assert len(group_members(leases[-1])) == 2, "the lease timer is not running"
            revert = subprocess.run(
                injector("ib_port.sh", "revert", "--tag", tag, *IB_ARGS),
                capture_output=True,
                text=True,
                env=env,
                timeout=60,
            )
            assert revert.returncode == 0, revert.stderr
        time.sleep(0.3)
        left = {pid: group_members(pid) for pid in leases}
        assert not any(left.values()), left
    finally:
        for pid in leases:
            for member in group_members(pid):
                os.kill(member, 15)


# ---- 4. smaller ------------------------------------------------------------------------------


def test_heal_says_how_many_faults_it_reverted(tmp_path: Path) -> None:
    fake_ib(tmp_path)
    fake_ib(tmp_path, ca="mlx5_2")
    env = env_for(tmp_path)
    for tag, ca in (("h1", "mlx5_1"), ("h2", "mlx5_2")):
        args = ("inject", "--tag", tag, "--ca", ca, "--port", "1")
        assert (
            subprocess.run(injector("ib_port.sh", *args), env=env, capture_output=True).returncode
            == 0
        )
    heal = subprocess.run(injector("heal.sh"), env=env, capture_output=True, text=True, timeout=60)
    assert heal.returncode == 0 and "reverted 2 fault(s), 0 failed" in heal.stdout, heal.stdout
    again = subprocess.run(injector("heal.sh"), env=env, capture_output=True, text=True, timeout=60)
    assert "reverted 0 fault(s), 0 failed" in again.stdout


def test_run_from_a_checkout_the_injectors_keep_faults_outside_it(tmp_path: Path) -> None:
    """Before: `faults/` appeared inside the repository."""
    fake_ib(tmp_path)
    env = env_for(tmp_path, HOME=str(tmp_path / "home"))
    del env["R2B_FAULT_DIR"]
    before = (ROOT / "faults").exists()
    args = ("--tag", "co1", *IB_ARGS)
    assert (
        subprocess.run(
            injector("ib_port.sh", "inject", *args), env=env, capture_output=True
        ).returncode
        == 0
    )
    try:
        assert (ROOT / "faults").exists() == before
        assert list((tmp_path / "home" / ".r2bench" / "faults" / "active").glob("*/co1"))
    finally:
        subprocess.run(injector("ib_port.sh", "revert", *args), env=env, capture_output=True)


def test_tags_that_differ_only_in_dot_and_dash_get_their_own_nft_tables(
    netns: Netns, tmp_path: Path
) -> None:
    """Before: `a.b` and `a-b` both became table r2b_a_b; reverting one removed the other's."""
    if not shutil.which("nft"):
        pytest.skip("nft not installed")
    env = env_for(tmp_path)
    for tag in ("a.b", "a-b", "a_b"):
        result = on_node(
            None,
            env,
            *injector("nft_drop.sh", "inject", "--tag", tag, "--dev", "va"),
            netns=netns.name,
        )
        assert result.returncode == 0, result.stderr
    on_node(
        None,
        env,
        *injector("nft_drop.sh", "revert", "--tag", "a.b", "--dev", "va"),
        netns=netns.name,
    )
    tables = subprocess.run(
        ["ip", "netns", "exec", netns.name, "nft", "list", "tables"], capture_output=True, text=True
    ).stdout
    assert len([line for line in tables.splitlines() if "r2b_a" in line]) == 2, tables
    for tag in ("a-b", "a_b"):
        status = on_node(
            None,
            env,
            *injector("nft_drop.sh", "status", "--tag", tag, "--dev", "va"),
            netns=netns.name,
        )
        assert "state=active" in status.stdout
