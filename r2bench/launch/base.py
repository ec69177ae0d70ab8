"""What a launcher is, as data: one `LauncherSpec` per launcher module (pure).

Everything r2bench must know about a launcher lives in its spec, so that the plan, doctor, the
fault interlock and the log parser ask the registry (`r2bench.launch.registry`) instead of
testing the launcher's kind: its launch line, how many GPUs each process drives (nccl-tests'
`-g`), the tool doctor checks on the nodes, the settings that choose its bootstrap interfaces
(which a fault must never take down), and the messages it prints when a rank or the job dies.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum

from r2bench.config.testbed import LauncherKind, Testbed


@dataclass(frozen=True)
class Job:
    """What to launch: the program argv per rank, where, and its environment."""

    program: list[str]
    nodes: list[str]
    ranks_per_node: int
    env: dict[str, str]
    gpus_per_rank: int = 1


@dataclass(frozen=True)
class LaunchCommand:
    """The argv to run on `node` (the launch node) and environment set for it there."""

    node: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)

    def shell(self) -> str:
        """One copy-pasteable shell line, every word quoted."""
        prefix = ["env", *(f"{k}={v}" for k, v in self.env.items())] if self.env else []
        return shlex.join(prefix + self.argv)


LaunchLine = Callable[[Testbed, Job, bool], LaunchCommand]
"""(testbed, job, as_root) -> the launch line; `as_root`: the caller runs it as root."""


def one_gpu_per_process(ranks_per_node: int) -> int:
    """The `-g` of launchers that start one process per rank: each process drives one GPU."""
    return 1


@dataclass(frozen=True)
class ToolCheck:
    """The program doctor looks for on every node (the same version everywhere)."""

    name: str
    """Doctor's row and the facts section that holds `<path> --version`."""
    path: Callable[[Testbed], str]
    """The program the launch line will run, as a node path or a name on PATH."""
    version: Callable[[str], str | None]
    """The version in the section's text (None: not found)."""
    missing_fix: str
    """What to do when it is missing; `{path}` is replaced by the program's path."""
    mixed_fix: str
    """What to do when nodes have different versions."""


@dataclass(frozen=True)
class BootstrapSetting:
    """A setting that pins the launcher's own traffic to interfaces: faulting one of them
    would cut the job's bootstrap, so the interlock refuses it."""

    source: str
    """Where it is set, as the interlock names it (`launcher.mca.btl_tcp_if_include`)."""
    value: str
    exact: bool
    """True: one interface name; False: an Open MPI if_include list (names or CIDR subnets)."""
    owner: str = "MPI"
    """Whose traffic it carries, as refusal messages say it."""


class CrashKind(str, Enum):
    """What a launcher's message says happened (parse/events.py turns it into an event)."""

    SIGNALED = "signaled"
    """A rank was killed by a signal."""
    EXITED = "exited"
    """A rank exited with a non-zero status."""
    ABORTED = "aborted"
    """The launcher ended the job."""
    LAUNCH_FAILED = "launch_failed"
    """The job could not start."""


CRASH_DETAILS = ("signal", "signal_name", "exit_code")
"""Named groups of a crash message that become the event's details (in this order)."""


@dataclass(frozen=True)
class CrashMessage:
    """A message a launcher prints when a rank or the job ends badly, searched in each log
    line. Named groups `rank`, `pid`, `host` fill the event's fields; `signal`,
    `signal_name`, `exit_code` its details (a group that did not match gives "")."""

    kind: CrashKind
    pattern: re.Pattern[str]
    continuation: tuple[re.Pattern[str], ...] = ()
    """Patterns searched in the next lines when the message goes on over several lines
    (their named groups complete the event); empty: one line."""


def literal(kind: CrashKind, text: str) -> CrashMessage:
    """A crash message recognised by a fixed piece of text anywhere in the line."""
    return CrashMessage(kind, re.compile(re.escape(text)))


@dataclass(frozen=True)
class LauncherSpec:
    """Everything r2bench knows about one launcher."""

    kind: LauncherKind
    launch: LaunchLine
    gpus_per_process: Callable[[int], int]
    """nccl-tests' `-g` for a job of so many ranks per node."""
    bootstrap: Callable[[Testbed, Mapping[str, str]], list[BootstrapSetting]]
    """The settings (testbed, the run's environment) that choose its bootstrap interfaces."""
    tool: ToolCheck | None = None
    """What doctor checks on the nodes; None: nothing."""
    crash_messages: tuple[CrashMessage, ...] = ()
