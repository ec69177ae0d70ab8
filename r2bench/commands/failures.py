"""What an error that reaches `r2bench.cli.main` ends as, decided in one place.

- An :class:`~r2bench.errors.R2benchError` (bad input, a node or step that failed): its message
  as one line, and the exit code of its kind (`error.exit_code`).
- An OSError of the environment (a missing file, a denied permission, a full disk, a host that
  does not answer): one line naming the file, exit 2.
- Anything else is a bug in r2bench: the traceback, a line asking for a report (with the
  version), exit 70 (`ExitCode.BUG`).

With `--debug`, expected errors show their traceback too. An invalid config file is its
located issues (file:line:col: field: message), one a line, and the count: its traceback would
add nothing, so no line offers it.

Exit codes are decided here only: a command either returns its code (the thing it checked
failed, or it passed) or raises; it never turns an exception into an exit code itself.

Nothing heavy is imported here (`r2bench.config` loads pydantic): `r2bench --version` passes
through this module.
"""

from __future__ import annotations

import errno
import traceback
from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.console import Console

import r2bench
from r2bench.errors import ExitCode, R2benchError
from r2bench.textsafe import printable

if TYPE_CHECKING:
    from r2bench.config.errors import ConfigError

ENVIRONMENT_ERRNOS = frozenset(
    getattr(errno, name)
    for name in (
        *("ENOENT", "EACCES", "EPERM", "EISDIR", "ENOTDIR", "EEXIST", "ENOTEMPTY", "EROFS"),
        *("ENOSPC", "EDQUOT", "EFBIG", "ENAMETOOLONG", "ELOOP", "EIO", "ENXIO", "ENODEV", "EBUSY"),
        *("ETXTBSY", "EMFILE", "ENFILE", "EXDEV", "ETIMEDOUT", "ECONNREFUSED"),
        *("ECONNRESET", "EHOSTUNREACH", "ENETUNREACH", "EHOSTDOWN", "EADDRINUSE"),
    )
    if hasattr(errno, name)
)
"""errno values that say something about the machine, not about r2bench's code."""

ROOT_FLAGS = frozenset({"--debug", "--verbose", "-v", "-vv", "-vvv", "--version", "-h", "--help"})


def debug_requested(args: Sequence[str]) -> bool:
    """Whether `--debug` is among the root options (those before the command's name)."""
    for arg in args:
        if arg == "--debug":
            return True
        if arg not in ROOT_FLAGS:
            return False
    return False


def is_environmental(error: BaseException) -> bool:
    """An OSError that the machine caused (FileNotFoundError, PermissionError, a full disk...),
    rather than one r2bench raised by mistake."""
    return isinstance(error, OSError) and error.errno in ENVIRONMENT_ERRNOS


def error_text(error: BaseException) -> str:
    """The error as the user reads it: an OSError with its file name, else its message."""
    if isinstance(error, OSError) and error.filename is not None:
        return f"{error.strerror or error}: {error.filename}"
    return str(error) or type(error).__name__


def print_config_error(error: ConfigError, console: Console) -> None:
    """Each issue as one line (file:line:col: field: message), then how many were found."""
    for issue in error.issues:
        console.print(printable(issue.render()), markup=False, highlight=False, soft_wrap=True)
    count = len(error.issues)
    console.print(
        f"{count} problem{'s' if count != 1 else ''} found; nothing was run.", style="red"
    )


def report_error(error: Exception, debug: bool, console: Console) -> ExitCode:
    """Print `error` as the rule above says; return the exit code."""
    expected = isinstance(error, R2benchError) or is_environmental(error)
    if not expected:
        traceback.print_exception(type(error), error, error.__traceback__)
        version = getattr(r2bench, "__version__", "unknown")
        console.print(
            f"r2bench {version}: this is a bug in r2bench, not in your input or setup: please "
            "report it to r2bench's maintainers with the traceback above, the command line and "
            "this version.",
            style="red",
            markup=False,
            highlight=False,
        )
        return ExitCode.BUG
    from r2bench.config.errors import ConfigError  # an error was raised: the cost is paid

    if debug:
        traceback.print_exception(type(error), error, error.__traceback__)
    if isinstance(error, ConfigError) and error.issues:
        print_config_error(error, console)
    else:
        message = printable(error_text(error))
        console.print(
            f"r2bench: error: {message}", style="red", markup=False, highlight=False, soft_wrap=True
        )  # one line, however wide: scripts and CI logs read it whole
        if not debug:
            console.print("(run again with --debug for the traceback)", style="dim")
    return error.exit_code if isinstance(error, R2benchError) else ExitCode.USAGE
