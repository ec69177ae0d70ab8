"""Bring a virtual testbed up, tear it down, report its status (the effectful part).

Every object is recorded in the manifest before it is created; `down` removes what the manifest
names plus any namespace of the testbed's exact naming shape, so it also cleans a crashed `up`.
"""

from __future__ import annotations

import ipaddress
import os
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from r2bench.config.testbed import Testbed
from r2bench.safeio import atomic_write
from r2bench.testbeds.virtual import sshd
from r2bench.testbeds.virtual.describe import build_testbed, to_yaml
from r2bench.testbeds.virtual.features import probe_features
from r2bench.testbeds.virtual.gpus import assign_gpus, count_host_gpus, gpu_arch
from r2bench.testbeds.virtual.layout import (
    HOST_ADDRESS,
    TestbedPlan,
    VirtualSpec,
    default_state_dir,
    netns_name,
    plan_testbed,
    subnet,
)
from r2bench.testbeds.virtual.runner import CommandError, run, which
from r2bench.testbeds.virtual.statedir import Manifest, StatePaths
from r2bench.testbeds.virtual.teardown import TestbedError, teardown

Progress = Callable[[str], None]

REQUIRED_TOOLS = {
    "ip": "iproute2",
    "tc": "iproute2",
    "sshd": "openssh-server",
    "ssh": "openssh-client",
    "ssh-keygen": "openssh-client",
    "unshare": "util-linux",
    "mount": "mount",
    "hostname": "hostname",
}
# nft: the --router filter and route_drop faults only; nvidia-smi: --gpus only.
OPTIONAL_TOOLS = {"mpirun": "openmpi-bin", "nft": "nftables"}


@dataclass
class UpResult:
    """What `up` made and how long it took."""

    testbed: Testbed
    testbed_yaml: Path
    seconds: float
    warnings: list[str] = field(default_factory=list)


def missing_tools(tools: dict[str, str]) -> list[str]:
    """'tool (apt package)' for every tool of `tools` that is not installed."""
    return [f"{tool} (apt install {pkg})" for tool, pkg in tools.items() if which(tool) is None]


def _check_state_dir(state: Path) -> None:
    """sshd's StrictModes needs root-owned, not group/world-writable directories up to /."""
    if any(ch.isspace() or ch in "\"'\\" for ch in str(state)):
        raise TestbedError(f"state dir {state} must not contain spaces or quotes", 2)
    for parent in [state, *state.parents]:
        if not parent.exists():
            continue
        info = parent.stat()
        if info.st_uid != 0 or info.st_mode & 0o022:
            raise TestbedError(
                f"state dir {state}: {parent} is not root-owned or is group/world-writable; "
                "sshd refuses keys below it (use e.g. /var/lib/r2bench/virtual/NAME)",
                2,
            )


def _mgmt_subnet_users() -> list[str]:
    """Root-namespace interfaces that already hold an address of the management subnet."""
    out = run(["ip", "-o", "-4", "addr", "show"]).stdout
    users = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) > 3 and ipaddress.ip_address(parts[3].split("/")[0]) in subnet(0):
            users.append(parts[1])
    return users


def preflight(spec: VirtualSpec) -> str:
    """Refuse with a clear reason (exit 2) when `up` cannot work; return sshd's path."""
    if os.geteuid() != 0:
        raise TestbedError("the virtual testbed needs root (network namespaces, sshd)", 2)
    missing = missing_tools(REQUIRED_TOOLS)
    if spec.router:
        missing += missing_tools({"nft": "nftables"})
    if missing:
        raise TestbedError("missing tools: " + ", ".join(missing), 2)
    _check_state_dir(spec.state)
    if Manifest.load(spec.state) is not None:
        raise TestbedError(
            f"testbed {spec.name} is already up (state in {spec.state}); "
            f"run `r2bench testbed down {spec.name}` first",
            2,
        )
    users = _mgmt_subnet_users()
    if users:
        raise TestbedError(
            f"{subnet(0)} is already used by {', '.join(users)} (another virtual testbed?); "
            "one virtual testbed per host",
            2,
        )
    sshd_path = which("sshd")
    assert sshd_path is not None
    return sshd_path


def _mkdir(manifest: Manifest, path: Path) -> None:
    if not path.exists():
        manifest.record("dir", path=str(path))
        path.mkdir(mode=0o700)


def _write(manifest: Manifest, path: Path, text: str, mode: int = 0o644) -> None:
    manifest.record("path", path=str(path))
    # replaces a link at `path` (never writes through it or changes its target's mode)
    atomic_write(path, text, mode=mode)


