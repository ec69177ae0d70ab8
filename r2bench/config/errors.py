"""Configuration errors that point at a file, line, column and field path."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from r2bench.errors import InputError

if TYPE_CHECKING:
    from pydantic import ValidationError

FieldPath = tuple[str | int, ...]


def format_path(path: FieldPath) -> str:
    """Render a field path the way a user writes it: `faults[1].trigger.after_s`."""
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text or "<top level>"


def did_you_mean(value: str, known: Iterable[str], otherwise: str = "") -> str:
    """A hint for a misspelt name: the closest known one, else `otherwise`."""
    close = difflib.get_close_matches(value, list(known), n=1)
    return f"did you mean '{close[0]}'?" if close else otherwise


LISTED_NAMES = 20
"""Names a hint lists at most (a Slurm testbed may have 100,000 nodes)."""


def name_list(names: list[str], limit: int = LISTED_NAMES) -> str:
    """`names` joined for a hint, the first `limit` of them and how many in all past that."""
    shown = ", ".join(names[:limit])
    return shown if len(names) <= limit else f"{shown}, ... ({len(names)} in all)"


@dataclass(frozen=True)
class FieldProblem:
    """One value a pydantic model refused: where (the field path, dotted; empty for the model
    as a whole), pydantic's message, and the value given."""

    where: str
    message: str
    given: Any

    def describe(self, top_level: str = "") -> str:
        """`<field.path>: <message>`, `top_level` standing for an empty path."""
        return f"{self.where or top_level}: {self.message}"


def field_problems(error: ValidationError) -> list[FieldProblem]:
    """The problems of a pydantic validation error, in pydantic's order: the one way r2bench
    turns one into messages outside the located config errors (`config/validate.py`)."""
    return [
        FieldProblem(
            where=".".join(str(part) for part in item["loc"]),
            message=item["msg"],
            given=item.get("input"),
        )
        for item in error.errors()
    ]


@dataclass(frozen=True)
class ConfigIssue:
    """One problem in one file, located as precisely as the YAML allows."""

    file: str
    line: int | None
    column: int | None
    path: FieldPath
    message: str
    hint: str = ""

    def render(self) -> str:
        where = self.file
        if self.line is not None:
            where += f":{self.line}"
            if self.column is not None:
                where += f":{self.column}"
        text = f"{where}: {format_path(self.path)}: {self.message}"
        if self.hint:
            text += f" ({self.hint})"
        return text


@dataclass
class ConfigError(InputError):
    """Raised when an experiment or testbed file is invalid; carries every issue found."""

    issues: Sequence[ConfigIssue] = field(default_factory=list)

    def __str__(self) -> str:
        return "\n".join(issue.render() for issue in self.issues)
