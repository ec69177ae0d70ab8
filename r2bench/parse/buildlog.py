"""What went wrong in a build log (pure): the first real error and the recipe's explanation.

The first real error is searched in three tiers, first match wins: compiler and linker errors
(`error:`, `fatal error:`, `undefined reference to`), then make's `*** ... Error N` lines, then
shell errors (`command not found`, `No such file or directory`). Warning lines never count.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from r2bench.config.recipe import KnownFailure

_TIERS = (
    re.compile(
        r"(?:^|[\s:])(?:fatal |catastrophic )?error(?: [A-Z]*\d+)?\s*:|undefined reference to",
        re.IGNORECASE,
    ),
    re.compile(r"\*\*\* .*(?:Error \d+|No rule to make target)"),
    re.compile(r"command not found|: not found\s*$|No such file or directory|Permission denied"),
)
_WARNING = re.compile(r"\bwarning\s*:", re.IGNORECASE)
MAX_ERROR_CHARS = 300


@dataclass(frozen=True)
class ErrorLine:
    """One line of a log, numbered from 1."""

    line: int
    text: str


@dataclass(frozen=True)
class BuildFailure:
    """Why a build failed, for the user: first error and the known explanations that apply."""

    first_error: ErrorLine | None
    explanations: tuple[str, ...]


def first_error(log: str) -> ErrorLine | None:
    """The first line of the most telling tier that has any match (None: nothing matched)."""
    lines = log.splitlines()
    for tier in _TIERS:
        for number, text in enumerate(lines, start=1):
            if tier.search(text) and not _WARNING.search(text):
                return ErrorLine(number, text.strip()[:MAX_ERROR_CHARS])
    return None


def explanations(log: str, known: Sequence[KnownFailure]) -> tuple[str, ...]:
    """The explanation of every known failure whose pattern (a regex) occurs in the log, once."""
    found = (item.explain for item in known if re.search(item.pattern, log, re.MULTILINE))
    return tuple(dict.fromkeys(found))


def analyze(log: str, known: Sequence[KnownFailure]) -> BuildFailure:
    """First error and explanations of a failed build's log."""
    return BuildFailure(first_error(log), explanations(log, known))
