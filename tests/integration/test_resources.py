"""plugin/ and injectors/ are found from a checkout and from an installed wheel alike.

This module holds those with real processes; the same subject's other tests:
tests/unit/test_resources.py (its pure tests).
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.support import paths

ROOT = paths.REPO


@pytest.mark.slow
def test_the_wheel_carries_plugin_and_injectors(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(ROOT), "-w", str(tmp_path), "--no-deps", "-q"],
        check=True,
        capture_output=True,
    )
    [wheel] = tmp_path.glob("r2bench-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for folder in ("plugin", "injectors"):
        for path in (ROOT / folder).rglob("*"):
            if path.is_file():
                assert f"r2bench/_data/{folder}/{path.relative_to(ROOT / folder)}" in names