def _new_manifest(plan: TestbedPlan) -> Manifest:
    state = plan.spec.state
    created = not state.exists()
    state.mkdir(mode=0o700, parents=True, exist_ok=True)
    manifest = Manifest(name=plan.spec.name, state_dir=str(state))
    manifest.info = _manifest_info(plan, created)
    manifest.save()
    return manifest


def _manifest_info(plan: TestbedPlan, created_state_dir: bool) -> dict[str, object]:
    router = plan.router
    return {
        "created_state_dir": created_state_dir,
        "rate": plan.spec.rate,
        "host_if": plan.host_if,
        "host_address": HOST_ADDRESS,
        "nodes": [
            {
                "hostname": n.hostname,
                "netns": n.netns,
                "mgmt_address": n.mgmt_address,
                "nics": dict(zip(n.nic_names, n.nic_addresses, strict=True)),
            }
            for n in plan.nodes
        ],
        "namespaces": list(plan.namespaces),
        "switches": [s.__dict__ for s in (plan.mgmt, *plan.rails)],
        "interfaces": plan.interface_names(),
        "router": None
        if router is None
        else {**router.__dict__, "exec": ["ip", "netns", "exec", router.netns]},
    }


def _run_steps(plan: TestbedPlan, manifest: Manifest, progress: Progress) -> None:
    for step in plan.steps:
        if step.creates is not None:
            manifest.record(step.creates.kind, name=step.creates.name)
        for argv in step.commands:
            run(argv)
        progress(step.what)


def _write_keys(plan: TestbedPlan, manifest: Manifest, paths: StatePaths) -> dict[str, str]:
    """Client key, authorized_keys and one host key per node; returns hostname -> host pubkey."""
    _mkdir(manifest, paths.ssh_dir)
    _mkdir(manifest, paths.sshd_dir)
    _mkdir(manifest, paths.work_dir)
    keys = [(paths.client_key, f"r2bench-{plan.spec.name}-client")]
    keys += [
        (paths.host_key(n.hostname), f"r2bench-{plan.spec.name}-{n.hostname}") for n in plan.nodes
    ]
    pubs = {}
    for key, comment in keys:
        manifest.record("path", path=str(key))
        manifest.record("path", path=f"{key}.pub")
        pubs[key] = sshd.keygen(key, comment)
    _write(manifest, paths.authorized_keys, pubs[paths.client_key] + "\n", 0o600)
    return {n.hostname: pubs[paths.host_key(n.hostname)] for n in plan.nodes}


def _start_sshds(plan: TestbedPlan, manifest: Manifest, sshd_path: str, progress: Progress) -> None:
    paths = StatePaths(plan.spec.state)
    path_env = os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin") + ":/usr/sbin:/sbin"
    for node in plan.nodes:
        conf = sshd.sshd_config_text(paths, node, path_env)
        _write(manifest, paths.sshd_config(node.hostname), conf)
        for path in (paths.sshd_pid(node.hostname), paths.sshd_log(node.hostname)):
            manifest.record("path", path=str(path))
        manifest.record(
            "sshd", node=node.hostname, netns=node.netns, pidfile=str(paths.sshd_pid(node.hostname))
        )
        try:
            run(sshd.start_command(sshd_path, paths, node))
        except CommandError as exc:
            log = paths.sshd_log(node.hostname)
            raise CommandError(
                exc.argv, exc.returncode, log.read_text() if log.is_file() else exc.stderr
            ) from exc
        pid = sshd.wait_for_pid(paths.sshd_pid(node.hostname), paths.sshd_log(node.hostname))
        manifest.record("pid", node=node.hostname, pid=pid)
        progress(f"sshd of {node.hostname} (pid {pid}) on {node.mgmt_address}:22")


def _build(
    plan: TestbedPlan, manifest: Manifest, sshd_path: str, progress: Progress, host_gpus: int
) -> Testbed:
    paths = StatePaths(plan.spec.state)
    probe_ns = netns_name(plan.spec.name, "probe")
    probed = probe_features(probe_ns, lambda: manifest.record("netns", name=probe_ns))
    manifest.info["missing_features"] = probed.reasons
    manifest.save()
    if plan.router is not None and not probed.features.get("nft_bridge"):
        reason = probed.reasons.get("nft_bridge", "")
        raise TestbedError(f"--router needs nftables' bridge family: {reason}", 2)
    if plan.spec.rate is not None and not probed.features.get("tbf"):
        reason = probed.reasons.get("tbf", "")
        raise TestbedError(f"--rate needs the tbf qdisc (sch_tbf): {reason}", 2)
    progress(
        "kernel features: "
        + ", ".join(f"{k}={'yes' if v else 'no'}" for k, v in probed.features.items())
    )
    _run_steps(plan, manifest, progress)
    host_keys = _write_keys(plan, manifest, paths)
    _write(manifest, paths.known_hosts, sshd.known_hosts_text(host_keys, plan.nodes))
    _write(manifest, paths.ssh_config, sshd.ssh_config_text(paths, plan.nodes))
    progress("keys, known_hosts and ssh_config")
    _start_sshds(plan, manifest, sshd_path, progress)
    _wait_links_up(plan)
    progress("every node link is up")
    testbed = build_testbed(
        plan, probed.features, host_gpus=host_gpus, gpu_arch=host_gpu_arch(plan.spec)
    )
    _write(manifest, paths.testbed_yaml, to_yaml(testbed))
    return testbed


