"""The node interface: run, stream, put and get on one machine of a testbed.

Every command runs under bash on the node. A command is either an argv list (each element is
shell-quoted with shlex) or a shell line taken as written. `root=True` prefixes `sudo -n` when the
node allows sudo and the login user is not root. Environment variables travel as `env K=V`, so
they survive sudo and need nothing from the ssh server.

`stream` timestamps lines on the node: the command runs wrapped in a small bash script that
prefixes every stdout and stderr line with `$EPOCHREALTIME` (bash >= 5; older shells fall back to
`date +%s.%N`), and the controller strips the prefix before handing the line on.
"""

from __future__ import annotations

import shlex
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, TypedDict

from typing_extensions import Self

from r2bench.errors import EnvironmentFailure, ExitCode

Command = str | Sequence[str]
"""An argv list (quoted element by element) or a shell line (used as written)."""

StreamName = Literal["stdout", "stderr"]

DEFAULT_TIMEOUT_S = 60.0
"""Timeout of a command when the caller gives none."""

STAMP_SCRIPT = r"""_r2b_stamp() {
  local line
  while IFS= read -r line || [ -n "$line" ]; do
    printf '%s %s\n' "${EPOCHREALTIME:-$(date +%s.%N)}" "$line"
  done
}
{ "$@" 2> >(_r2b_stamp >&2); } | _r2b_stamp
exit "${PIPESTATUS[0]}"
"""
"""Runs "$@" and prefixes each stdout/stderr line with the node's clock (seconds since epoch)."""


@dataclass(frozen=True)
class CommandResult:
    """What one command did on one node."""

    node: str
    command: str
    exit_code: int | None
    stdout: str
    stderr: str
    started: float
    ended: float
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        """True when the command finished in time with exit code 0."""
        return self.exit_code == 0 and not self.timed_out

    @property
    def duration(self) -> float:
        """Seconds between start and end, as measured by the controller."""
        return self.ended - self.started


@dataclass(frozen=True)
class StreamLine:
    """One line of output, with the node-side time it was written."""

    node: str
    stream: StreamName
    text: str
    time: float


LineHandler = Callable[[StreamLine], None]


class NodeError(EnvironmentFailure):
    """A command or transfer failed on a node; the message names the node and the command.

    Exit 1, as every command documents a node that is lost or cannot be asked (sweep, setup,
    heal, inject, revert, doctor --discover)."""

    exit_code = ExitCode.FAILED

    def __init__(self, node: str, command: str, message: str, result: CommandResult | None = None):
        super().__init__(f"{node}: {message} [command: {command}]")
        self.node = node
        self.command = command
        self.message = message
        self.result = result


def command_text(command: Command) -> str:
    """The shell line for `command`: a string as written, an argv list quoted with shlex."""
    if isinstance(command, str):
        return command
    return shlex.join(str(part) for part in command)


def shell_argv(
    command: Command,
    *,
    sudo: bool = False,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
) -> list[str]:
    """The argv that runs `command` under bash on the node, with sudo, environment and cwd."""
    text = command_text(command)
    if cwd:
        text = f"cd {shlex.quote(cwd)} && {text}"
    argv = ["bash", "-c", text]
    if env:
        argv = ["env", *(f"{key}={value}" for key, value in env.items()), *argv]
    if sudo:
        argv = ["sudo", "-n", *argv]
    return argv


def stamped_argv(argv: Sequence[str]) -> list[str]:
    """Wrap `argv` so that each output line starts with the node's epoch time."""
    return ["bash", "-c", STAMP_SCRIPT, "r2bench-stream", *argv]


def parse_stamp(line: str, received: float) -> tuple[float, str]:
    """Split a stamped line into (node time, text); unstamped lines get the receipt time."""
    stamp, _, text = line.partition(" ")
    try:
        return float(stamp.replace(",", ".")), text
    except ValueError:
        return received, line


class RunOptions(TypedDict, total=False):
    """The keyword options of `Node.run`, for functions that pass them on."""

    timeout: float
    check: bool
    root: bool
    env: Mapping[str, str] | None
    cwd: str | None


class OutputSink(ABC):
    """Receives the bytes of a running command, stdout and stderr separately."""

    @abstractmethod
    def feed(self, stream: StreamName, data: bytes) -> None:
        """Take the next chunk of one stream."""

    @abstractmethod
    def finish(self) -> None:
        """The command ended: flush anything held back."""

    def text(self, stream: StreamName) -> str:
        """Everything kept from one stream (empty for sinks that hand lines on)."""
        return ""


@dataclass
class BufferSink(OutputSink):
    """Keeps all output in memory (for `run`)."""

    chunks: dict[str, list[bytes]] = field(default_factory=lambda: {"stdout": [], "stderr": []})

    def feed(self, stream: StreamName, data: bytes) -> None:
        """Append a chunk."""
        self.chunks[stream].append(data)

    def finish(self) -> None:
        """Nothing is held back."""

    def text(self, stream: StreamName) -> str:
        """The stream decoded as UTF-8 (invalid bytes replaced)."""
        return b"".join(self.chunks[stream]).decode("utf-8", errors="replace")


