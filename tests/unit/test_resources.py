"""plugin/ and injectors/ are found from a checkout and from an installed wheel alike.

This module holds its pure tests; the same subject's other tests:
tests/integration/test_resources.py (those with real processes).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from r2bench import resources
from r2bench.config.recipe import recipe_dirs
from r2bench.setup.source import package_root
from r2bench.sweep.nodeside import injectors_source
from tests.support import paths

ROOT = paths.REPO


def test_a_checkout_uses_its_top_level_folders() -> None:
    assert resources.checkout_root() == ROOT
    assert resources.plugin_dir() == ROOT / "plugin"
    assert injectors_source() == ROOT / "injectors"
    assert recipe_dirs() == [ROOT / "plugin"]
    assert package_root() == ROOT


def test_an_install_reads_the_packaged_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shipped = tmp_path / "r2bench" / resources.DATA_SUBDIR
    (shipped / "injectors").mkdir(parents=True)
    (shipped / "plugin").mkdir()
    monkeypatch.setattr(resources, "checkout_root", lambda: None)
    monkeypatch.setattr(resources.resources, "files", lambda _pkg: tmp_path / "r2bench")
    assert injectors_source() == shipped / "injectors"
    assert recipe_dirs() == [shipped / "plugin"]
    (shipped / "plugin").rmdir()
    with pytest.raises(FileNotFoundError, match="plugin folder is missing"):
        resources.plugin_dir()


def test_source_root_of_an_install_holds_only_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(resources, "checkout_root", lambda: None)
    staged = resources.source_root()
    assert sorted(p.name for p in staged.iterdir()) == ["r2bench"]
    assert (staged / "r2bench" / "cli.py").is_file()
    assert not list(staged.rglob("__pycache__"))
    assert resources.source_root() == staged  # same content, same folder
