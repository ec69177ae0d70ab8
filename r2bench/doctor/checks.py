"""Doctor's checks: pure functions from gathered text (NodeFacts) to CheckResults.

Per-node checks look at one node's facts; fleet checks (same OS, driver, launcher tool everywhere)
compare all reachable nodes and flag the ones that differ from the most common value.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import Enum

from r2bench.config.testbed import Nic, NicKind, Testbed, TestbedKind
from r2bench.config.testbed import Node as NodeModel
from r2bench.doctor.facts import ABSENT, NodeFacts, has_rdma_nic
from r2bench.launch.base import ToolCheck
from r2bench.launch.registry import LAUNCHERS

CLOCK_WARN_S = 0.050
"""Clock offsets above this (in either direction) are reported."""

WORKLOAD_PATTERNS = (re.compile(r"(^|[\s/])\w+_perf(\s|$)"), re.compile(r"r2bench\.workloads"))
"""Processes that are leftovers of a benchmark run: nccl-tests binaries, r2bench's workload."""


class Status(str, Enum):
    """Outcome of one check on one node."""

    OK = "ok"
    WARN = "warn"
    FAIL = "fail"
    SKIP = "skip"


@dataclass(frozen=True)
class CheckResult:
    """One check on one node: its status, what was seen, and how to fix a problem."""

    node: str
    check: str
    status: Status
    detail: str
    fix: str = ""


def _result(node: str, check: str, status: Status, detail: str, fix: str = "") -> CheckResult:
    return CheckResult(node, check, status, detail, fix)


# ---- reachability and clocks -------------------------------------------------------------


def check_reachable(facts: NodeFacts, model: NodeModel) -> CheckResult:
    """The node answered; its round-trip time for a trivial command."""
    if not facts.reachable:
        user = f"{model.ssh.user}@" if model.ssh.user else ""
        fix = (
            f"check the address, user, key and host key: ssh -p {model.ssh.port} "
            f"{user}{model.address} true"
        )
        return _result(facts.node, "reachable", Status.FAIL, facts.error, fix)
    latency = f"{facts.latency_s * 1000:.1f} ms" if facts.latency_s is not None else "?"
    return _result(facts.node, "reachable", Status.OK, f"round trip {latency}")


def check_clock(facts: NodeFacts) -> CheckResult:
    """Offset of the node's clock from the controller's (node time - request midpoint)."""
    offset = facts.clock_offset_s
    if offset is None:
        return _result(facts.node, "clock", Status.FAIL, "could not read the node's clock")
    detail = f"offset {offset * 1000:+.1f} ms"
    if abs(offset) > CLOCK_WARN_S:
        fix = "synchronise clocks (chrony or systemd-timesyncd: timedatectl set-ntp true)"
        return _result(facts.node, "clock", Status.WARN, f"{detail} (> 50 ms)", fix)
    return _result(facts.node, "clock", Status.OK, detail)


# ---- fleet consistency ------------------------------------------------------------------


def _same_everywhere(
    values: dict[str, str], check: str, mismatch: Status, fix: str
) -> list[CheckResult]:
    """Flag nodes whose value differs from the most common one."""
    if not values:
        return []
    common, _ = Counter(values.values()).most_common(1)[0]
    results = []
    for node, value in values.items():
        if value == common:
            results.append(_result(node, check, Status.OK, value))
        else:
            detail = f"{value} (most nodes: {common})"
            results.append(_result(node, check, mismatch, detail, fix))
    return results


def os_version(facts: NodeFacts) -> str:
    """`kernel, distribution` from the os section."""
    lines = [line.strip() for line in facts.section("os").splitlines() if line.strip()]
    return ", ".join(lines[:2]) or "unknown"


def check_os(all_facts: Iterable[NodeFacts]) -> list[CheckResult]:
    """Kernel and distribution, the same on every node (a difference is a warning)."""
    values = {facts.node: os_version(facts) for facts in all_facts}
    fix = "use the same image on every node (results are not comparable otherwise)"
    return _same_everywhere(values, "os/kernel", Status.WARN, fix)


