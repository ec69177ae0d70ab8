"""Reading the lines of a text output: `LineReader` (line ends off, any source, in linear
time) and `LogLines` (each line also cleaned of launcher prefixes and paste artefacts).

`iter_lines` and `raw_lines` are the plain readers for callers that need no cleaning.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Iterator
from typing import Any

from r2bench.parse.logprefix import DETECT_LINES, LineCleaner

MAX_LINE = 8192  # longer lines are not nccl-tests lines (binary garbage, runaway logs)
_CHUNK = 1 << 20
_LONGEST = 1 << 20  # a "line" held longer than this is cut: it is never one of ours


class LineReader:
    """The lines of a text source without their line ends (`\\n`, and a `\\r` before it).

    A binary file is read in 1 MiB chunks, each decoded once (UTF-8, leniently), so the cost
    per line does not depend on how lines are mixed; a str or bytes is split at once; any other
    iterable is taken line by line. `ended` says, once read, whether the last line had its line
    end (a line without one may have been cut mid-way)."""

    def __init__(self, source: str | bytes | Iterable[str] | Iterable[bytes]) -> None:
        self.source = source
        self.ended = True

    def __iter__(self) -> Iterator[str]:
        src = self.source
        if isinstance(src, bytes):
            src = src.decode("utf-8", errors="replace")
        if isinstance(src, str):
            yield from self._split(src)
            return
        read = getattr(src, "read", None)
        if read is not None and not isinstance(src, io.TextIOBase):
            yield from self._chunks(read)
            return
        last = ""
        for raw in src:
            text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw
            last = text
            if "\n" in text[:-1]:  # a block of lines (stdin read whole), not one line
                yield from self._split(text)
                continue
            yield text.rstrip("\r\n")
        self.ended = last.endswith(("\n", "\r")) or last == ""

    def _split(self, text: str) -> Iterator[str]:
        lines = text.split("\n")
        tail = lines.pop()
        for line in lines:
            yield line[:-1] if line[-1:] == "\r" else line
        if tail:
            self.ended = tail.endswith("\r")
            yield tail.rstrip("\r")

    def _chunks(self, read: Any) -> Iterator[str]:
        held = b""
        overlong = False  # `held` is the start of a line longer than any of ours
        while True:
            chunk = read(_CHUNK)
            if not chunk:
                break
            if isinstance(chunk, str):
                chunk = chunk.encode("utf-8", errors="replace")
            cut = chunk.rfind(b"\n")
            if cut < 0:
                if not overlong:
                    held += chunk
                    if len(held) > _LONGEST:
                        held, overlong = held[: MAX_LINE + 1], True
                continue
            if overlong:
                block = held + chunk[chunk.find(b"\n") : cut + 1]
                overlong = False
            else:
                block = held + chunk[: cut + 1]
            held = chunk[cut + 1 :]
            for line in block.decode("utf-8", errors="replace")[:-1].split("\n"):
                yield line[:-1] if line[-1:] == "\r" else line
        if held:
            self.ended = held.endswith(b"\r")
            yield held.decode("utf-8", errors="replace").rstrip("\r")


class LogLines:
    """(line number, the line as written, the line cleaned, the rank/host/file its prefix
    named, the time stamp a log collector put before it) for every line of a source: launcher
    prefixes and paste artefacts taken off (`logprefix.LineCleaner`)."""

    def __init__(
        self, source: str | bytes | Iterable[str] | Iterable[bytes], first_line: int = 1
    ) -> None:
        self.reader = LineReader(source)
        self.first_line = first_line
        self.last = first_line - 1

    @property
    def ended(self) -> bool:
        return self.reader.ended

    def __iter__(self) -> Iterator[tuple[int, str, str, str | None, str | None]]:
        cleaner = LineCleaner()
        it = iter(self.reader)
        held: list[str] = []
        for line in it:
            held.append(line)
            if len(held) >= DETECT_LINES:
                break
        cleaner.decide(held)
        split = cleaner.split
        count = 0
        try:
            for count, line in enumerate(held, self.first_line):
                yield (count, line, *split(line))
            for count, line in enumerate(it, self.first_line + len(held)):
                yield (count, line, *split(line))
        finally:
            self.last = count if count else self.first_line - 1


def raw_lines(source: str | bytes | Iterable[str] | Iterable[bytes]) -> Iterator[str]:
    """Lines of a text source with their line ends; bytes are decoded leniently (UTF-8)."""
    if isinstance(source, bytes):
        source = source.decode("utf-8", errors="replace")
    if isinstance(source, str):
        source = io.StringIO(source)
    for raw in source:
        yield raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw


def iter_lines(source: str | bytes | Iterable[str] | Iterable[bytes]) -> Iterator[str]:
    """Lines of a text source without their line ends; bytes are decoded leniently (UTF-8)."""
    for raw in raw_lines(source):
        yield raw.rstrip("\r\n")
