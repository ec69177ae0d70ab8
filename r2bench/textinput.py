"""One bounded reader for every text file r2bench reads: logs, `-J` JSON, standard input.

Files come from other people's machines in every form: UTF-16 (what PowerShell's `>` writes),
a UTF-8 byte order mark, bare-CR line ends (old Mac tools, progress bars), gzip/bzip2/xz
archives of a log, one 2 GB line, a stream of zeros. :func:`open_text` reads any of them as
UTF-8 bytes with LF line ends, in bounded chunks, so that every reader downstream sees one form:

- compression by its magic bytes: gzip, bzip2 and xz read (stdlib, streamed); zstd, zip, 7z and
  lz4 refused by name (:class:`NotText`);
- encoding by its byte order mark (UTF-8, UTF-16 LE/BE), else UTF-16 when the NULs of the first
  block say so; UTF-32 refused by name; anything else is read as UTF-8 (bad bytes replaced
  downstream);
- CR, LF and CRLF alike: each line ends with LF;
- lines capped at `line_limit` bytes: a longer line is cut there (the rest of it skipped up to
  its line end), counted, and its first number kept (`TextStats`), the lines after it read.

Time and memory are linear in the input and flat per line: each chunk is decoded, its line ends
rewritten and its long lines found by C-level byte searches (one `rfind` per `line_limit`
bytes, never one Python step per line).
"""

from __future__ import annotations

import bz2
import codecs
import gzip
import io
import lzma
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, cast

from r2bench.safeio import InputRefused, check_regular

CHUNK = 1 << 20
LINE_LIMIT = 64 * 1024
"""The longest log line kept whole: no nccl-tests or NCCL line comes near it."""

_COMPRESSED = ((b"\x1f\x8b", "gzip"), (b"BZh", "bzip2"), (b"\xfd7zXZ\x00", "xz"))
_REFUSED_ARCHIVES = (
    (b"\x28\xb5\x2f\xfd", "zstd"),
    (b"PK\x03\x04", "zip"),
    (b"7z\xbc\xaf\x27\x1c", "7z"),
    (b"\x04\x22\x4d\x18", "lz4"),
)


def _unpacking(form: str, raw: io.BufferedIOBase) -> io.BufferedIOBase:
    """`raw` read through its compression's stdlib reader (streamed, bounded reads)."""
    if form == "gzip":
        return gzip.GzipFile(fileobj=raw, mode="rb")
    if form == "bzip2":
        return bz2.BZ2File(raw, "rb")
    return lzma.LZMAFile(cast("IO[bytes]", raw), "rb")


_SNIFF = 4096


class NotText(InputRefused):
    """A file in a form r2bench does not read (an archive it cannot open, UTF-32): refused,
    the form named."""


@dataclass
class TextStats:
    """What reading a file found about its form, for the reader's warnings."""

    encoding: str = "utf-8"
    compression: str | None = None
    cut_lines: int = 0
    first_cut: int | None = None
    """The number (1-based) of the first line cut at the line limit."""
    line_limit: int | None = LINE_LIMIT
    broken: str | None = None
    """Where and why packed data broke off (the lines before it were read)."""

    def warnings(self) -> list[str]:
        """One located warning for the lines cut, and one for packed data that broke off."""
        out = [self.broken] if self.broken else []
        if not self.cut_lines:
            return out
        more = f" ({self.cut_lines} such lines)" if self.cut_lines > 1 else ""
        return [
            *out,
            f"line {self.first_cut}: longer than {_size_text(self.line_limit or 0)}; cut there,"
            f" the rest of it not read{more}",
        ]


def _size_text(size: int) -> str:
    return f"{size // 1024} KiB" if size >= 1024 else f"{size} bytes"