def check_driver(all_facts: Iterable[NodeFacts], models: dict[str, NodeModel]) -> list[CheckResult]:
    """NVIDIA driver version on GPU nodes, the same on all of them."""
    values: dict[str, str] = {}
    results: list[CheckResult] = []
    for facts in all_facts:
        driver = facts.section("driver").strip()
        if models[facts.node].gpus == 0:
            results.append(_result(facts.node, "driver", Status.SKIP, "no GPUs in the testbed"))
        elif driver == ABSENT or not re.fullmatch(r"[\d.]+", driver):
            fix = "install the NVIDIA driver (nvidia-smi must work)"
            results.append(_result(facts.node, "driver", Status.FAIL, driver or "none", fix))
        else:
            values[facts.node] = driver
    fix = "install the same NVIDIA driver version on every node"
    return results + _same_everywhere(values, "driver", Status.FAIL, fix)


def check_launcher_tools(all_facts: Iterable[NodeFacts], testbed: Testbed) -> list[CheckResult]:
    """The testbed's launcher tool (mpirun) exists on every node, in the same version; the
    other launchers' tools are skipped, their rows saying which launcher the testbed uses."""
    facts = list(all_facts)
    kind = testbed.launcher.kind
    results: list[CheckResult] = []
    for spec in LAUNCHERS.values():
        if spec.tool is None:
            continue
        if spec.kind is kind:
            results += _check_tool(spec.tool, facts, testbed)
        else:
            skip = f"launcher is {kind.value}"
            results += [_result(f.node, spec.tool.name, Status.SKIP, skip) for f in facts]
    return results


def _check_tool(tool: ToolCheck, all_facts: list[NodeFacts], testbed: Testbed) -> list[CheckResult]:
    values: dict[str, str] = {}
    results: list[CheckResult] = []
    for facts in all_facts:
        text = facts.section(tool.name)
        version = None if text.strip() in ("", ABSENT) else tool.version(text)
        if version is None:
            fix = tool.missing_fix.format(path=tool.path(testbed))
            results.append(_result(facts.node, tool.name, Status.FAIL, "not found", fix))
        else:
            values[facts.node] = version
    return results + _same_everywhere(values, tool.name, Status.FAIL, tool.mixed_fix)


# ---- GPUs --------------------------------------------------------------------------------


def count_gpus(text: str) -> int:
    """Number of `GPU <n>: ...` lines in `nvidia-smi -L` output."""
    return len(re.findall(r"^GPU \d+:", text, re.MULTILINE))


def check_gpus(facts: NodeFacts, model: NodeModel) -> CheckResult:
    """GPUs visible to nvidia-smi, as many as the testbed says."""
    text = facts.section("gpus").strip()
    found = 0 if text == ABSENT else count_gpus(text)
    if model.gpus == 0:
        if found:
            detail = f"testbed says 0, nvidia-smi lists {found}"
            return _result(facts.node, "gpus", Status.WARN, detail, "set gpus: in the testbed")
        return _result(facts.node, "gpus", Status.OK, "none")
    if model.env.get("CUDA_VISIBLE_DEVICES") and found >= model.gpus:
        return _namespace_gpus(facts.node, model, found)
    if found == model.gpus:
        return _result(facts.node, "gpus", Status.OK, f"{found} visible")
    if text == ABSENT:
        detail = "nvidia-smi not found"
    else:
        detail = f"{found} visible, testbed says {model.gpus}"
        if not found:
            detail += ": " + (text.splitlines() or [""])[0][:120]
    fix = "check the driver (nvidia-smi -L), CUDA_VISIBLE_DEVICES, or gpus: in the testbed"
    return _result(facts.node, "gpus", Status.FAIL, detail, fix)


def _namespace_gpus(node: str, model: NodeModel, found: int) -> CheckResult:
    """A namespace node on a GPU host: it uses some of the host's GPUs, maybe with other nodes."""
    devices = model.env["CUDA_VISIBLE_DEVICES"]
    if not model.gpus_shared:
        detail = f"GPU(s) {devices} of the host's {found}, this node's own (NCCL_HOSTID per node)"
        return _result(node, "gpus", Status.OK, detail)
    detail = (
        f"GPU(s) {devices} of the host's {found}, SHARED with other nodes: NCCL sees separate "
        "hosts (NCCL_HOSTID per node), so NVLink, P2P and SHM are not used between nodes and only "
        "the network path is measured; ranks time-share the device (no GPU compute figures)"
    )
    return _result(node, "gpus", Status.WARN, detail)


