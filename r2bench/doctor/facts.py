"""What doctor reads on a node: one bash script printing marked sections, and its parser.

The script is built from the testbed (pure text) and runs in one round trip. Each section starts
with a marker line `@@r2bench-doctor:<name>@@`; commands send stderr to stdout so that error
messages (a missing sysfs file, an unreadable `carrier`) land in the section they explain.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field

from r2bench.config.testbed import Nic, NicKind, Testbed
from r2bench.config.testbed import Node as NodeModel
from r2bench.launch.registry import launcher_for

MARKER = "@@r2bench-doctor:"
ABSENT = "@absent"
"""Printed in place of a tool's output when the tool is not installed."""

SSH_PROBE_TIMEOUT_S = 5


@dataclass(frozen=True)
class NodeFacts:
    """Everything gathered from one node (sections empty when it was unreachable)."""

    node: str
    reachable: bool
    error: str = ""
    latency_s: float | None = None
    clock_offset_s: float | None = None
    sections: dict[str, str] = field(default_factory=dict)

    def section(self, name: str) -> str:
        """The text of one section ('' when absent)."""
        return self.sections.get(name, "")


def node_path(path: str) -> str:
    """A shell word for a node path: `~/x` and relative paths are taken from $HOME."""
    if path.startswith("~/"):
        path = path[2:]
    if path.startswith("/"):
        return shlex.quote(path)
    return '"$HOME"/' + shlex.quote(path)


def _section(name: str, body: str) -> str:
    return f"echo '{MARKER}{name}@@'\n{body}\n"


def _tool(command: str, body: str) -> str:
    """Run `body` if `command` exists, else print ABSENT."""
    return f"if command -v {command} >/dev/null 2>&1; then {body}; else echo {ABSENT}; fi"


def _nic_body(nic: Nic) -> str:
    lines = []
    if nic.rdma_device is not None:
        port = f"/sys/class/infiniband/{nic.rdma_device}/ports/{nic.port}"
        lines.append(
            f"for f in state phys_state link_layer; do printf '%s=' $f; cat {port}/$f 2>&1; done"
        )
        lines.append("printf 'rdma_devices='; echo $(ls /sys/class/infiniband 2>/dev/null)")
    if nic.netdev is not None:
        net = f"/sys/class/net/{nic.netdev}"
        lines.append(f"printf 'operstate='; cat {net}/operstate 2>&1")
        lines.append(f"printf 'carrier='; cat {net}/carrier 2>&1")
        lines.append(f"[ -e {net}/device ] && echo device=physical || echo device=virtual")
        lines.append("printf 'netdevs='; echo $(ls /sys/class/net 2>/dev/null)")
    return "\n".join(lines)


def _ssh_probe(peer: NodeModel) -> str:
    """Try passwordless ssh to a peer; print `name<TAB>exit code<TAB>message`."""
    argv = ["ssh", "-o", "BatchMode=yes", "-o", f"ConnectTimeout={SSH_PROBE_TIMEOUT_S}"]
    if peer.ssh.config_file:
        argv += ["-F", peer.ssh.config_file]
    if peer.ssh.port != 22:
        argv += ["-p", str(peer.ssh.port)]
    if peer.ssh.user:
        argv += ["-l", peer.ssh.user]
    argv += [peer.address, "true"]
    return (
        f"out=$({shlex.join(argv)} </dev/null 2>&1); rc=$?; "
        f"printf '%s\\t%s\\t%s\\n' {shlex.quote(peer.name)} $rc \"$(echo $out)\""
    )


def _gpu_sections(node: NodeModel) -> str:
    query = "nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>&1 | head -n 1"
    text = _section("driver", _tool("nvidia-smi", query))
    text += _section("gpus", _tool("nvidia-smi", "nvidia-smi -L 2>&1"))
    if node.gpus > 0:
        text += _section("topo", _tool("nvidia-smi", "nvidia-smi topo -m 2>&1"))
        text += _section("gdr", "lsmod 2>&1 | awk '$1 ~ /^(nvidia_peermem|nv_peer_mem)$/'")
    return text


