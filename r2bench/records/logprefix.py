"""Undo what launchers and pastes do to nccl-tests lines before they are parsed.

Launchers prefix every line: Open MPI `--tag-output` (`[1,0]<stdout>:`), `--timestamp-output`
(a ctime stamp before the tag), Slurm `srun --label` (`0: `), pdsh/clush (`host: `), and log
collectors an ISO stamp. Markdown pastes lose the `#` of header lines. `LineCleaner` strips the
prefix and keeps who it named (the rank or host), and gives a lost `#` back.

The unambiguous forms (the Open MPI tag, stamps) are stripped wherever they are. `0: ` and
`host: ` could be a line's own text (`HCA-128: Test NCCL failure`), so they are stripped only when
the first lines of the file show that the launcher put them on (most lines carry one).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import NamedTuple

DETECT_LINES = 40
"""Lines looked at to decide whether `0: ` / `host: ` prefixes are the launcher's."""
_DETECT_SHARE = 0.6

_CTIME = r"[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2} \d{4}"
_ISO = r"\[?\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?\]?:?"
_OMPI_RE = re.compile(
    rf"^\s*(?:{_CTIME})?(?:\[(?P<job>\d+),(?P<rank>\d+)\])?<(?:stdout|stderr|stddiag)>:[ \t]?"
)
_STAMP_RE = re.compile(rf"^\s*(?:{_ISO}|{_CTIME}:?)\s+")
_LABEL_RE = re.compile(r"^\s*(?P<rank>\d{1,6}): ")
_HOST_RE = re.compile(r"^(?P<host>[A-Za-z][\w.-]{0,62}): ")
# Header lines of nccl-tests / rccl-tests, recognised when a paste lost their `#`.
_BARE_HEADER_RE = re.compile(
    r"^\s*(?:nThread \d|Using devices|Rank\s+\d+\s+(?:Group\s+\d+\s+)?(?:Pid\s+\d+\s+)?on\s"
    r"|size\s+count\s|bytes\s+N\s|\(B\)\s+\(elements\)|out-of-place\s|Out of bounds values"
    r"|Avg bus bandwidth|Collective test (?:starting|concluded)|[nr]ccl-tests version"
    r"|Blocking Enabled|Writing JSON output)"
)
_MAY_PREFIX = frozenset("[0123456789MTWFS <\t")  # first characters of a prefixed line
_MAY_BARE = frozenset("nUROsbAoCBWr(")  # first characters of a header line without its `#`
_NCCL_TESTS_TEXT_RE = re.compile(r"^\s*(?:#|\d+\s+\d+\s+[A-Za-z])")


class CleanLine(NamedTuple):
    """A line without its launcher prefix; `origin` is the rank or host the prefix named."""

    text: str
    origin: str | None = None


def restore_comment(text: str) -> str:
    """A header line that lost its `#` in a paste gets it back; other lines are unchanged."""
    if text[:1] != "#" and _BARE_HEADER_RE.match(text):
        return "# " + text.lstrip()
    return text


class LineCleaner:
    """Strips launcher prefixes from a stream of lines (see the module docstring)."""

    def __init__(self) -> None:
        self._mode: str | None = None  # "label" | "host" | "" (none) once decided

    def clean(self, line: str) -> CleanLine:
        """One line, prefix stripped (call `decide` first for the ambiguous forms)."""
        if not self._mode and line[:1] not in _MAY_PREFIX:
            return CleanLine(restore_comment(line) if line[:1] in _MAY_BARE else line)
        origin = None
        if "<std" in line and (m := _OMPI_RE.match(line)) is not None:
            origin, line = m.group("rank"), line[m.end() :]
        elif line[:1] in "[0123456789MTWFS " and (m := _STAMP_RE.match(line)) is not None:
            line = line[m.end() :]
            if "<std" in line and (m := _OMPI_RE.match(line)) is not None:
                origin, line = m.group("rank"), line[m.end() :]
        if self._mode == "label" and (m := _LABEL_RE.match(line)) is not None:
            origin, line = m.group("rank"), line[m.end() :]
        elif self._mode == "host" and (m := _HOST_RE.match(line)) is not None:
            origin, line = m.group("host"), line[m.end() :]
        return CleanLine(restore_comment(line), origin)

    def decide(self, first_lines: list[str]) -> None:
        """Decide from the first lines whether `0: ` or `host: ` prefixes are the launcher's:
        most non-empty lines carry one, and some carry nccl-tests text after it."""
        lines = [ln for ln in first_lines if ln.strip()]
        self._mode = ""
        if not lines:
            return
        for mode, rx in (("label", _LABEL_RE), ("host", _HOST_RE)):
            hits = [m for m in (rx.match(ln) for ln in lines) if m is not None]
            ours = sum(1 for m in hits if _NCCL_TESTS_TEXT_RE.match(m.string[m.end() :]))
            if len(hits) >= _DETECT_SHARE * len(lines) and ours:
                self._mode = mode
                return


def clean_lines(lines: Iterable[str]) -> Iterator[CleanLine]:
    """Stream lines without their launcher prefixes (a few lines are held to decide the form)."""
    cleaner = LineCleaner()
    held: list[str] = []
    it = iter(lines)
    for line in it:
        held.append(line)
        if len(held) >= DETECT_LINES:
            break
    cleaner.decide(held)
    for line in held:
        yield cleaner.clean(line)
    for line in it:
        yield cleaner.clean(line)
