"""Source trees copied from the controller (a recipe's LocalSource): which files travel, their
content hash (the cache key's source part) and the tarball that carries them.

Left out: every hidden file or folder (`.git`, caches, scratch folders), `__pycache__`, compiled
Python files and a top-level `results/` folder. Of r2bench's own tree (`{r2bench}`: a checkout)
only the package travels: what runs on the nodes is the package (an installed r2bench sends the
same), and a checkout's tests, docs and examples, 1,100 more files, took a second to unpack.
"""

from __future__ import annotations

import hashlib
import os
import stat
import tarfile
from collections.abc import Iterator
from pathlib import Path

from r2bench import resources

PACKAGE_ROOT_TOKEN = "{r2bench}"
_SKIP_NAMES = {"__pycache__"}
_SKIP_TOP = {"results"}
_SKIP_SUFFIXES = (".pyc", ".pyo")


def package_root() -> Path:
    """The folder that holds the r2bench package (the checkout, or a copy of the installed one)."""
    return resources.source_root()


def resolve_local_path(template: str) -> Path:
    """A LocalSource path with `{r2bench}` replaced by the package root."""
    return Path(template.replace(PACKAGE_ROOT_TOKEN, str(package_root()))).expanduser()


def _skipped(name: str, top: bool) -> bool:
    return (
        name.startswith(".")
        or name in _SKIP_NAMES
        or name.endswith(_SKIP_SUFFIXES)
        or (top and name in _SKIP_TOP)
    )


def tree_files(root: Path) -> Iterator[Path]:
    """Files and symlinks of the tree that travel, relative to `root`, in a stable order."""
    only = _package_only(root)
    for current, dirs, files in os.walk(root):
        top = Path(current) == root
        dirs[:] = sorted(
            d for d in dirs if not _skipped(d, top) and not (top and only and d not in only)
        )
        links = [d for d in dirs if (Path(current) / d).is_symlink()]
        kept = [f for f in [*files, *links] if not _skipped(f, top) and not (top and only)]
        for name in sorted(kept):
            yield (Path(current) / name).relative_to(root)


def _package_only(root: Path) -> frozenset[str]:
    """The top-level folders that alone travel from `root`: the package, of r2bench's own tree;
    else none named (everything not skipped travels)."""
    if root.resolve() == package_root().resolve() and (root / "r2bench").is_dir():
        return frozenset({"r2bench"})
    return frozenset()


def _entry_digest(path: Path) -> bytes:
    info = path.lstat()
    if stat.S_ISLNK(info.st_mode):
        return b"link:" + os.readlink(path).encode()
    mode = b"x" if info.st_mode & stat.S_IXUSR else b"-"
    return mode + hashlib.sha256(path.read_bytes()).digest()


def tree_digest(root: Path) -> str:
    """Content hash of the tree: names, executable bits, link targets and bytes of what travels."""
    total = hashlib.sha256()
    for relative in tree_files(root):
        total.update(str(relative).encode() + b"\0" + _entry_digest(root / relative) + b"\0")
    return "tree:" + total.hexdigest()[:24]


def write_tarball(root: Path, target: Path) -> Path:
    """Pack what travels of `root` into `target` (gzip, fast level); returns `target`."""
    with tarfile.open(target, "w:gz", compresslevel=1) as archive:
        for relative in tree_files(root):
            archive.add(root / relative, arcname=str(relative), recursive=False)
    return target
