"""Undo what launchers, pastes and chat tools do to log lines before they are read.

Launchers prefix every line: Open MPI `--tag-output` (`[1,0]<stdout>:`), `--timestamp-output`
(a ctime stamp before the tag), Slurm `srun --label` (`0: `), pdsh/clush (`host: `), torchrun
(`[rank0]:`), `grep` over several files (`run-2nodes.log:` before each line), and log collectors
an ISO stamp. Markdown and chat pastes add their own: code fences (```` ```bash ````), `>` quote
marks, autolinks made of what looked like a host name (`[p2p.cc:783](https://p2p.cc:783/)`),
backslash escapes (`\\#`, `all\\_reduce`), and they lose the `#` of header lines.
`LineCleaner` takes all of that off and keeps who the prefix named (the rank, host or file), and
gives a lost `#` back.

The unambiguous forms (the Open MPI tag, torchrun's rank tag, stamps, markdown) are stripped
wherever they are. `0: `, `host: ` and `file:` could be a line's own text (`HCA-128: Test NCCL
failure`), so they are stripped only when the first lines of the file show that a launcher or
grep put them on (most lines carry one, and some carry nccl-tests text after it).
"""

from __future__ import annotations

import re

DETECT_LINES = 40
"""Lines looked at to decide whether `0: ` / `host: ` / `file:` prefixes are a launcher's."""
_DETECT_SHARE = 0.6

_CTIME = r"[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2} \d{4}"
_ISO = r"\[?\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?\]?:?"
_OMPI_RE = re.compile(
    rf"^\s*(?:{_CTIME})?(?:\[(?P<job>\d+),(?P<rank>\d+)\])?<(?:stdout|stderr|stddiag)>:[ \t]?"
)
_TORCH_RE = re.compile(r"^\s*\[(?:rank|default)(?P<rank>\d{1,6})\]:[ \t]?")
_STAMP_RE = re.compile(rf"^\s*(?:{_ISO}|{_CTIME}:?)\s+")
_LABEL_RE = re.compile(r"^\s*(?P<rank>\d{1,6}): ")
_HOST_RE = re.compile(r"^(?P<host>[A-Za-z][\w.-]{0,62}): ")
# grep over several files: `logs/run-2nodes.log:   1048576 ...`, `-n` adds the line number.
_FILE_RE = re.compile(r"^(?P<file>[\w./~+-][^\s:]{0,199}?):(?:\d+[:-])?(?=[\s#]|$)")
# Header lines of nccl-tests / rccl-tests, recognised when a paste lost their `#`.
_BARE_HEADER_RE = re.compile(
    r"^\s*(?:nThread \d|Using devices|Rank\s+\d+\s+(?:Group\s+\d+\s+)?(?:Pid\s+\d+\s+)?on\s"
    r"|size\s+count\s|bytes\s+N\s|\(B\)\s+\(elements\)|out-of-place\s|Out of bounds values"
    r"|Avg bus bandwidth|Collective test (?:starting|concluded)|[nr]ccl-tests version"
    r"|Blocking Enabled|Writing JSON output)"
)
_MAY_PREFIX = frozenset("[0123456789MTWFS <\t")  # first characters of a prefixed line
_MAY_BARE = frozenset("nUROsbAoCBWr(")  # first characters of a header line without its `#`
_MAY_BARE_OR_SPACE = _MAY_BARE | frozenset(" \t")
_NCCL_TESTS_TEXT_RE = re.compile(r"^\s*(?:#|\d+\s+\d+\s+[A-Za-z])")

# Markdown and chat artefacts.
_MARKUP_FIRST = frozenset(">`~ \t")  # first characters of a fence or a quoted line
_FENCE_RE = re.compile(r"^\s*(?:>\s?)*(?:```|~~~)")
_QUOTE_RE = re.compile(r"^\s{0,3}(?:>[ \t]?)+")
_AUTOLINK_RE = re.compile(r"\[([^\[\]\s]{1,300})\]\((?:https?|mailto|ftp):[^)\s]{0,400}\)")
_ESCAPE_RE = re.compile(r"\\([#_*\[\]<>`~|-])")


def restore_comment(text: str) -> str:
    """A header line that lost its `#` in a paste gets it back; other lines are unchanged."""
    if text[:1] != "#" and _BARE_HEADER_RE.match(text):
        return "# " + text.lstrip()
    return text


