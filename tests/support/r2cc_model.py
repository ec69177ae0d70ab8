"""What the tiers of test_r2cc_model.py share (tests/unit, tests/integration, tests/system)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from r2bench.analysis.importer import import_dir

if TYPE_CHECKING:
    from r2bench.tables.build import Tables

# --------------------------------------------------------------------------- on the imported logs


def imported_tables(folder: Path, results: Path) -> Tables:
    pytest.importorskip("pandas")
    from r2bench.tables.build import build_tables

    return build_tables(import_dir(folder, results, "r7525").sweep_dir)
