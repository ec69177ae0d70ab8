"""JSON Schemas of the config files, for editors (yaml-language-server, VS Code...)."""

from __future__ import annotations

from typing import Any

from r2bench.config.experiment import Experiment
from r2bench.config.recipe import Recipe
from r2bench.config.testbed import Testbed


def all_schemas() -> dict[str, dict[str, Any]]:
    """Schema per file kind, keyed testbed / experiment / recipe."""
    schemas = {}
    for name, model in (("testbed", Testbed), ("experiment", Experiment), ("recipe", Recipe)):
        schema = model.model_json_schema()
        schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
        schema["title"] = f"r2bench {name} file"
        schemas[name] = schema
    return schemas