def strip_markup(line: str) -> str:
    """A line as it was before a markdown or chat paste: a fence line is empty, `>` quote marks,
    autolinks (`[p2p.cc:783](https://p2p.cc:783/)` -> `p2p.cc:783`) and backslash escapes are
    taken off; anything else is left as it is."""
    if _FENCE_RE.match(line):
        return ""
    if ">" in line[:8] and (m := _QUOTE_RE.match(line)) is not None:
        line = line[m.end() :]
    if "](" in line:
        line = _AUTOLINK_RE.sub(r"\1", line)
    if "\\" in line:
        line = _ESCAPE_RE.sub(r"\1", line)
    if line.endswith("```"):
        line = line[:-3]
    return line


class LineCleaner:
    """Strips launcher prefixes and paste artefacts from a stream of lines (see the module
    docstring)."""

    def __init__(self) -> None:
        self._mode: str | None = None  # "label" | "file" | "host" | "" (none) once decided

    def split(self, line: str) -> tuple[str, str | None, str | None]:
        """(text, origin, stamp) of one line (call `decide` first for the ambiguous forms):
        the line without its launcher prefix, the rank, host or file the prefix named, and
        the time stamp a log collector or `NCCL_DEBUG_TIMESTAMP_FORMAT` put before it (without
        its brackets). A plain tuple: the hot path of a log of millions of lines, where most
        lines carry no prefix and no markup."""
        first = line[:1]
        if first in _MARKUP_FIRST or "](" in line or "\\" in line or line.endswith("```"):
            line = strip_markup(line)
            first = line[:1]
        if not self._mode and first not in _MAY_PREFIX:
            return (restore_comment(line) if first in _MAY_BARE else line), None, None
        origin = stamp = None
        if first == "[" and line[5:6] == "-" and line[8:9] == "-" and line[14:15] == ":":
            # NCCL_DEBUG_TIMESTAMP_FORMAT's `[2026-11-25 13:19:30.123456] `: the common case of
            # a stamped INFO log, cut without a regex
            end = line.find("]", 17, 48)
            if end > 0 and line[1:5].isdigit():
                stamp, line = line[1:end], line[end + 1 :].lstrip(" \t:")
                first = line[:1]
                if not self._mode and first not in _MAY_PREFIX:
                    return (restore_comment(line) if first in _MAY_BARE else line), None, stamp
        elif first in "[0123456789MTWFS " and (m := _STAMP_RE.match(line)) is not None:
            stamp, line = m.group(0).strip("[]: \t"), line[m.end() :]
        if "<std" in line and (m := _OMPI_RE.match(line)) is not None:
            origin, line = m.group("rank"), line[m.end() :]
        if line[:1] == "[" and line.startswith(("[rank", "[default")):
            m = _TORCH_RE.match(line)
            if m is not None:
                origin, line = m.group("rank"), line[m.end() :]
        if self._mode == "label" and (m := _LABEL_RE.match(line)) is not None:
            origin, line = m.group("rank"), line[m.end() :]
        elif self._mode == "file" and (m := _FILE_RE.match(line)) is not None:
            origin, line = m.group("file"), line[m.end() :]
        elif self._mode == "host" and (m := _HOST_RE.match(line)) is not None:
            origin, line = m.group("host"), line[m.end() :]
        return (restore_comment(line) if line[:1] in _MAY_BARE_OR_SPACE else line), origin, stamp

    def decide(self, first_lines: list[str]) -> None:
        """Decide from the first lines whether `0: `, `file:` or `host: ` prefixes are a
        launcher's or grep's: most non-empty lines carry one, and some carry nccl-tests text
        after it. `file:` (grep's, no space needed) is tried before `host: ` (pdsh's), which
        it also covers."""
        lines = [ln for ln in (strip_markup(x) for x in first_lines) if ln.strip()]
        self._mode = ""
        if not lines:
            return
        for mode, rx in (("label", _LABEL_RE), ("file", _FILE_RE), ("host", _HOST_RE)):
            hits = [m for m in (rx.match(ln) for ln in lines) if m is not None]
            ours = sum(1 for m in hits if _NCCL_TESTS_TEXT_RE.match(m.string[m.end() :]))
            if len(hits) >= _DETECT_SHARE * len(lines) and ours:
                self._mode = mode
                return
