"""A throwaway OpenSSH server on 127.0.0.1 for tests and benchmarks.

Everything lives in one directory: a generated host key, a client key, authorized_keys, a
known_hosts file for the host key, an ssh_config for clients, the sshd config and its pid file.
sshd insists on its privilege-separation directory (/run/sshd); when that is missing, the server
runs in a private mount namespace with a tmpfs over /run, so nothing on the host changes.
Sessions get SHLVL=1 so that bash does not source the login user's ~/.bashrc for ssh commands
(Debian's bash does, and a pyenv-style rc adds ~250 ms to every command, on every kind of
client alike). The server is stopped by its pid (and the session processes it forked, found through /proc).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support.proc_groups import proc_stats

SSHD = "/usr/sbin/sshd"

SSHD_CONFIG = """\
HostKey {dir}/host_key
PidFile {dir}/sshd.pid
AuthorizedKeysFile {dir}/authorized_keys
UsePAM no
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
PermitRootLogin prohibit-password
StrictModes no
Subsystem sftp internal-sftp
LogLevel ERROR
SetEnv SHLVL=1
"""

CLIENT_CONFIG = """\
Host *
    IdentityFile {dir}/client_key
    UserKnownHostsFile {dir}/known_hosts
    GSSAPIAuthentication no
"""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _keygen(path: Path) -> None:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "r2bench-test", "-f", str(path)],
        check=True,
    )


def _children(pid: int) -> list[int]:
    """Every descendant of `pid`, read from /proc."""
    parents = {pid: int(fields[1]) for pid, fields in proc_stats()}
    found, frontier = [], [pid]
    while frontier:
        parent = frontier.pop()
        kids = [child for child, ppid in parents.items() if ppid == parent]
        found.extend(kids)
        frontier.extend(kids)
    return found


@dataclass
class SshServer:
    """One sshd on 127.0.0.1 with its keys and client files in `dir`."""

    dir: Path
    port: int = field(default_factory=free_port)
    user: str = field(default_factory=lambda: pwd.getpwuid(os.geteuid()).pw_name)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def client_key(self) -> Path:
        """Private key that the server accepts."""
        return self.dir / "client_key"

    @property
    def known_hosts(self) -> Path:
        """known_hosts holding the server's real host key."""
        return self.dir / "known_hosts"

    @property
    def client_config(self) -> Path:
        """An ssh_config for `ssh -F` that uses the client key and known_hosts."""
        return self.dir / "ssh_config"

    def ssh_settings(self) -> dict[str, object]:
        """The testbed `ssh:` block that reaches this server with host-key checking on."""
        return {
            "user": self.user,
            "port": self.port,
            "key": str(self.client_key),
            "known_hosts": str(self.known_hosts),
            "config_file": str(self.client_config),
        }

    def prepare(self) -> SshServer:
        """Generate keys and write every file."""
        self.dir.mkdir(parents=True, exist_ok=True)
        _keygen(self.dir / "host_key")
        _keygen(self.client_key)
        shutil.copy(self.dir / "client_key.pub", self.dir / "authorized_keys")
        host_key = " ".join((self.dir / "host_key.pub").read_text().split()[:2])
        self.known_hosts.write_text(f"[127.0.0.1]:{self.port} {host_key}\n")
        (self.dir / "sshd_config").write_text(SSHD_CONFIG.format(dir=self.dir))
        self.client_config.write_text(CLIENT_CONFIG.format(dir=self.dir))
        return self

    def _argv(self) -> list[str]:
        sshd = [SSHD, "-D", "-e", "-f", str(self.dir / "sshd_config"), "-p", str(self.port)]
        sshd += ["-o", "ListenAddress=127.0.0.1"]
        if Path("/run/sshd").is_dir():
            return sshd
        script = 'mount -t tmpfs r2bench-sshd /run && mkdir /run/sshd && exec "$@"'
        return ["unshare", "-m", "sh", "-c", script, "sshd", *sshd]

    def start(self, wait_s: float = 10.0) -> SshServer:
        """Start sshd and wait until it accepts connections."""
        log = (self.dir / "sshd.log").open("ab")
        self.proc = subprocess.Popen(self._argv(), stdout=log, stderr=log)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"sshd exited: {(self.dir / 'sshd.log').read_text()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("sshd did not start listening")

    def stop(self) -> None:
        """Kill sshd and every session process it forked (by pid)."""
        if self.proc is None:
            return
        victims = [self.proc.pid, *_children(self.proc.pid)]
        for pid in victims:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.proc.wait(timeout=10)
        self.proc = None


def sshd_available() -> bool:
    """Whether this machine can run a test sshd (the binary exists; root for the namespace)."""
    if not Path(SSHD).exists() or shutil.which("ssh-keygen") is None:
        return False
    return Path("/run/sshd").is_dir() or os.geteuid() == 0


needs_sshd = pytest.mark.skipif(not sshd_available(), reason="needs OpenSSH sshd (and root)")


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshServer]:
    """A running loopback sshd for the module; stopped at teardown."""
    server = SshServer(tmp_path_factory.mktemp("sshd")).prepare().start()
    try:
        yield server
    finally:
        server.stop()
