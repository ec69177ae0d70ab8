"""A node reached over ssh (fabric/paramiko), with one persistent connection per node.

Host keys are verified by default against the testbed's `known_hosts` file, or
~/.ssh/known_hosts; an unknown or changed key is refused. Only `strict_host_key_checking: false`
accepts unknown keys (with a warning). ~/.ssh/config (or the testbed's `config_file`) is honored,
including ProxyJump; the testbed's `jump_host` wins over it.

Commands run through exec channels of the one connection, wrapped node-side in
`timeout -k 5 <seconds>` so a command is killed on the node even if the controller goes away.
When the connection has dropped, it is reopened once and the command is tried again; a command
whose connection drops while it runs is reported, never re-run.
"""

from __future__ import annotations

import contextlib
import logging
import select
import shlex
import socket
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TypeVar

import paramiko
from fabric import Config, Connection

from r2bench.config.testbed import Node as NodeModel
from r2bench.config.testbed import SshOptions
from r2bench.errors import EnvironmentFailure
from r2bench.nodes.base import (
    Command,
    CommandResult,
    LineHandler,
    LineSink,
    Node,
    NodeError,
    OutputSink,
    Session,
    command_text,
)
from r2bench.safeio import check_bounded
from r2bench.shellwords import seconds

log = logging.getLogger(__name__)

T = TypeVar("T")

CONNECT_TIMEOUT_S = 10
KILL_GRACE_S = 5
KNOWN_HOSTS_LIMIT = 16 * 1024 * 1024
"""A known_hosts file is a few KB; a larger one (or a device) is not read."""
"""Seconds between the node-side TERM at the deadline and KILL."""
_READ_SIZE = 65536
_TIMEOUT_EXIT = 124


class UnknownHostKeyError(EnvironmentFailure, paramiko.SSHException):
    """The server's host key is not in known_hosts."""


class _RejectUnknown(paramiko.MissingHostKeyPolicy):
    """Refuse hosts whose key is not known (paramiko's RejectPolicy, with a typed error)."""

    def missing_host_key(
        self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey
    ) -> None:
        """Raise: an unknown host is never trusted."""
        raise UnknownHostKeyError(
            f"host key of {hostname} ({key.get_name()} {key.fingerprint}) is not in known_hosts"
        )


_FATAL = (paramiko.AuthenticationException, paramiko.BadHostKeyException, UnknownHostKeyError)
_DROPPED = (paramiko.SSHException, EOFError, OSError)


def timeout_line(argv: list[str], timeout: float) -> str:
    """`argv` under the node-side `timeout` (a limit below a millisecond rounds up: `timeout 0`
    would mean no limit at all)."""
    return shlex.join(["timeout", "-k", str(KILL_GRACE_S), seconds(timeout), *argv])


def _connection_config(options: SshOptions) -> Config:
    """Fabric config honoring the testbed's ssh_config file, or ~/.ssh/config by default."""
    if options.config_file:
        return Config(runtime_ssh_path=str(Path(options.config_file).expanduser()))
    return Config()


def _secure(connection: Connection, options: SshOptions) -> None:
    """Apply the host key policy to a connection and every gateway behind it."""
    client = connection.client
    if options.strict_host_key_checking:
        known = Path(options.known_hosts or "~/.ssh/known_hosts").expanduser()
        if known.exists():
            check_bounded(known, KNOWN_HOSTS_LIMIT, "known_hosts")
            client.load_system_host_keys(str(known))
        client.set_missing_host_key_policy(_RejectUnknown())
    else:
        log.warning("host key checking is off for %s: unknown keys are accepted", connection.host)
        client.set_missing_host_key_policy(paramiko.AutoAddPolicy())
    if isinstance(connection.gateway, Connection):
        _secure(connection.gateway, options)


def make_connection(address: str, options: SshOptions) -> Connection:
    """A fabric Connection (not yet open) for one node, with r2bench's ssh policy."""
    config = _connection_config(options)
    connect_kwargs: dict[str, object] = {}
    if options.key:
        connect_kwargs.update(
            key_filename=[str(Path(options.key).expanduser())],
            look_for_keys=False,
            allow_agent=False,
        )
    gateway = None
    if options.jump_host:  # the bastion is reached with the same key
        gateway = Connection(
            options.jump_host,
            config=config,
            connect_timeout=CONNECT_TIMEOUT_S,
            connect_kwargs=dict(connect_kwargs),
        )
    connection = Connection(
        address,
        user=options.user,
        port=options.port,
        config=config,
        gateway=gateway,
        connect_timeout=CONNECT_TIMEOUT_S,
        connect_kwargs=connect_kwargs,
    )
    _secure(connection, options)
    return connection


