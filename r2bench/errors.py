"""r2bench's one exception hierarchy and its exit codes.

Every error r2bench expects (a bad config, a refused file, a node that does not answer, a step
that failed) is an :class:`R2benchError`: `r2bench.cli.main` prints its message as one line and
exits with the code of its kind. Anything else is a bug: main prints the traceback and asks for a
report. Classes that callers have long caught as ``ValueError`` or ``RuntimeError`` keep that base
beside this one, so existing ``except`` clauses still hold.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """What r2bench's exit status means, for scripts and CI."""

    OK = 0
    FAILED = 1
    """The thing checked failed: a regression, a log that is not nccl-tests output, a run
    that did not succeed."""
    USAGE = 2
    """r2bench refused to go on: bad input, a missing tool or extra, a node or step that
    failed. The message names what and how to fix it."""
    BUG = 70
    """A bug in r2bench (sysexits' EX_SOFTWARE): an error it did not expect. The traceback and
    a request to report it are printed."""
    INTERRUPTED = 130
    """Ctrl-C (128 + SIGINT), after cleaning up."""


class R2benchError(Exception):
    """An expected failure: one line on stderr, and ``exit_code``."""

    exit_code: ExitCode = ExitCode.USAGE


class InputError(R2benchError):
    """A file, flag or value r2bench cannot take: the message names where and the fix."""


class EnvironmentFailure(R2benchError):
    """Something outside r2bench failed: a node, a command, a build step, a lock."""


class WriteFailed(EnvironmentFailure, OSError):
    """A file r2bench writes that the machine refused (a full disk, a file size limit, a
    read-only mount): the message names the file and the system's words, never "a bug".
    Still an OSError, for the callers that catch one around a write."""
