"""The one place the virtual testbed runs commands: argv lists only, stderr captured."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass

from r2bench.errors import EnvironmentFailure

Argv = Sequence[str]

# Where root tools live on Debian even when PATH lacks the sbin directories.
_SBIN_DIRS = ("/usr/local/sbin", "/usr/sbin", "/sbin")


class CommandError(EnvironmentFailure, RuntimeError):
    """A command failed (or could not start); names the command and carries its stderr."""

    def __init__(self, argv: Argv, returncode: int | None, stderr: str) -> None:
        self.argv = list(argv)
        self.returncode = returncode
        self.stderr = stderr.strip()
        status = "could not start" if returncode is None else f"exited with {returncode}"
        detail = f": {self.stderr}" if self.stderr else ""
        super().__init__(f"`{shlex.join(self.argv)}` {status}{detail}")


@dataclass(frozen=True)
class Result:
    """What a finished command printed."""

    returncode: int
    stdout: str
    stderr: str


def run(argv: Argv, *, check: bool = True, timeout: float = 30.0, stdin: str = "") -> Result:
    """Run `argv` (never through a shell); raise CommandError when it fails and `check` is set."""
    try:
        proc = subprocess.run(
            list(argv),
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CommandError(argv, None, str(exc)) from exc
    if check and proc.returncode != 0:
        raise CommandError(argv, proc.returncode, proc.stderr)
    return Result(proc.returncode, proc.stdout, proc.stderr)


def succeeds(argv: Argv, *, timeout: float = 30.0) -> bool:
    """True when `argv` exits 0 (for probes and existence checks)."""
    try:
        return run(argv, check=False, timeout=timeout).returncode == 0
    except CommandError:
        return False


def which(tool: str) -> str | None:
    """Absolute path of `tool` on PATH or in the sbin directories, or None."""
    path = os.pathsep.join([os.environ.get("PATH", ""), *_SBIN_DIRS])
    return shutil.which(tool, path=path)