class SshNode(Node):
    """A node reached over one persistent ssh connection, reopened once if it drops."""

    def __init__(
        self, name: str, address: str, options: SshOptions | None = None, *, sudo: bool = True
    ) -> None:
        self.name = name
        self.address = address
        self.options = options or SshOptions.model_validate({})
        self.sudo = sudo
        self.reconnects = 0
        """How many times a lost connection was reopened (attempts, successful or not)."""
        self._was_connected = False
        self._lock = threading.Lock()
        self._connection: Connection | None = None

    @classmethod
    def from_model(cls, model: NodeModel) -> SshNode:
        """An ssh node for a testbed node."""
        return cls(model.name, model.address, model.ssh, sudo=model.sudo)

    @property
    def is_root(self) -> bool:
        """Whether the login user is root (known from the settings, without connecting)."""
        with self._lock:
            user: str = self._connection_object().user  # fabric is untyped
            return user == "root"

    def connect(self) -> None:
        """Open the connection now (otherwise it opens on first use)."""
        self._with_retry("connect", lambda: self._connect().transport)

    def _connection_object(self) -> Connection:
        if self._connection is None:
            self._connection = make_connection(self.address, self.options)
        return self._connection

    def _connect(self) -> Connection:
        with self._lock:
            connection = self._connection_object()
            if not connection.is_connected:
                if self._was_connected:
                    self.reconnects += 1
                    log.info("%s: connection lost, reconnecting", self.name)
                connection.open()
                _no_delay(connection)
                self._was_connected = True
            return connection

    def _drop(self) -> None:
        with self._lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None

    def _with_retry(self, what: str, operation: Callable[[], T]) -> T:
        """Run `operation`; if the connection dropped, reopen it once and try again."""
        for attempt in (1, 2):
            try:
                return operation()
            except _FATAL as exc:
                self._drop()
                raise NodeError(self.name, what, _fatal_message(self, exc)) from exc
            except _DROPPED as exc:
                self._drop()
                if attempt == 2:
                    raise NodeError(
                        self.name, what, f"ssh to {self.address} failed (retried once): {exc!r}"
                    ) from exc
                log.info("%s: ssh failed (%r), trying once more", self.name, exc)
        raise AssertionError("unreachable")

    def _open_channel(self, line: str, timeout: float) -> paramiko.Channel:
        transport = self._connect().client.get_transport()
        if transport is None or not transport.is_active():
            raise EOFError("ssh transport is not active")
        channel = transport.open_session(timeout=timeout)
        # stdin from /dev/null rather than an EOF sent after the exec: a command that ends first
        # makes paramiko's transport thread close the channel while that EOF is on its way,
        # the EOF then follows the close, and sshd drops the whole connection ("ieof packet
        # referred to nonexistent channel"), the agent's session on it included.
        channel.exec_command(f"{line} </dev/null")
        return channel

    def _execute(
        self, argv: list[str], text: str, timeout: float, sink: OutputSink
    ) -> CommandResult:
        line = timeout_line(argv, timeout)
        started = time.time()
        channel = self._with_retry(text, lambda: self._open_channel(line, timeout))
        try:
            finished = _pump(channel, sink, started + timeout + KILL_GRACE_S + 1)
            exit_code = channel.recv_exit_status() if finished else None
        finally:
            channel.close()
        sink.finish()
        if finished and exit_code == -1:
            self._drop()
            raise NodeError(self.name, text, "connection lost while the command ran")
        node_killed = exit_code == _TIMEOUT_EXIT and time.time() - started >= timeout
        timed_out = not finished or node_killed
        return self._result(text, sink, exit_code, started=started, timed_out=timed_out)

    def put(self, local_path: Path | str, remote_path: str, *, timeout: float = 300.0) -> None:
        """Copy a local file to the node over sftp."""
        what = f"put {local_path} {remote_path}"
        self._transfer(what, timeout, lambda sftp: sftp.put(str(local_path), remote_path))

    def get(self, remote_path: str, local_path: Path | str, *, timeout: float = 300.0) -> None:
        """Copy a file from the node over sftp."""
        what = f"get {remote_path} {local_path}"
        self._transfer(what, timeout, lambda sftp: sftp.get(remote_path, str(local_path)))

    def _transfer(
        self, what: str, timeout: float, operation: Callable[[paramiko.SFTPClient], object]
    ) -> None:
        sftp = self._with_retry(what, lambda: self._open_sftp(timeout))
        try:
            operation(sftp)
        except (OSError, paramiko.SSHException) as exc:
            raise NodeError(self.name, what, f"transfer failed: {exc}") from exc
        finally:
            sftp.close()

    def _open_sftp(self, timeout: float) -> paramiko.SFTPClient:
        client = self._connect().client
        transport = client.get_transport()
        if transport is None or not transport.is_active():
            raise EOFError("ssh transport is not active")
        sftp = client.open_sftp()
        sftp.get_channel().settimeout(timeout)
        return sftp

    def close(self) -> None:
        """Close the connection (and any gateway)."""
        self._drop()

    def open_session(
        self,
        command: Command,
        on_line: LineHandler,
        *,
        root: bool = False,
        env: Mapping[str, str] | None = None,
    ) -> Session:
        """Start `command` on an exec channel of the node's connection, stdin left open.

        The remote shell starts once per session, so heavy start-up files are paid once."""
        line = shlex.join(self._argv(command, root=root, env=env, cwd=None))
        text = command_text(command)

        def start() -> paramiko.Channel:
            transport = self._connect().client.get_transport()
            if transport is None or not transport.is_active():
                raise EOFError("ssh transport is not active")
            channel = transport.open_session(timeout=CONNECT_TIMEOUT_S)
            channel.set_combine_stderr(True)
            channel.exec_command(line)
            return channel

        channel = self._with_retry(text, start)
        return SshSession(self.name, text, channel, LineSink(self.name, on_line))


