"""Parse a run once: its rows of every table, kept beside the tables until the run changes.

Parsing a run folder (nccl-tests text and JSON, logs, recovery metrics) costs milliseconds;
a sweep of thousands of runs is reported, compared and drawn many times. The tables build
keeps each complete run's rows in `<sweep>/tables/runs/<folder>.<digest>.json` and reads them back
instead of parsing again, as long as

- every file of the run folder (and of its `node/` folder) has the same name, type, size,
  inode and modification time as when the rows were made (a changed, added, removed or
  swapped-in file means a new parse), and
- the r2bench code that made them is the same (a hash of the package's sources: any change
  to parsing, metrics or tables means a new parse; there is no version number to forget).

A cache file that does not match, cannot be read or does not have the expected shape is
ignored (the run is parsed again); one that cannot be written is skipped. Like the tables,
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

from r2bench.records import store as st
from r2bench.safeio import JSON_RECORD_LIMIT, InputRefused, inside, read_text_bounded

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
"""A run folder's fingerprint: (path, mode, size, inode, mtime ns) per entry."""


def fingerprint(run_dir: Path) -> Prints | None:
    """(path, mode, size, inode, mtime ns) of every entry of a run folder and of its node
    files, links not followed: what the rows were made from (None: the folder cannot be
    listed, so nothing is kept for it)."""
    out: Prints = []
    stack = [run_dir]
    try:
        while stack:
            folder = stack.pop()
            with os.scandir(folder) as entries:
                for entry in entries:
                    info = entry.stat(follow_symlinks=False)
                    rel = os.path.relpath(entry.path, run_dir)
                    out.append([rel, info.st_mode, info.st_size, info.st_ino, info.st_mtime_ns])
                    if entry.is_dir(follow_symlinks=False) and rel.split(os.sep)[0] == st.NODE_DIR:
                        stack.append(Path(entry.path))
    except OSError:
        return None
    out.sort()
    return out


def cache_path(sweep_dir: Path, run_dir: Path, prints: Prints) -> Path:
    """Where a run's rows are kept: the name carries a digest of the code and the folder's
    fingerprint, so whether rows still hold is one look at the folder, without reading them."""
    digest = hashlib.sha256(code_key().encode())
    digest.update(json.dumps(prints).encode())
    name = f"{run_dir.name}.{digest.hexdigest()[:20]}.json"
    return Path(sweep_dir) / st.TABLES_DIR / CACHE_DIR / name


def is_kept(sweep_dir: Path, run_dir: Path, prints: Prints | None) -> bool:
    """Whether rows that still hold are kept for a run folder (not read: see `load`)."""
    if prints is None:
        return False
    path = cache_path(sweep_dir, run_dir, prints)
    return path.is_file() and not path.is_symlink()


def load(sweep_dir: Path, run_dir: Path, prints: Prints | None) -> dict[str, Any] | None:
    """The rows kept for a run folder whose `fingerprint` is `prints`, or None when there
    are none that still hold."""
    if prints is None:
        return None
    path = cache_path(sweep_dir, run_dir, prints)
    try:
        if path.is_symlink() or not path.is_file():
            return None
        inside(Path(sweep_dir), path)
        doc = json.loads(read_text_bounded(path, 4 * JSON_RECORD_LIMIT, path.name))
        if not isinstance(doc, dict) or doc.get("code") != code_key():
            return None
        if doc.get("fingerprint") != prints:
            return None
    except (OSError, ValueError, InputRefused, RecursionError):
        return None
    rows = doc.get("rows")
    return rows if isinstance(rows, dict) else None


def save(sweep_dir: Path, run_dir: Path, rows: dict[str, Any], prints: Prints | None) -> bool:
    """Keep a run's rows (best effort: a read-only or full disk skips it); True if written.
    Never through a link out of the sweep (a symlinked `tables/`)."""
    if prints is None:
        return False
    path = cache_path(sweep_dir, run_dir, prints)
    doc = {"code": code_key(), "fingerprint": prints, "rows": rows}
    try:
        inside(Path(sweep_dir), path.parent.parent)
        path.parent.mkdir(parents=True, exist_ok=True)
        data = json.dumps(doc, separators=(",", ":"))
        st.atomic_write(path, data, Path(sweep_dir), durable=False)  # a cut file is re-made
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
