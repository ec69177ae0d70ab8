"""Find and load the recipes in `plugin/`."""

from __future__ import annotations

from pathlib import Path

from r2bench.config.recipe import Recipe, recipe_dirs
from r2bench.config.source import load_yaml
from r2bench.config.validate import validate_model


def load_recipes(search_dirs: list[Path] | None = None) -> dict[str, Recipe]:
    """Every `*.yaml` recipe in the first existing plugin folder, by recipe name.

    A malformed recipe raises ConfigError naming its file and line like any other config. Each
    recipe remembers its folder: its patches are read from `<folder>/patches/`.
    """
    for directory in search_dirs or recipe_dirs():
        if directory.is_dir():
            recipes = [
                validate_model(Recipe, load_yaml(path)).with_folder(directory)
                for path in sorted(directory.glob("*.yaml"))
            ]
            return {recipe.name: recipe for recipe in recipes}
    return {}
