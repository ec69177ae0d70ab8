"""Where the captured nccl-tests outputs live, and a copy of one capture set for imports."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.support import paths

DATA = paths.DATA / "nccl-tests"
RELEASES = ("v2.13.13", "v2.18.5", "v2.19.6")  # one folder each (see its README)


def top_level_copy(target: Path) -> Path:
    """The first capture set (nccl-tests 2.19.6 over mpirun, the files at the top of DATA),
    copied without the per-release folders, so an import sees just these."""
    target.mkdir(parents=True, exist_ok=True)
    for path in DATA.iterdir():
        if path.is_file():
            shutil.copy2(path, target / path.name)
    return target
