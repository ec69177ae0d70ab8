"""sshd inside each node: keys, configs, known_hosts and ssh_config (text is built purely).

Each node's sshd runs inside the node's network namespace under ``unshare --uts --mount``: the
UTS namespace gives sessions the node's hostname, the mount namespace gets a private tmpfs on
/run (sshd needs /run/sshd; the host's /run is left alone). Nothing under /etc/ssh or /root/.ssh
is read or written: keys, authorized_keys, pid files and logs live in the state directory.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path

from r2bench.testbeds.virtual.layout import MGMT_IF, NodePlan
from r2bench.testbeds.virtual.runner import CommandError, run
from r2bench.testbeds.virtual.statedir import StatePaths

# Constant script; the hostname and the sshd command arrive as positional arguments.
_NODE_INIT = (
    'hostname "$1" && mount -t tmpfs -o mode=0755,size=1m r2b-run /run'
    ' && mkdir -m 0755 /run/sshd && shift && exec "$@"'
)
PID_WAIT_S = 5.0


def sshd_config_text(paths: StatePaths, node: NodePlan, path_env: str) -> str:
    """sshd_config of one node: key-only root login on the management address, no PAM."""
    lines = [
        f"# r2bench virtual testbed node {node.hostname} ({MGMT_IF})",
        f"ListenAddress {node.mgmt_address}:22",
        f"HostKey {paths.host_key(node.hostname)}",
        f"PidFile {paths.sshd_pid(node.hostname)}",
        f"AuthorizedKeysFile {paths.authorized_keys}",
        "AuthenticationMethods publickey",
        "PubkeyAuthentication yes",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "UsePAM no",
        "PermitRootLogin prohibit-password",
        "StrictModes yes",
        "UseDNS no",
        "PrintMotd no",
        "PrintLastLog no",
        "X11Forwarding no",
        "MaxStartups 100:30:200",
        "MaxSessions 100",
        "AcceptEnv R2B_* NCCL_* R2CC_* OMPI_*",
        # The nodes share the host's home: PATH comes from here, and SHLVL=1 keeps bash from
        # sourcing the host user's interactive ~/.bashrc for every non-interactive command
        # (Debian's bash does so for ssh commands at SHLVL < 2; pyenv/conda init costs ~0.3 s).
        # One SetEnv line: sshd keeps only the first value of a keyword.
        f"SetEnv PATH={path_env} SHLVL=1",
        "Subsystem sftp internal-sftp",
    ]
    return "\n".join(lines) + "\n"


def ssh_config_text(paths: StatePaths, nodes: Sequence[NodePlan]) -> str:
    """Client config: `ssh -F <state>/ssh_config node1` (or the address) from anywhere."""
    blocks = []
    for node in nodes:
        blocks.append(
            "\n".join(
                [
                    f"Host {node.hostname} {node.mgmt_address}",
                    f"    HostName {node.mgmt_address}",
                    "    User root",
                    "    Port 22",
                    f"    IdentityFile {paths.client_key}",
                    "    IdentitiesOnly yes",
                    f"    UserKnownHostsFile {paths.known_hosts}",
                    "    GlobalKnownHostsFile /dev/null",
                    "    StrictHostKeyChecking yes",
                    "    BatchMode yes",
                    "    ConnectTimeout 5",
                    # OpenSSH 9's default key exchange (sntrup761x25519) costs the client about
                    # 70 ms of CPU a connection here, a third of the doctor's ssh probe and of
                    # mpirun's launch; the testbed's own sshd takes this one.
                    "    KexAlgorithms curve25519-sha256",
                    "    LogLevel ERROR",
                ]
            )
        )
    return "\n\n".join(blocks) + "\n"


def known_hosts_text(host_keys: dict[str, str], nodes: Sequence[NodePlan]) -> str:
    """known_hosts lines for each node, by name and address (`host_keys`: hostname -> pubkey)."""
    lines = []
    for node in nodes:
        key_type, key_b64 = host_keys[node.hostname].split()[:2]
        lines.append(f"{node.hostname},{node.mgmt_address} {key_type} {key_b64}")
    return "\n".join(lines) + "\n"


def keygen(key: Path, comment: str) -> str:
    """Generate an ed25519 key pair at `key` (no passphrase); return the public key line."""
    run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(key)])
    return key.with_name(key.name + ".pub").read_text().strip()


def start_command(sshd: str, paths: StatePaths, node: NodePlan) -> list[str]:
    """argv that starts node's sshd in its namespace with its own hostname and /run."""
    conf = str(paths.sshd_config(node.hostname))
    log = str(paths.sshd_log(node.hostname))
    return [
        "ip", "netns", "exec", node.netns,
        "unshare", "--uts", "--mount", "--propagation", "private", "--",
        "sh", "-c", _NODE_INIT, "r2b-node-init", node.hostname,
        sshd, "-f", conf, "-E", log,
    ]  # fmt: skip


def wait_for_pid(pidfile: Path, log: Path, sleep: Callable[[float], None] = time.sleep) -> int:
    """The pid sshd wrote after daemonizing; raise with its log when it never appears."""
    deadline = time.monotonic() + PID_WAIT_S
    while time.monotonic() < deadline:
        text = pidfile.read_text().strip() if pidfile.is_file() else ""
        if text.isdigit():
            return int(text)
        sleep(0.02)
    detail = log.read_text() if log.is_file() else "no log"
    raise CommandError(["sshd", "(pid file)", str(pidfile)], None, f"no pid file; log: {detail}")
