"""Files that ship with r2bench: the build recipes (`plugin/`) and the node-side scripts
(`injectors/`), found the same way from a checkout, an editable install, a wheel or
`pip install --user`.

The repository's top-level `plugin/` and `injectors/` folders are the source of truth; a wheel
carries copies of them inside the package (`r2bench/_data/`, see pyproject.toml), read with
`importlib.resources`. In a checkout (a `pyproject.toml` beside the package) the top-level
folders win, so edits there take effect without reinstalling.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from importlib import resources
from pathlib import Path
from typing import Literal

import r2bench

DataName = Literal["plugin", "injectors"]
DATA_SUBDIR = "_data"
_IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", "*.pyo", DATA_SUBDIR)


def _package_dir() -> Path:
    return Path(r2bench.__file__).resolve().parent


def checkout_root() -> Path | None:
    """The source checkout r2bench runs from, or None when it is installed."""
    root = _package_dir().parent
    return root if (root / "pyproject.toml").is_file() else None


def data_dir(name: DataName) -> Path:
    """The `plugin` or `injectors` folder. Raises FileNotFoundError naming where it looked."""
    root = checkout_root()
    if root is not None and (root / name).is_dir():
        return root / name
    shipped = resources.files(r2bench) / DATA_SUBDIR / name
    if isinstance(shipped, Path) and shipped.is_dir():
        return shipped
    looked = [str(p) for p in ((root / name) if root else None, shipped) if p is not None]
    raise FileNotFoundError(f"r2bench's {name} folder is missing (looked in {', '.join(looked)})")


def plugin_dir() -> Path:
    """The build recipes shipped with r2bench."""
    return data_dir("plugin")


def injectors_dir() -> Path:
    """The node-side fault scripts shipped with r2bench."""
    return data_dir("injectors")


def source_root() -> Path:
    """A folder whose only r2bench content is the package, for recipes that copy r2bench
    itself to the nodes (`{r2bench}`): the checkout, or else a copy of the installed package
    under the temp folder (never the whole site-packages), named by the package's content."""
    root = checkout_root()
    if root is not None:
        return root
    package = _package_dir()
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        if DATA_SUBDIR not in path.relative_to(package).parts:
            stat = path.stat()
            digest.update(f"{path.relative_to(package)}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    staged = Path(tempfile.gettempdir()) / f"r2bench-source-{os.getuid()}-{digest.hexdigest()[:16]}"
    if not (staged / "r2bench").is_dir():
        scratch = Path(tempfile.mkdtemp(prefix=".r2bench-source-", dir=tempfile.gettempdir()))
        shutil.copytree(package, scratch / "r2bench", ignore=_IGNORED)
        try:
            scratch.rename(staged)
        except OSError:  # another process staged it first
            shutil.rmtree(scratch, ignore_errors=True)
    return staged