@dataclass
class LineSink(OutputSink):
    """Splits output into stamped lines and hands each to a callback (for `stream`)."""

    node: str
    on_line: LineHandler
    partial: dict[str, bytes] = field(default_factory=lambda: {"stdout": b"", "stderr": b""})

    def feed(self, stream: StreamName, data: bytes) -> None:
        """Emit every complete line; keep the unfinished tail."""
        *lines, self.partial[stream] = (self.partial[stream] + data).split(b"\n")
        for raw in lines:
            self._emit(stream, raw)

    def finish(self) -> None:
        """Emit unterminated last lines."""
        for stream in ("stdout", "stderr"):
            if self.partial[stream]:
                self._emit(stream, self.partial[stream])
                self.partial[stream] = b""

    def _emit(self, stream: StreamName, raw: bytes) -> None:
        stamp, text = parse_stamp(raw.decode("utf-8", errors="replace"), time.time())
        self.on_line(StreamLine(self.node, stream, text, stamp))


class Node(ABC):
    """One machine commands run on. Subclasses provide `_execute`, `put`, `get` and `close`."""

    name: str
    sudo: bool

    @property
    @abstractmethod
    def is_root(self) -> bool:
        """Whether commands already run as root (so `root=True` needs no sudo)."""

    @abstractmethod
    def _execute(
        self, argv: list[str], text: str, timeout: float, sink: OutputSink
    ) -> CommandResult:
        """Run `argv` on the node, feeding output to `sink`; never raise for exit codes."""

    @abstractmethod
    def put(self, local_path: Path | str, remote_path: str, *, timeout: float = 300.0) -> None:
        """Copy a local file to the node."""

    @abstractmethod
    def get(self, remote_path: str, local_path: Path | str, *, timeout: float = 300.0) -> None:
        """Copy a file from the node to the controller."""

    @abstractmethod
    def close(self) -> None:
        """Release the connection (idempotent)."""

    def run(
        self,
        command: Command,
        *,
        timeout: float = DEFAULT_TIMEOUT_S,
        check: bool = True,
        root: bool = False,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ) -> CommandResult:
        """Run a command to completion and return its output; with `check`, raise on failure."""
        argv = self._argv(command, root=root, env=env, cwd=cwd)
        result = self._execute(argv, command_text(command), timeout, BufferSink())
        return self._checked(result, check)

    def stream(
        self,
        command: Command,
        on_line: LineHandler,
        *,
        timeout: float = DEFAULT_TIMEOUT_S,
        check: bool = True,
        root: bool = False,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ) -> CommandResult:
        """Run a command, handing each output line to `on_line` as it arrives.

        Lines carry the node-side time they were written. The returned result has empty
        stdout/stderr: the lines went to `on_line`.
        """
        argv = stamped_argv(self._argv(command, root=root, env=env, cwd=cwd))
        sink = LineSink(self.name, on_line)
        return self._checked(self._execute(argv, command_text(command), timeout, sink), check)

    def open_session(
        self,
        command: Command,
        on_line: LineHandler,
        *,
        root: bool = False,
        env: Mapping[str, str] | None = None,
    ) -> Session:
        """Start a long-lived command whose stdin stays open for `Session.send`."""
        raise NotImplementedError(f"{type(self).__name__} has no sessions")

    def _result(
        self,
        text: str,
        sink: OutputSink,
        exit_code: int | None,
        *,
        started: float,
        timed_out: bool,
    ) -> CommandResult:
        """The result of a finished command (no exit code when it timed out)."""
        return CommandResult(
            node=self.name,
            command=text,
            exit_code=None if timed_out else exit_code,
            stdout=sink.text("stdout"),
            stderr=sink.text("stderr"),
            started=started,
            ended=time.time(),
            timed_out=timed_out,
        )

    def _argv(
        self, command: Command, *, root: bool, env: Mapping[str, str] | None, cwd: str | None
    ) -> list[str]:
        use_sudo = root and self.sudo and not self.is_root
        return shell_argv(command, sudo=use_sudo, env=env, cwd=cwd)

    def _checked(self, result: CommandResult, check: bool) -> CommandResult:
        if not check or result.ok:
            return result
        if result.timed_out:
            message = f"timed out after {result.duration:.1f} s"
        else:
            tail = (result.stderr or result.stdout).strip().splitlines()[-3:]
            message = f"exit code {result.exit_code}" + (f": {' | '.join(tail)}" if tail else "")
        raise NodeError(self.name, result.command, message, result)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Session(ABC):
    """A long-lived command on a node that takes lines on its stdin (`Node.open_session`).

    Output lines reach the `on_line` callback from a reader thread, stamped with the time they
    were received by the controller (the node's own clock, where it matters, travels inside
    the line)."""

    @abstractmethod
    def send(self, line: str) -> None:
        """Write one line (a newline is added) to the command's stdin; NodeError if it ended."""

    @property
    @abstractmethod
    def alive(self) -> bool:
        """Whether the command still runs and its channel is open."""

    @abstractmethod
    def close(self, timeout: float = 5.0, *, end_input: bool = True) -> None:
        """Close stdin, wait up to `timeout` for the command to end, then stop it (idempotent).
        `end_input=False`: the command was asked to end by a line of its own (an agent's
        `quit`); it is waited for without an end-of-input first."""