NODE_ID_SHELL = """r2b_node_id() {
    local host mid=nomachineid file
    host=$(uname -n)
    for file in /etc/machine-id /var/lib/dbus/machine-id; do
        if [[ -r $file ]]; then read -r -n 12 mid <"$file"; break; fi
    done
    host=${host//[^A-Za-z0-9_.-]/_}
    mid=${mid//[^A-Za-z0-9]/_}
    echo "${host:-nohost}.${mid:-nomachineid}"
}"""
"""This node's identity exactly as injectors/node.sh computes it (a test holds them equal):
fault records live under <work_dir>/faults/active/<node id>/."""


PRIVILEGE_SHELL = """uid=$(id -u)
if [ "$uid" -eq 0 ]; then echo uid=0; else
    echo "uid=$uid user=$(id -un)"
    if command -v sudo >/dev/null 2>&1; then
        out=$(sudo -n true 2>&1 </dev/null); echo "sudo_rc=$? $(echo $out)"
    else echo "sudo_rc=127 sudo is not installed"; fi
fi"""
"""Who the login user is and whether `sudo -n` works without a prompt (faults need root)."""


def _faults_body(work_dir: str) -> str:
    """This node's fault records only (a shared work folder holds every node's)."""
    active = node_path(work_dir.rstrip("/") + "/faults/active")
    return (
        f"{NODE_ID_SHELL}\n"
        f'for f in {active}/"$(r2b_node_id)"/*; do [ -f "$f" ] || continue; '
        "printf '%s\\t%s\\n' \"${f##*/}\" \"$(head -c 300 \"$f\" | tr '\\n\\t' '  ')\"; done"
    )


PROCS_SHELL = """me=$(ps -o netns= -p $$ 2>/dev/null | tr -d ' ')
if [ -n "$me" ] && [ "$me" != - ]; then
  ps -ww -eo pid=,netns=,args= 2>/dev/null | awk -v me="$me" '$2 == me { $2 = ""; print }'
else
  ps -ww -eo pid=,args= 2>&1
fi"""
"""This node's processes: those in its network namespace. A namespace node of the virtual
testbed shares the host's process table, and another job on the host is not this node's stray
(on a real node every process is in the one namespace: all of them). Without ps's `netns`
field (busybox), every process."""


def facts_script(testbed: Testbed, node: NodeModel, ssh_peers: list[NodeModel]) -> str:
    """The bash script that prints every section doctor needs from `node`. The ssh probes of
    the peers, a new connection each (over a tenth of a second), start first in the background
    and are read last, so the other sections are gathered meanwhile."""
    text = 'cd "$HOME" 2>/dev/null\n'
    if ssh_peers:
        probes = "; ".join(_ssh_probe(peer) for peer in ssh_peers)
        text += f"exec 9< <({probes})\n"
    text += _section("os", 'uname -r\n( . /etc/os-release 2>/dev/null; echo "${PRETTY_NAME:-}" )')
    text += _gpu_sections(node)
    for nic in node.nics:
        text += _section(f"nic.{nic.name}", _nic_body(nic))
    text += _launcher_tool_section(testbed)
    text += _section("privilege", PRIVILEGE_SHELL)
    text += _section("procs", PROCS_SHELL)
    text += _section("faults", _faults_body(testbed.paths.work_dir))
    if ssh_peers:
        text += _section("ssh", "cat <&9; exec 9<&-")
    return text


def _launcher_tool_section(testbed: Testbed) -> str:
    """`<tool> --version` of the testbed's launcher, in the section named after the tool
    (nothing when the launcher has no tool to check)."""
    tool = launcher_for(testbed.launcher.kind).tool
    if tool is None:
        return ""
    path = shlex.quote(tool.path(testbed))
    return _section(tool.name, _tool(path, f"command -v {path}; {path} --version 2>&1 | head -n 5"))


def parse_sections(text: str) -> dict[str, str]:
    """Split the script's output into {section name: text}."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if line.startswith(MARKER) and line.endswith("@@"):
            current = sections.setdefault(line[len(MARKER) : -2], [])
        elif current is not None:
            current.append(line)
    return {name: "\n".join(lines).strip("\n") for name, lines in sections.items()}


def has_rdma_nic(node: NodeModel) -> bool:
    """Whether the node has an InfiniBand or RoCE NIC (GPUDirect RDMA matters)."""
    return any(nic.kind in (NicKind.IB, NicKind.ROCE) for nic in node.nics)
