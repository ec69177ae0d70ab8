"""A node that is this machine: commands run as subprocesses (local testbeds and tests)."""

from __future__ import annotations

import contextlib
import os
import selectors
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import IO, cast

from r2bench.config.testbed import Node as NodeModel
from r2bench.nodes.base import (
    Command,
    CommandResult,
    LineHandler,
    LineSink,
    Node,
    NodeError,
    OutputSink,
    Session,
    StreamName,
    command_text,
)

_READ_SIZE = 65536


class LocalNode(Node):
    """Runs commands on the controller's own machine, each in its own process group."""

    def __init__(self, name: str = "local", *, sudo: bool = True) -> None:
        self.name = name
        self.sudo = sudo

    @classmethod
    def from_model(cls, model: NodeModel) -> LocalNode:
        """A local node named and configured like a testbed node."""
        return cls(model.name, sudo=model.sudo)

    @property
    def is_root(self) -> bool:
        """Whether this process runs as root."""
        return os.geteuid() == 0

    def _execute(
        self, argv: list[str], text: str, timeout: float, sink: OutputSink
    ) -> CommandResult:
        started = time.time()
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as exc:
            raise NodeError(self.name, text, f"cannot start: {exc}") from exc
        timed_out = not _pump(proc, sink, started + timeout)
        if timed_out:
            _kill_group(proc)
        exit_code = proc.wait()
        sink.finish()
        return self._result(text, sink, exit_code, started=started, timed_out=timed_out)

    def put(self, local_path: Path | str, remote_path: str, *, timeout: float = 300.0) -> None:
        """Copy a file (the node is this machine)."""
        self._copy(Path(local_path), Path(remote_path).expanduser())

    def get(self, remote_path: str, local_path: Path | str, *, timeout: float = 300.0) -> None:
        """Copy a file (the node is this machine)."""
        self._copy(Path(remote_path).expanduser(), Path(local_path))

    def _copy(self, source: Path, target: Path) -> None:
        try:
            shutil.copyfile(source, target)
        except OSError as exc:
            raise NodeError(self.name, f"copy {source} {target}", str(exc)) from exc

    def close(self) -> None:
        """Nothing to release."""

    def open_session(
        self,
        command: Command,
        on_line: LineHandler,
        *,
        root: bool = False,
        env: Mapping[str, str] | None = None,
    ) -> Session:
        """Start `command` as a subprocess with its stdin kept open."""
        argv = self._argv(command, root=root, env=env, cwd=None)
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as exc:
            raise NodeError(self.name, command_text(command), f"cannot start: {exc}") from exc
        return LocalSession(self.name, command_text(command), proc, LineSink(self.name, on_line))


class LocalSession(Session):
    """A subprocess fed line by line; a thread hands its output lines on."""

    def __init__(self, node: str, text: str, proc: subprocess.Popen[bytes], sink: LineSink) -> None:
        self.node, self.text, self.proc, self.sink = node, text, proc, sink
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True, name=f"session-{node}")
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        while data := os.read(self.proc.stdout.fileno(), _READ_SIZE):
            self.sink.feed("stdout", data)
        self.sink.finish()

    @property
    def alive(self) -> bool:
        """Whether the subprocess still runs."""
        return self.proc.poll() is None

    def send(self, line: str) -> None:
        """Write one line to the subprocess's stdin."""
        assert self.proc.stdin is not None
        try:
            with self._lock:
                self.proc.stdin.write(line.encode() + b"\n")
                self.proc.stdin.flush()
        except (OSError, ValueError) as exc:
            raise NodeError(self.node, self.text, f"session ended: {exc}") from exc

    def close(self, timeout: float = 5.0, *, end_input: bool = True) -> None:
        """Close stdin, wait, then kill the process group if it is still there (a pipe's end
        is safe at any time here: `end_input` matters to ssh channels only)."""
        with contextlib.suppress(OSError, ValueError), self._lock:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            _kill_group(self.proc)
            self.proc.wait()
        self._reader.join(timeout)


def _pump(proc: subprocess.Popen[bytes], sink: OutputSink, deadline: float) -> bool:
    """Move output to `sink` until both pipes close; False if the deadline passed first."""
    streams = {proc.stdout: "stdout", proc.stderr: "stderr"}
    with selectors.DefaultSelector() as selector:
        for pipe, stream in streams.items():
            selector.register(cast(IO[bytes], pipe), selectors.EVENT_READ, stream)
        while selector.get_map():
            remaining = deadline - time.time()
            if remaining <= 0:
                return False
            for key, _ in selector.select(remaining):
                data = os.read(key.fd, _READ_SIZE)
                if data:
                    sink.feed(cast(StreamName, key.data), data)
                else:
                    selector.unregister(key.fileobj)
    return True


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """Kill the command's whole process group (it was started in a session of its own)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()