@dataclass(frozen=True)
class Topology:
    """`nvidia-smi topo -m`: the link type between each GPU and each NIC."""

    links: dict[str, dict[str, str]]
    nic_names: dict[str, str]


def parse_topology(text: str) -> Topology | None:
    """Parse the matrix and the NIC legend (`NIC0: mlx5_0`); None if there is no matrix."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.split()[:1] == ["GPU0"]), None)
    if start is None:
        return None
    header = lines[start].split()
    columns = header[: header.index("CPU")] if "CPU" in header else header
    links: dict[str, dict[str, str]] = {}
    for line in lines[start + 1 :]:
        cells = line.split()
        if len(cells) > len(columns) and _is_gpu(cells[0]):
            links[cells[0]] = dict(zip(columns, cells[1 : len(columns) + 1], strict=True))
    legend = dict(re.findall(r"^\s*(NIC\d+):\s*(\S+)", text, re.MULTILINE))
    return Topology(links, legend)


_CLOSENESS = ("PIX", "PXB", "PHB", "NODE", "SYS")


def _is_gpu(column: str) -> bool:
    return re.fullmatch(r"GPU\d+", column) is not None


def nearest_nics(topology: Topology) -> dict[str, tuple[list[str], str]]:
    """For each GPU, the NICs at the closest link type, and that type."""
    nearest: dict[str, tuple[list[str], str]] = {}
    for gpu, row in topology.links.items():
        nic_links = {col: link for col, link in row.items() if not _is_gpu(col)}
        ranked = [link for link in _CLOSENESS if link in nic_links.values()]
        if ranked:
            names = [
                topology.nic_names.get(c, c) for c, link in nic_links.items() if link == ranked[0]
            ]
            nearest[gpu] = (names, ranked[0])
    return nearest


def check_affinity(facts: NodeFacts, model: NodeModel) -> CheckResult:
    """Which NIC is closest to each GPU (informational)."""
    if model.gpus == 0:
        return _result(facts.node, "gpu-nic affinity", Status.SKIP, "no GPUs")
    topology = parse_topology(facts.section("topo"))
    if topology is None:
        detail = "no topology from nvidia-smi topo -m"
        return _result(
            facts.node, "gpu-nic affinity", Status.WARN, detail, "run nvidia-smi topo -m"
        )
    nearest = nearest_nics(topology)
    if not nearest:
        return _result(facts.node, "gpu-nic affinity", Status.OK, "no NICs in the topology")
    detail = ", ".join(f"{gpu}->{'/'.join(nics)}({link})" for gpu, (nics, link) in nearest.items())
    return _result(facts.node, "gpu-nic affinity", Status.OK, detail)


def check_gdr(facts: NodeFacts, model: NodeModel) -> CheckResult:
    """GPUDirect RDMA kernel module (nvidia_peermem or the older nv_peer_mem)."""
    if model.gpus == 0 or not has_rdma_nic(model):
        return _result(facts.node, "gpudirect rdma", Status.SKIP, "no GPUs with ib/roce NICs")
    modules = facts.section("gdr").split()
    if modules:
        return _result(facts.node, "gpudirect rdma", Status.OK, f"{modules[0]} loaded")
    fix = _as_root(model.sudo, "modprobe nvidia_peermem")
    fix += " (without it NCCL copies through host memory)"
    return _result(facts.node, "gpudirect rdma", Status.WARN, "nvidia_peermem not loaded", fix)


# ---- NICs --------------------------------------------------------------------------------


def parse_fields(text: str) -> dict[str, str]:
    """`key=value` lines into a dict (values stripped)."""
    pairs = (line.partition("=") for line in text.splitlines() if "=" in line)
    return {key.strip(): value.strip() for key, _, value in pairs}


def _unreadable(value: str) -> bool:
    return value == "" or value.startswith("cat:")


def _as_root(sudo: bool, command: str) -> str:
    """A root command as the user types it on that node: `sudo` only where the testbed uses it."""
    return f"sudo {command}" if sudo else command


def _rdma_problem(nic: Nic, values: dict[str, str], sudo: bool) -> tuple[str, str] | None:
    """(what is wrong, how to fix it) for an RDMA port, or None when it is active. The port's
    link layer decides the fix: an InfiniBand port is enabled with ibportstate and activated
    by the subnet manager; a RoCE port follows its Ethernet interface (link, carrier) and has
    no subnet management agent for ibportstate to talk to."""
    dev, port = nic.rdma_device, nic.port
    if _unreadable(values.get("state", "")):
        others = values.get("rdma_devices") or "none"
        fix = "load the driver (modprobe mlx5_ib) or fix rdma_device/port in the testbed"
        return f"no port {port} on {dev} (RDMA devices: {others})", fix
    expected = "InfiniBand" if nic.kind is NicKind.IB else "Ethernet"
    layer = values.get("link_layer", "")
    if layer != expected:
        actual = {"InfiniBand": "ib", "Ethernet": "roce"}.get(layer)
        fix = f"set kind: {actual} for this NIC" if actual else "check the driver"
        return f"{dev}/{port} link_layer {layer or '?'}, expected {expected}", f"{fix} ({dev})"
    state, phys = values["state"], values.get("phys_state", "")
    if "ACTIVE" in state:
        return None
    where = f"{dev}/{port} state {state}, phys_state {phys}"
    if nic.kind is not NicKind.IB:
        netdev = _netdev_problem(nic, values, sudo) if nic.netdev else None
        if netdev is not None:
            return f"{where}; {netdev[0]}", f"the RoCE port follows {nic.netdev}: {netdev[1]}"
        check = f"ip link show dev {nic.netdev}; ethtool {nic.netdev}"
        return where, f"the RoCE port follows its Ethernet interface: {check}"
    enable = _as_root(sudo, f"ibportstate -C {dev} -P {port} -D 0 {port} enable")
    fix = f"enable it: {enable}; check cable"
    if "INIT" in state:
        fix = "the link is up but no subnet manager activated it: start opensm"
    return where, fix


def _netdev_problem(nic: Nic, values: dict[str, str], sudo: bool) -> tuple[str, str] | None:
    """(what is wrong, how to fix it) for a kernel interface, or None when it is up."""
    name = nic.netdev
    operstate = values.get("operstate", "")
    if _unreadable(operstate):
        others = values.get("netdevs") or "none"
        return f"no interface {name} (interfaces: {others})", "fix netdev: in the testbed"
    if operstate == "up":
        return None
    if operstate == "unknown" and (name == "lo" or values.get("device") == "virtual"):
        return None
    carrier = values.get("carrier", "")
    note = "carrier unreadable: admin-down" if _unreadable(carrier) else f"carrier {carrier}"
    fix = _as_root(sudo, f"ip link set dev {name} up") + "; check cable"
    if carrier == "0":  # administratively up, nothing on the wire
        fix = f"no carrier: check the cable and the switch port (ethtool {name})"
    return f"{name} operstate {operstate} ({note})", fix


def _nic_summary(nic: Nic, values: dict[str, str]) -> str:
    parts = []
    if nic.rdma_device is not None:
        parts.append(f"{nic.rdma_device}/{nic.port} {values.get('state', '?')}")
        parts.append(values.get("link_layer", "?"))
    if nic.netdev is not None and _ipoib_optional(nic):
        operstate = values.get("operstate", "?")
        state = "absent" if _unreadable(operstate) else f"{operstate} (optional)"
        parts.append(f"IPoIB {nic.netdev} {state}")
    elif nic.netdev is not None:
        operstate = values.get("operstate", "?")
        if operstate == "unknown":
            operstate = "unknown (normal for lo/virtual links: counted as up)"
        parts.append(f"{nic.netdev} {operstate}")
    return ", ".join(parts)


def _ipoib_optional(nic: Nic) -> bool:
    """An IB port's IPoIB interface is not on the RDMA path: it matters only where the
    controller or the bootstrap reaches the node through it (the management NIC)."""
    return nic.kind is NicKind.IB and not nic.management


def check_nic(facts: NodeFacts, nic: Nic, sudo: bool = True) -> CheckResult:
    """The NIC exists and is up: RDMA port ACTIVE with the right link layer, netdev up (an
    IB port's IPoIB interface is reported, not required)."""
    values = parse_fields(facts.section(f"nic.{nic.name}"))
    check = f"nic {nic.name}"
    problem = None
    if nic.rdma_device is not None:
        problem = _rdma_problem(nic, values, sudo)
    if problem is None and nic.netdev is not None and not _ipoib_optional(nic):
        problem = _netdev_problem(nic, values, sudo)
    if problem is not None:
        return _result(facts.node, check, Status.FAIL, problem[0], problem[1])
    return _result(facts.node, check, Status.OK, _nic_summary(nic, values))


# ---- leftovers ---------------------------------------------------------------------------


def stray_processes(ps_text: str) -> list[tuple[int, str]]:
    """(pid, command line) of workload processes in `ps -eo pid=,args=` output."""
    found = []
    for line in ps_text.splitlines():
        pid, _, args = line.strip().partition(" ")
        if pid.isdigit() and any(pattern.search(args) for pattern in WORKLOAD_PATTERNS):
            found.append((int(pid), args.strip()))
    return found


def check_processes(facts: NodeFacts) -> CheckResult:
    """No benchmark process left over from an earlier run."""
    found = stray_processes(facts.section("procs"))
    if not found:
        return _result(facts.node, "stray processes", Status.OK, "none")
    detail = "; ".join(f"{pid} {args[:60]}" for pid, args in found[:5])
    pids = " ".join(str(pid) for pid, _ in found)
    fix = f"stop them before a run (they skew every number): kill {pids}"
    return _result(facts.node, "stray processes", Status.FAIL, detail, fix)


def check_root(facts: NodeFacts, model: NodeModel) -> CheckResult:
    """Root on the node, directly or by `sudo -n`: every fault, the counter sampler and heal
    run as root, and `sudo -n` fails rather than prompt (found out mid-sweep otherwise)."""
    fields = dict(re.findall(r"(\w+)=(\S*)", facts.section("privilege")))
    if fields.get("uid") == "0":
        return _result(facts.node, "root", Status.OK, "logged in as root")
    user = fields.get("user", "the login user")
    if "uid" not in fields:
        return _result(facts.node, "root", Status.SKIP, "not reported")
    fix = (
        f"give {user} passwordless sudo on {facts.node} (a sudoers line "
        f"`{user} ALL=(ALL) NOPASSWD: ALL`: fault commands run as `sudo -n bash ...`), "
        "or log in as root (ssh.user: root)"
    )
    if not model.sudo:
        detail = f"{user} is not root and the testbed says sudo: false: faults cannot be injected"
        fix = (
            f"set sudo: true for {facts.node} in the testbed file and give {user} passwordless "
            "sudo, or log in as root (ssh.user: root)"
        )
        return _result(facts.node, "root", Status.FAIL, detail, fix)
    line = next(
        (ln for ln in facts.section("privilege").splitlines() if ln.startswith("sudo_rc=")), ""
    )
    code, _, message = line.removeprefix("sudo_rc=").partition(" ")
    if code == "0":
        return _result(facts.node, "root", Status.OK, f"{user}, passwordless sudo")
    detail = f"`sudo -n true` as {user} failed: {message.strip() or f'exit {code}'}"
    return _result(facts.node, "root", Status.FAIL, detail, fix)


def _fault_summary(record: str) -> str:
    """`kind link` from an injector's record (`kind=link script=... injected_at=...`)."""
    kind = re.search(r"(?:^|\s)kind=(\S+)", record)
    return f"kind {kind.group(1)}" if kind else record.strip()[:60]


def check_faults(facts: NodeFacts, work_dir: str, sudo: bool = True) -> CheckResult:
    """No r2bench fault of this node still active (<work_dir>/faults/active/<node id>/)."""
    entries = [line.partition("\t") for line in facts.section("faults").splitlines()]
    tags = [(tag, _fault_summary(record)) for tag, _, record in entries if tag.strip()]
    if not tags:
        return _result(facts.node, "active faults", Status.OK, "none")
    detail = "; ".join(f"{tag} ({summary})" if summary else tag for tag, summary in tags)
    heal = _as_root(sudo, f"bash {work_dir.rstrip('/')}/injectors/heal.sh")
    fix = f"revert them: `r2bench heal -t TESTBED`, or on {facts.node}: {heal}"
    return _result(facts.node, "active faults", Status.FAIL, detail, fix)


# ---- passwordless ssh between nodes ------------------------------------------------------


def parse_ssh_probes(text: str) -> dict[str, tuple[int, str]]:
    """{peer: (ssh exit code, message)} from the first node's ssh section."""
    probes = {}
    for line in text.splitlines():
        peer, _, rest = line.partition("\t")
        code, _, message = rest.partition("\t")
        if code.lstrip("-").isdigit():
            probes[peer] = (int(code), message.strip())
    return probes


def check_ssh_mesh(all_facts: list[NodeFacts], testbed: Testbed) -> list[CheckResult]:
    """Passwordless ssh from the first node to each other node (mpirun needs it)."""
    name = "ssh from first"
    if testbed.kind is TestbedKind.LOCAL or len(all_facts) < 2:
        return [_result(f.node, name, Status.SKIP, "single machine") for f in all_facts]
    origin = all_facts[0]
    if not origin.reachable:
        return [_result(f.node, name, Status.SKIP, f"{origin.node} unreachable") for f in all_facts]
    results = [_result(origin.node, name, Status.OK, "origin of the probes")]
    probes = parse_ssh_probes(origin.section("ssh"))
    for facts in all_facts[1:]:
        code, message = probes.get(facts.node, (None, f"{origin.node} was not probed"))
        if code == 0:
            results.append(_result(facts.node, name, Status.OK, f"from {origin.node}"))
            continue
        fix = (
            f"on {origin.node}: ssh-keygen, then add its public key to {facts.node}'s "
            "~/.ssh/authorized_keys and accept the host key once (ssh-keyscan >> known_hosts)"
        )
        results.append(_result(facts.node, name, Status.FAIL, message or f"exit {code}", fix))
    return results


def check_transport(model: NodeModel) -> CheckResult:
    """Which network transport NCCL can use from this node, and what that rules out."""
    rdma = [nic.name for nic in model.data_nics if nic.kind in (NicKind.IB, NicKind.ROCE)]
    if rdma:
        return _result(model.name, "transport", Status.OK, f"IB verbs possible ({', '.join(rdma)})")
    detail = (
        "NET/Socket only (no IB/RoCE data NIC): R2CC_DISCONNECTED_HCA cannot fire here "
        "(R-2CCL injects it in its IB transport only; fault a NIC instead)"
    )
    return _result(model.name, "transport", Status.OK, detail)


# ---- all checks --------------------------------------------------------------------------


NodeCheck = Callable[[NodeFacts, NodeModel], CheckResult]
PER_NODE: tuple[NodeCheck, ...] = (check_gpus, check_affinity, check_gdr)


def _node_results(facts: NodeFacts, model: NodeModel, testbed: Testbed) -> list[CheckResult]:
    results = [check_reachable(facts, model)]
    if not facts.reachable:
        return results
    results.append(check_clock(facts))
    results += [check(facts, model) for check in PER_NODE]
    results += [check_nic(facts, nic, model.sudo) for nic in model.nics]
    results.append(check_transport(model))
    results.append(check_root(facts, model))
    results.append(check_processes(facts))
    results.append(check_faults(facts, testbed.paths.work_dir, model.sudo))
    return results


def run_checks(testbed: Testbed, all_facts: list[NodeFacts]) -> list[CheckResult]:
    """Every check on every node, from the gathered facts (in testbed node order)."""
    models = {model.name: model for model in testbed.nodes}
    results: list[CheckResult] = []
    for facts in all_facts:
        results += _node_results(facts, models[facts.node], testbed)
    reachable = [facts for facts in all_facts if facts.reachable]
    results += check_os(reachable)
    results += check_driver(reachable, models)
    results += check_launcher_tools(reachable, testbed)
    results += check_ssh_mesh(all_facts, testbed)
    unreachable = [f.node for f in all_facts if not f.reachable]
    return results + [_result(n, "other checks", Status.SKIP, "unreachable") for n in unreachable]


def failed(results: Iterable[CheckResult]) -> bool:
    """Whether any check failed."""
    return any(result.status is Status.FAIL for result in results)
