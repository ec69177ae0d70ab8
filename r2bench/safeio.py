"""Bounded, link-aware file access for every input and output r2bench touches.

Inputs come from users and from other people's machines: a config may be a device file, a log may be
gigabytes, a results folder may hold symlinks that point elsewhere. Everything r2bench reads whole
goes through :func:`read_text_bounded` (size checked before reading, device files refused), and
everything it writes under a results folder goes through :func:`inside` (no link may lead out).
Every file r2bench writes whole goes through :func:`atomic_write` (or :func:`replacing`, for a
writer that streams): a temporary file beside it and a rename, so a reader never sees half a file.
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

from r2bench.errors import InputError, WriteFailed

# Caps for files read whole. Logs are never read whole: they are streamed line by line.
# A testbed of a 100,000-host Slurm allocation (the node list's cap) is about 5 MB as written.
CONFIG_LIMIT = 16 * 1024 * 1024
JSON_RECORD_LIMIT = 16 * 1024 * 1024
# A CloudLab manifest: about 2 KiB a node, so thousands of nodes fit many times over.
MANIFEST_LIMIT = 16 * 1024 * 1024


class InputRefused(InputError, ValueError):
    """An input file r2bench will not read: not a regular file, or larger than its cap."""


class OutsideFolder(InputError, ValueError):
    """A path that leaves the folder it must stay in (through a symlink or '..')."""


class TooDeep(ValueError, RecursionError):
    """JSON nested deeper than the parser can go: a ValueError, as any invalid JSON is, and
    still the RecursionError that callers long caught for it."""


def json_loads(text: str | bytes, **options: Any) -> Any:
    """`json.loads`, with JSON nested too deeply to read (a hostile `[[[[...`) refused as
    invalid JSON (TooDeep, a ValueError) instead of the parser's bare RecursionError, and
    every string one that UTF-8 can hold (`utf8_text`)."""
    try:
        doc = json.loads(text, **options)
    except RecursionError:
        raise TooDeep("nested too deeply to read") from None
    pattern = _SURROGATE_ESCAPE_BYTES if isinstance(text, bytes) else _SURROGATE_ESCAPE
    return _utf8_strings(doc) if pattern.search(text) else doc  # type: ignore[arg-type]


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE_ESCAPE_BYTES = re.compile(rb"\\u[dD][89a-fA-F]")


def utf8_text(text: str) -> str:
    """`text` with each lone surrogate (`\\ud800`: JSON can spell one, no UTF-8 file can hold
    it) written as its escape, so that it can be written and printed as the file spells it."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _utf8_strings(doc: Any) -> Any:
    """`doc` with `utf8_text` applied to every string, keys included (iterative: a document
    json accepted may be nested nearly as deep as the interpreter's recursion limit)."""
    top: list[Any] = [doc]
    stack: list[Any] = [top]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            cleaned = {utf8_text(k) if isinstance(k, str) else k: v for k, v in node.items()}
            node.clear()
            node.update(cleaned)
            keys: Iterable[Any] = list(node)
        else:
            keys = range(len(node))
        for key in keys:
            value = node[key]
            if isinstance(value, str):
                node[key] = utf8_text(value)
            elif isinstance(value, (dict, list)):
                stack.append(value)
    return top[0]


def check_regular(path: Path, what: str) -> os.stat_result:
    """Stat `path` and refuse anything but a regular file (devices, fifos, sockets, folders)."""
    info = path.stat()
    if not stat.S_ISREG(info.st_mode):
        raise InputRefused(
            f"{path}: {what} is not a regular file (a device, fifo or folder); give a file"
        )
    return info


def read_text_bounded(path: Path, limit: int, what: str = "input") -> str:
    """Read a regular text file of at most `limit` bytes, refusing larger or special files.

    The size is checked before reading and again while reading (a file may grow meanwhile).
    """
    return read_bytes_bounded(path, limit, what).decode("utf-8", errors="replace")


def read_bytes_bounded(path: Path, limit: int, what: str = "input") -> bytes:
    """:func:`read_text_bounded` without the decoding (for callers that report bad UTF-8)."""
    check_bounded(path, limit, what)
    with path.open("rb") as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise InputRefused(_too_large(path, what, limit))
    return data


def read_stream_bounded(stream: BinaryIO, limit: int, what: str, name: str) -> bytes:
    """At most `limit` bytes of an open stream (stdin, a pipe), refusing a longer one after
    reading one byte past the cap: never the whole of an endless stream (`/dev/zero`)."""
    data = stream.read(limit + 1)
    if len(data) > limit:
        raise InputRefused(_too_large(Path(name), what, limit))
    return data