class _Normalised(io.RawIOBase):
    """The raw stream of UTF-8 bytes with LF line ends (see the module docstring)."""

    def __init__(self, raw: io.BufferedIOBase, name: str, line_limit: int | None) -> None:
        super().__init__()
        self.name_shown = name
        self.stats = TextStats(line_limit=line_limit)
        self._source = self._open_layers(raw)
        self._decoder: codecs.IncrementalDecoder | None = None
        self._started = False
        self._held_cr = False
        self._line_len = 0  # bytes of the current (unfinished) line already passed on
        self._skipping = False  # inside a line cut at the limit: drop up to its line end
        self._lines = 0  # line ends passed on so far
        self._out = b""
        self._eof = False

    # ------------------------------------------------------------------ the layers

    def _open_layers(self, raw: io.BufferedIOBase) -> io.BufferedIOBase:
        head = _peek(raw, 8)
        for magic, form in _REFUSED_ARCHIVES:
            if head.startswith(magic):
                raise NotText(
                    f"{self.name_shown}: a {form} archive; r2bench reads plain, gzip, bzip2 or"
                    f" xz logs: unpack it first"
                )
        for magic, form in _COMPRESSED:
            if head.startswith(magic):
                self.stats.compression = form
                return _unpacking(form, raw)
        return raw

    def _start(self, block: bytes) -> bytes:
        """Settle the encoding from the first block; that block, BOM taken off."""
        self._started = True
        encoding, bom = _encoding_of(block, self.name_shown)
        self.stats.encoding = encoding
        if encoding != "utf-8":
            self._decoder = codecs.getincrementaldecoder(encoding)(errors="replace")
        return block[bom:]

    # ------------------------------------------------------------------ reading

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        while not self._out and not self._eof:
            self._out = self._next_block()
        size = min(len(buffer), len(self._out))
        buffer[:size] = self._out[:size]
        self._out = self._out[size:]
        return size

    def _next_block(self) -> bytes:
        try:
            # one read of the layer below (read1): a break in packed data then costs only
            # what follows it, never the block read before it
            chunk = self._source.read1(CHUNK)
        except (EOFError, OSError, lzma.LZMAError) as error:
            # packed data cut short or corrupt: what came before the break is the input
            self.stats.broken = (
                f"line {self._lines + 1}: the {self.stats.compression or 'file'} data breaks"
                f" off here ({error}); the lines before it were read"
            )
            chunk = b""
        if not self._started:
            chunk = self._start(chunk + _peek_rest(self._source, chunk))
        if not chunk:
            self._eof = True
            tail = b"" if self._decoder is None else self._decoder.decode(b"", True).encode()
            if self._held_cr:
                self._held_cr = False
                tail = b"\r" + tail
            return self._cap(tail.replace(b"\r\n", b"\n").replace(b"\r", b"\n"))
        if self._decoder is not None:
            chunk = self._decoder.decode(chunk).encode("utf-8", "surrogatepass")
        return self._cap(self._line_ends(chunk))

    def _line_ends(self, chunk: bytes) -> bytes:
        """`chunk` with CRLF and bare CR written as LF (a CR at its end held for the next)."""
        if self._held_cr:
            chunk = b"\r" + chunk
            self._held_cr = False
        if chunk.endswith(b"\r"):
            chunk, self._held_cr = chunk[:-1], True
        if b"\r" not in chunk:
            return chunk
        return chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")

    def _cap(self, data: bytes) -> bytes:
        """`data` with every line longer than the limit cut (counted, its number kept)."""
        limit = self.stats.line_limit
        if limit is None or not data:
            return data
        pieces: list[bytes] = []
        pos, end = 0, len(data)
        while pos < end:
            if self._skipping:
                newline = data.find(b"\n", pos)
                if newline < 0:
                    break
                self._skipping, self._line_len, pos = False, 0, newline
                continue
            room = limit - self._line_len
            window_end = pos + room + 1
            last = data.rfind(b"\n", pos, window_end)
            if last >= 0:
                pieces.append(data[pos : last + 1])
                self._lines += data.count(b"\n", pos, last + 1)
                self._line_len, pos = 0, last + 1
            elif window_end > end:
                pieces.append(data[pos:])
                self._line_len += end - pos
                pos = end
            else:
                pieces.append(data[pos : pos + room])
                self.stats.cut_lines += 1
                if self.stats.first_cut is None:
                    self.stats.first_cut = self._lines + 1
                self._skipping, pos = True, pos + room
        return b"".join(pieces)


def _peek(raw: io.BufferedIOBase, size: int) -> bytes:
    """The first `size` bytes of `raw`, left unread (a buffered file's peek, else a seek)."""
    peek = getattr(raw, "peek", None)
    if peek is not None:
        return bytes(peek(size)[:size])
    position = raw.tell()
    head = raw.read(size)
    raw.seek(position)
    return head


