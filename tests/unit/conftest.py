"""Unit tests start no process: a test that does belongs in tests/integration/ (or
tests/system/ where it needs root), and says so when it tries."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest


class ProcessStarted(AssertionError):
    """A unit test tried to start a process."""


@pytest.fixture(autouse=True)
def no_processes(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Refuse subprocess.Popen (and so run, check_output, ...) for the test's duration."""

    def refuse(self: subprocess.Popen[bytes], args: object, *_: object, **__: object) -> None:
        self._child_created = False  # what Popen.__del__ reads of an object never started
        raise ProcessStarted(
            f"a unit test starts no process (this one ran {args!r}): move it to tests/integration/"
        )

    monkeypatch.setattr(subprocess.Popen, "__init__", refuse)
    yield