def check_bounded(path: Path, limit: int, what: str = "input") -> os.stat_result:
    """Refuse `path` unless it is a regular file of at most `limit` bytes, without reading it
    (for files another library opens, such as ssh's known_hosts)."""
    info = check_regular(path, what)
    if info.st_size > limit:
        raise InputRefused(_too_large(path, what, limit))
    return info


def _too_large(path: Path, what: str, limit: int) -> str:
    return (
        f"{path}: {what} is larger than {limit // 1024} KiB; r2bench refuses to read it whole"
        " (is it the right file?)"
    )


def inside(root: Path, path: Path) -> Path:
    """Return `path` resolved, refusing it unless it stays under `root` once every link is followed."""
    try:
        real_root = root.resolve()
        real = path.resolve()
    except (RuntimeError, OSError):  # a link loop (RuntimeError before Python 3.13)
        raise OutsideFolder(
            f"{path}: a link loop (it leads to no file); refusing to follow it"
        ) from None
    if real != real_root and real_root not in real.parents:
        raise OutsideFolder(
            f"{path}: leads outside {root} (through a symlink?); refusing to follow it"
        )
    return real


def writable(root: Path, path: Path) -> Path:
    """`path` made safe to write in place under `root`: its folder must stay under `root` once
    every link is followed (OutsideFolder otherwise), and a link at `path` itself is removed
    first, so the write replaces the link and never touches what it pointed at."""
    inside(root, path.parent)
    if path.is_symlink():
        path.unlink()
    return path


def atomic_write(
    path: Path,
    data: str | bytes,
    root: Path | None = None,
    durable: bool = True,
    mode: int | None = None,
) -> None:
    """Write `data` to `path` through a temporary file in the same folder and a rename (which
    replaces a link at `path`, never its target). With `root`, the folder must stay under it
    once links are followed (OutsideFolder otherwise): results never land outside their sweep.
    `durable=False` skips the fsync, for derived files a crash may only cut short. The file
    gets `mode`, or the usual mode of a new file (`file_mode`)."""
    raw = data.encode() if isinstance(data, str) else data
    with replacing(path, root, durable, mode) as temp:
        temp.write_bytes(raw)


@contextmanager
def replacing(
    path: Path, root: Path | None = None, durable: bool = True, mode: int | None = None
) -> Iterator[Path]:
    """A temporary file beside `path` for the caller to write; when the block ends without an
    error it gets its mode and is renamed over `path` (a link there is replaced, never
    followed), else it is removed. `root`, `durable` and `mode` as for `atomic_write`."""
    if root is not None:
        inside(root, path.parent)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.close(fd)
    except OSError as error:
        raise write_failed(path, error) from error
    temp = Path(name)
    try:
        yield temp
        os.chmod(temp, file_mode() if mode is None else mode)
        if durable:
            with temp.open("rb+") as written:
                os.fsync(written.fileno())
        os.replace(temp, path)
    except OSError as error:
        temp.unlink(missing_ok=True)
        if isinstance(error, WriteFailed):
            raise  # an inner write already said which file (nested writers: Parquet and CSV)
        if error.filename not in (None, name, str(path)):
            raise  # the caller's own error (a file it read), not this write's
        raise write_failed(path, error) from error
    except BaseException:
        temp.unlink(missing_ok=True)
        raise


_WRITE_HINTS = {
    errno.EFBIG: "the file is larger than this process may write (`ulimit -f`) or the file"
    " system holds",
    errno.ENOSPC: "the disk is full: free space or write elsewhere",
    errno.EDQUOT: "the disk quota is used up: free space or write elsewhere",
    errno.EROFS: "the file system is read-only: write elsewhere",
    errno.EACCES: "no permission to write there: write elsewhere or change the folder's owner",
    errno.EPERM: "no permission to write there: write elsewhere or change the folder's owner",
}


def write_failed(path: Path, error: OSError) -> WriteFailed:
    """The clean error for a write the machine refused: the file, the system's words and
    what to do (see WriteFailed)."""
    words = error.strerror or str(error)
    name = errno.errorcode.get(error.errno or 0, "")
    hint = _WRITE_HINTS.get(error.errno or 0, "check the folder and the disk, then run again")
    return WriteFailed(f"{path}: could not write it: {words}{f' ({name})' if name else ''}; {hint}")


def file_mode() -> int:
    """The mode a new file gets here (0666 less the umask): temporary files are 0600."""
    return 0o666 & ~_umask()


def _umask() -> int:
    """The process umask, read without changing it (mkstemp files are 0600 otherwise)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022