def _peek_rest(source: io.BufferedIOBase, first: bytes) -> bytes:
    """More bytes when the first chunk was too short to judge the encoding by."""
    if len(first) >= _SNIFF or not first:
        return b""
    more = source.read1(_SNIFF - len(first))
    return more if more else b""


def _encoding_of(block: bytes, name: str) -> tuple[str, int]:
    """(encoding, length of its byte order mark) of a file that starts with `block`."""
    if block.startswith((b"\xff\xfe\x00\x00", b"\x00\x00\xfe\xff")):
        raise NotText(f"{name}: UTF-32 text; save it as UTF-8 (or UTF-16) and give it again")
    if block.startswith(b"\xef\xbb\xbf"):
        return "utf-8", 3
    if block.startswith(b"\xff\xfe"):
        return "utf-16-le", 2
    if block.startswith(b"\xfe\xff"):
        return "utf-16-be", 2
    sample = block[:_SNIFF]
    pairs = len(sample) // 2
    if pairs < 2:
        return "utf-8", 0
    even = sample[0 : pairs * 2 : 2].count(0) / pairs
    odd = sample[1 : pairs * 2 : 2].count(0) / pairs
    if odd > 0.3 and even > 0.3:
        quads = sample[: len(sample) // 4 * 4]
        if (
            quads
            and quads[0::4].count(0) < len(quads) // 20
            and quads[2::4].count(0) > len(quads) // 5
        ):
            raise NotText(f"{name}: UTF-32 text; save it as UTF-8 (or UTF-16) and give it again")
        return "utf-8", 0  # NULs everywhere: binary garbage (a stream of zeros), read as is
    if odd > 0.3 and even < 0.05:
        return "utf-16-le", 0
    if even > 0.3 and odd < 0.05:
        return "utf-16-be", 0
    return "utf-8", 0


class TextFile:
    """An open text input: `read`, `readline` and iteration give UTF-8 bytes with LF line ends
    (see the module docstring); `stats` says what form it came in and which lines were cut."""

    def __init__(
        self, raw: io.BufferedIOBase, name: str, line_limit: int | None = LINE_LIMIT
    ) -> None:
        self._raw = raw
        try:
            self._stream = _Normalised(raw, name, line_limit)
        except BaseException:
            raw.close()
            raise
        self._buffered = io.BufferedReader(self._stream, CHUNK)
        self.stats = self._stream.stats

    def read(self, size: int = -1) -> bytes:
        """Up to `size` bytes (all that is left with -1: only for inputs already bounded)."""
        return self._buffered.read(size)

    def readline(self, size: int = -1) -> bytes:
        """The next line, with its LF."""
        return self._buffered.readline(size)

    def __iter__(self) -> Iterator[bytes]:
        return iter(self._buffered)

    def close(self) -> None:
        """Close the file (and every layer over it)."""
        self._buffered.close()
        self._raw.close()

    def __enter__(self) -> TextFile:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()


def open_text(path: Path, what: str = "log", line_limit: int | None = LINE_LIMIT) -> TextFile:
    """A regular file opened as text (`TextFile`); InputRefused for a device, fifo or folder,
    NotText for a form r2bench does not read (named)."""
    check_regular(path, what)
    return TextFile(path.open("rb"), str(path), line_limit)


def read_text_capped(path: Path, limit: int, what: str) -> str:
    """A whole file of at most `limit` bytes once decoded (a `-J` JSON file), read through
    `open_text` without a line limit; InputRefused over the limit, never more read."""
    with open_text(path, what, line_limit=None) as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise InputRefused(
            f"{path}: {what} is larger than {limit // 1024} KiB (once unpacked); r2bench"
            " refuses to read it whole (is it the right file?)"
        )
    return data.decode("utf-8", errors="replace")


def decode_text(data: bytes, name: str) -> str:
    """A small file read whole (a config) as text, in any form `open_text` reads: unpacked,
    UTF-16 or a BOM decoded, line ends made LF. NotText for a form not read; bytes that are not
    UTF-8 raise UnicodeDecodeError (the caller names the byte)."""
    with TextFile(io.BytesIO(data), name, line_limit=None) as handle:
        return handle.read().decode("utf-8")