LINK_UP_TIMEOUT_S = 10.0


def host_gpu_arch(spec: VirtualSpec) -> str | None:
    """The host's CUDA compute capability (`90`) for `--gpus`, when nvidia-smi tells it."""
    if not spec.gpus or which("nvidia-smi") is None:
        return None
    try:
        return gpu_arch(
            run(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"]).stdout
        )
    except CommandError:
        return None


def host_gpu_count(spec: VirtualSpec) -> int:
    """GPUs of this host for `--gpus` (`--host-gpus`, else `nvidia-smi -L`); 0 without --gpus."""
    if not spec.gpus:
        return 0
    if spec.host_gpus is not None:
        return spec.host_gpus
    if which("nvidia-smi") is None:
        raise TestbedError("--gpus: nvidia-smi not found on this host (is the driver there?)", 2)
    try:
        return count_host_gpus(run(["nvidia-smi", "-L"]).stdout)
    except CommandError as exc:
        raise TestbedError(f"--gpus: nvidia-smi -L failed: {exc}", 2) from exc


def _wait_links_up(plan: TestbedPlan) -> None:
    """veth links reach operstate UP a moment after `ip link set up`: wait, so the testbed is
    usable (doctor passes, traffic flows) the moment `up` returns."""
    deadline = time.monotonic() + LINK_UP_TIMEOUT_S
    for node in plan.nodes:
        names = ("mgmt0", *node.nic_names)
        while True:
            listing = run(["ip", "-n", node.netns, "-o", "link", "show"]).stdout
            down = [n for n in names if not _state_up(listing, n)]
            if not down:
                break
            if time.monotonic() > deadline:
                raise TestbedError(
                    f"{node.hostname}: links {down} not up after {LINK_UP_TIMEOUT_S:g} s", 1
                )
            time.sleep(0.05)


def _state_up(listing: str, ifname: str) -> bool:
    """Whether `ip -o link show` lists `ifname` (shown as `ifname@peer`) in state UP."""
    for line in listing.splitlines():
        fields = line.split(": ", 2)
        if len(fields) == 3 and fields[1].split("@")[0] == ifname:
            return " state UP " in fields[2]
    return False


def up(spec: VirtualSpec, progress: Progress = lambda _: None) -> UpResult:
    """Create the testbed of `spec`; on failure roll back and raise TestbedError."""
    start = time.monotonic()
    sshd_path = preflight(spec)
    warnings = [f"optional tool missing: {m}" for m in missing_tools(OPTIONAL_TOOLS)]
    plan = plan_testbed(spec)
    host_gpus = host_gpu_count(spec)
    # Refuse an impossible GPU layout before anything is created.
    assign_gpus(spec.name, [node.hostname for node in plan.nodes], spec.gpus, host_gpus)
    manifest = _new_manifest(plan)
    try:
        testbed = _build(plan, manifest, sshd_path, progress, host_gpus)
    except (CommandError, OSError) as exc:
        progress(f"failed: {exc}; rolling back")
        teardown(spec.name, spec.state, lambda _: None)
        raise TestbedError(f"up failed: {exc}", 1) from exc
    except BaseException:
        progress("stopped; rolling back")
        teardown(spec.name, spec.state, lambda _: None)
        raise
    paths = StatePaths(spec.state)
    return UpResult(testbed, paths.testbed_yaml, time.monotonic() - start, warnings)


@contextmanager
def throwaway_testbed(given: Path | None, prefix: str, **spec: Any) -> Iterator[Path]:
    """The testbed file `given`, or one of a testbed brought up for the block and taken down
    after it (benchmarks and tests that bring their own). `spec`: VirtualSpec fields."""
    if given is not None:
        yield given
        return
    name = f"{prefix}{uuid.uuid4().hex[:6]}"
    state = default_state_dir(name)
    try:
        yield up(VirtualSpec(name=name, state_dir=state, **spec)).testbed_yaml
    finally:
        teardown(name, state, lambda _: None)
