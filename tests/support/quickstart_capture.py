"""The captured quickstart sweep (tests/data/quickstart-sweep/), copied where tests may write.

Its eight run folders are what one `r2bench sweep experiments/quickstart.yaml` wrote (the
README there says how): stock NCCL crashed under node1's nic1 going down, R-2CCL modes 0, 1
and 2 survived it, every fault-free run ended ok. Tables and reports are built in the copy.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.support import paths

CAPTURE = paths.DATA / "quickstart-sweep"


def copy_quickstart(where: Path) -> Path:
    """Copy the captured run folders to `where/quickstart` (not the README) and return it."""
    sweep = where / "quickstart"
    sweep.mkdir(parents=True)
    for run in sorted(CAPTURE.iterdir()):
        if run.is_dir():
            shutil.copytree(run, sweep / run.name)
    return sweep