class SshSession(Session):
    """An exec channel fed line by line; a thread hands its output lines on."""

    def __init__(self, node: str, text: str, channel: paramiko.Channel, sink: LineSink) -> None:
        self.node, self.text, self.channel, self.sink = node, text, channel, sink
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True, name=f"session-{node}")
        self._reader.start()

    def _read(self) -> None:
        try:
            while data := self.channel.recv(_READ_SIZE):
                self.sink.feed("stdout", data)
        except (OSError, paramiko.SSHException):
            pass
        self.sink.finish()

    @property
    def alive(self) -> bool:
        """Whether the channel is open and the command has not exited."""
        return not self.channel.closed and not self.channel.exit_status_ready()

    def send(self, line: str) -> None:
        """Write one line to the remote command's stdin."""
        try:
            with self._lock:
                self.channel.sendall(line.encode() + b"\n")
        except (OSError, paramiko.SSHException) as exc:
            raise NodeError(self.node, self.text, f"session ended: {exc}") from exc

    def close(self, timeout: float = 5.0, *, end_input: bool = True) -> None:
        """Close stdin (unless `end_input` is False), wait up to `timeout` for the command to
        exit, close the channel (which ends its stdin in any case)."""
        # EOF only to a command still running, and none to one already asked to end: an EOF
        # that follows the channel's close makes sshd drop the connection (`_open_channel`).
        running = not self.channel.closed and not self.channel.exit_status_ready()
        if end_input and running:
            with contextlib.suppress(OSError, paramiko.SSHException):
                self.channel.shutdown_write()
        deadline = time.time() + timeout
        while not self.channel.exit_status_ready() and time.time() < deadline:
            time.sleep(0.02)
        self.channel.close()
        self._reader.join(timeout)


def _no_delay(connection: Connection) -> None:
    """Send small packets at once: without TCP_NODELAY, Nagle and delayed ACKs add ~40 ms."""
    sock = connection.transport.sock if connection.transport is not None else None
    if isinstance(sock, socket.socket):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def _fatal_message(node: SshNode, exc: Exception) -> str:
    """Explain a failure that retrying cannot fix (host key or authentication)."""
    where = f"{node.address}:{node.options.port}"
    if isinstance(exc, paramiko.BadHostKeyException | UnknownHostKeyError):
        source = node.options.known_hosts or "~/.ssh/known_hosts"
        return (
            f"host key verification failed for {where}: {exc} (checked against {source}; "
            "fix known_hosts, or set strict_host_key_checking: false for a throwaway testbed)"
        )
    return f"ssh authentication failed for {where}: {exc}"


def _pump(channel: paramiko.Channel, sink: OutputSink, deadline: float) -> bool:
    """Move output to `sink` until the channel closes; False if the deadline passed first."""
    while True:
        while channel.recv_ready():
            sink.feed("stdout", channel.recv(_READ_SIZE))
        while channel.recv_stderr_ready():
            sink.feed("stderr", channel.recv_stderr(_READ_SIZE))
        ended = channel.closed or (channel.exit_status_ready() and channel.eof_received)
        if ended and not channel.recv_ready() and not channel.recv_stderr_ready():
            return True
        remaining = deadline - time.time()
        if remaining <= 0:
            return False
        select.select([channel], [], [], min(remaining, 0.1))
