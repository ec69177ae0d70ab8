"""Parse a run once: its rows of every table, kept beside the tables until the run changes.

Parsing a run folder (nccl-tests text and JSON, logs, recovery metrics) costs milliseconds;
a sweep of thousands of runs is reported, compared and drawn many times. The tables build
keeps each complete run's rows in `<sweep>/tables/runs/<folder>.<digest>.json` and reads them back
instead of parsing again, as long as

- every file of the run folder (and of its `node/` folder) has the same name, type, size,
  inode and modification time as when the rows were made (a changed, added, removed or
  swapped-in file means a new parse); for a link, so has what it leads to, since the parser
  reads through it (a file rewritten in place behind `stdout.txt -> sub/out.txt` is new), and
- the r2bench code that made them is the same (a hash of the package's sources: any change
  to parsing, metrics or tables means a new parse; there is no version number to forget).

A cache file that does not match, cannot be read or is not exactly as it was written (its rows
carry a digest of their own text: a file cut short, edited or put together by hand) is ignored
and the run is parsed again; one that cannot be written is skipped. Like the tables,
the cache is derived data: delete `tables/` at any time.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
from functools import cache
from pathlib import Path
from typing import Any

from r2bench.runfolder import runformat
from r2bench.safeio import (
    JSON_RECORD_LIMIT,
    InputRefused,
    atomic_write,
    inside,
    read_bytes_bounded,
)

CACHE_DIR = "runs"
"""Under the sweep's tables folder."""
_PACKAGE = Path(__file__).resolve().parent.parent


@cache
def code_key() -> str:
    """A hash of every r2bench source file: rows made by other code are never reused."""
    digest = hashlib.sha256()
    for path in sorted(_PACKAGE.rglob("*.py")):
        digest.update(path.relative_to(_PACKAGE).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:32]


Prints = list[list[Any]]
"""A run folder's fingerprint: (path, mode, size, inode, mtime ns) per entry, and for a link
the same of what it leads to (None when it leads nowhere)."""


def _stat_row(info: os.stat_result) -> list[int]:
    return [info.st_mode, info.st_size, info.st_ino, info.st_mtime_ns]


def fingerprint(run_dir: Path) -> Prints | None:
    """What the rows of a run folder are made from: (path, mode, size, inode, mtime ns) of every
    entry of the folder and of its node files, and for each link the same of its target (the
    parser follows links; a node/ folder behind a link is walked too, each folder once). None:
    the folder cannot be listed, so nothing is kept for it."""
    out: Prints = []
    stack = [run_dir]
    seen: set[tuple[int, int]] = set()
    try:
        while stack:
            folder = stack.pop()
            with os.scandir(folder) as entries:
                for entry in entries:
                    rel = os.path.relpath(entry.path, run_dir)
                    row: list[Any] = [rel, *_stat_row(entry.stat(follow_symlinks=False))]
                    target = _followed(entry) if entry.is_symlink() else None
                    if entry.is_symlink():
                        row.append(None if target is None else _stat_row(target))
                    out.append(row)
                    if rel.split(os.sep)[0] != runformat.NODE_DIR or not entry.is_dir():
                        continue
                    info = target or entry.stat(follow_symlinks=False)
                    if (info.st_dev, info.st_ino) not in seen:  # a link back up is walked once
                        seen.add((info.st_dev, info.st_ino))
                        stack.append(Path(entry.path))
    except OSError:
        return None
    out.sort()
    return out


def _followed(entry: os.DirEntry[str]) -> os.stat_result | None:
    """The stat of what a link leads to; None for a dangling link or a loop."""
    try:
        return entry.stat(follow_symlinks=True)
    except OSError:
        return None


def cache_path(sweep_dir: Path, run_dir: Path, prints: Prints) -> Path:
    """Where a run's rows are kept: the name carries a digest of the code and the folder's
    fingerprint, so whether rows still hold is one look at the folder, without reading them."""
    digest = hashlib.sha256(code_key().encode())
    digest.update(json.dumps(prints).encode())
    name = f"{run_dir.name}.{digest.hexdigest()[:20]}.json"
    return Path(sweep_dir) / runformat.TABLES_DIR / CACHE_DIR / name


def is_kept(sweep_dir: Path, run_dir: Path, prints: Prints | None) -> bool:
    """Whether rows that still hold are kept for a run folder (not read: see `load`)."""
    if prints is None:
        return False
    path = cache_path(sweep_dir, run_dir, prints)
    return path.is_file() and not path.is_symlink()


def load(sweep_dir: Path, run_dir: Path, prints: Prints | None) -> dict[str, Any] | None:
    """The rows kept for a run folder whose `fingerprint` is `prints`, or None when there
    are none that still hold, or when the file is not exactly as `save` wrote it."""
    if prints is None:
        return None
    path = cache_path(sweep_dir, run_dir, prints)
    try:
        if path.is_symlink() or not path.is_file():
            return None
        inside(Path(sweep_dir), path)
        data = read_bytes_bounded(path, 4 * JSON_RECORD_LIMIT, path.name)
        at = data.find(_ROWS_KEY)
        if at < 0 or not data.endswith(b"}"):
            return None
        head, rows_text = json.loads(data[:at] + b"}"), data[at + len(_ROWS_KEY) : -1]
        if not isinstance(head, dict) or head.get("digest") != _digest(rows_text):
            return None
        if head.get("code") != code_key() or head.get("fingerprint") != prints:
            return None
        rows = json.loads(rows_text)
    except (OSError, ValueError, InputRefused, RecursionError):
        return None
    return rows if isinstance(rows, dict) else None


# The kept file is `{"code":...,"fingerprint":...,"digest":...,"rows":<rows>}`, written in this
# order: the rows' own text is what follows the first `,"rows":` (JSON escapes every quote
# inside a string, so the key cannot appear earlier) up to the closing brace.
_ROWS_KEY = b',"rows":'


def _digest(rows_text: bytes) -> str:
    return hashlib.sha256(rows_text).hexdigest()[:32]


def save(sweep_dir: Path, run_dir: Path, rows: dict[str, Any], prints: Prints | None) -> bool:
    """Keep a run's rows (best effort: a read-only or full disk skips it); True if written.
    Never through a link out of the sweep (a symlinked `tables/`)."""
    if prints is None:
        return False
    path = cache_path(sweep_dir, run_dir, prints)
    try:
        inside(Path(sweep_dir), path.parent.parent)
        path.parent.mkdir(parents=True, exist_ok=True)
        rows_text = json.dumps(rows, separators=(",", ":")).encode()
        head = {"code": code_key(), "fingerprint": prints, "digest": _digest(rows_text)}
        data = json.dumps(head, separators=(",", ":")).encode()[:-1] + _ROWS_KEY + rows_text + b"}"
        atomic_write(path, data, Path(sweep_dir), durable=False)  # a cut file is re-made
        for old in path.parent.glob(f"{glob.escape(run_dir.name)}.*.json"):
            if old != path:  # rows of the run's earlier state or of other code
                old.unlink(missing_ok=True)
    except (OSError, ValueError):
        return False
    return True


def build_key(sweep_dir: Path, prints: dict[Path, Prints | None], notes: list[str]) -> str:
    """What a sweep's tables are made from: the code, every run folder's fingerprint and the
    build's own notes (links left out, duplicates). Equal keys give equal tables."""
    digest = hashlib.sha256(code_key().encode())
    digest.update(str(Path(sweep_dir)).encode())
    for path, fp in prints.items():
        digest.update(json.dumps([path.name, fp]).encode())
    digest.update(json.dumps(notes).encode())
    return digest.hexdigest()
