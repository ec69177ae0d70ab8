"""Turn pydantic validation errors into located, actionable ConfigIssues."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from r2bench.config.errors import ConfigError, ConfigIssue, FieldPath, did_you_mean
from r2bench.config.source import SourceDoc

M = TypeVar("M", bound=BaseModel)

_EXPECTED = {
    "int_type": "an integer",
    "int_parsing": "an integer",
    "float_type": "a number",
    "float_parsing": "a number",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "string_type": "a string",
    "list_type": "a list",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
}


def validate_model(model: type[M], doc: SourceDoc, path: FieldPath = ()) -> M:
    """Validate `doc.data` (or the part of it at `path`) as `model`; errors point into the file."""
    data: Any = doc.data
    for part in path:
        data = data[part]
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        errors = _drop_losing_union_branches(exc.errors(), data)
        raise ConfigError([_issue(model, doc, path, err, data) for err in errors]) from None


_SHAPE_ERRORS = {"list_type", "dict_type", "model_type", "model_attributes_type"}


def _drop_losing_union_branches(errors: list[Any], data: Any) -> list[Any]:
    """For `A | list[B]` fields pydantic reports every branch; keep the branch whose shape
    matched the input (the one with errors deeper inside it) and drop "expected a list"."""
    located = [(_clean_loc(err["loc"], data, err["type"] == "missing"), err) for err in errors]
    substantive = [path for path, err in located if err["type"] not in _SHAPE_ERRORS]
    return [
        err
        for path, err in located
        if err["type"] not in _SHAPE_ERRORS
        or not any(other[: len(path)] == path for other in substantive)
    ]


def _issue(
    model: type[BaseModel], doc: SourceDoc, base: FieldPath, err: Any, data: Any
) -> ConfigIssue:
    loc = _clean_loc(err["loc"], data, err["type"] == "missing")
    path = (*base, *loc)
    kind = err["type"]
    found = _describe(err.get("input"))
    if kind == "extra_forbidden" and path:
        return doc.issue(path, f"unknown key '{path[-1]}'", _suggest(model, loc), at_key=True)
    if kind == "missing":
        return doc.issue(path, "required field is missing", f"add `{path[-1]}:`", at_key=False)
    if kind in ("too_short", "too_long"):
        limit = err.get("ctx", {}).get("min_length" if kind == "too_short" else "max_length")
        bound = "at least" if kind == "too_short" else "at most"
        return doc.issue(
            path, f"needs {bound} {limit} item(s), found {err.get('ctx', {}).get('actual_length')}"
        )
    if kind.startswith("float") and type(err.get("input")) is int:
        digits = len(str(abs(err["input"])))
        return doc.issue(path, f"number too large ({digits} digits)")
    if kind in _EXPECTED:
        return doc.issue(path, f"expected {_EXPECTED[kind]}, found {found}")
    if kind == "enum" or kind == "literal_error":
        allowed = err.get("ctx", {}).get("expected", "")
        return doc.issue(path, f"expected one of {allowed}, found {found}")
    if kind == "string_pattern_mismatch":
        return doc.issue(
            path,
            f"invalid value {found}",
            "use letters, digits and _ . - only (no spaces or shell characters)",
        )
    message = err["msg"].removeprefix("Value error, ")
    at_key = err["loc"][-1:] == ("[key]",)  # a mapping's key refused: point at the key
    if "found" in message or isinstance(err.get("input"), dict | list):
        return doc.issue(path, message, at_key=at_key)
    return doc.issue(path, f"{message}; found {found}", at_key=at_key)


def _clean_loc(loc: tuple[Any, ...], data: Any, missing: bool = False) -> FieldPath:
    """Keep the parts of a pydantic location that exist in the data (union and validator
    tags such as `function-after[...]` do not); a missing final key is kept (for `missing`)."""
    clean: list[str | int] = []
    for index, part in enumerate(loc):
        if (isinstance(data, dict) and part in data) or (
            isinstance(data, list) and isinstance(part, int) and 0 <= part < len(data)
        ):
            data = data[part]
        elif missing and index == len(loc) - 1 and isinstance(data, dict):
            pass  # a required key that is absent
        else:
            continue
        clean.append(part)
    return tuple(clean)


def _describe(value: Any) -> str:
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if value is None:
        return "nothing (null)"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _suggest(model: type[BaseModel], loc: FieldPath) -> str:
    """'did you mean ...' for a misspelt key, by walking the model to the enclosing mapping."""
    fields = _fields_at(model, loc[:-1])
    if not fields:
        return "remove it"
    return did_you_mean(str(loc[-1]), fields, "known keys: " + ", ".join(sorted(fields)))


def _fields_at(model: type[BaseModel], loc: FieldPath) -> list[str]:
    current: Any = model
    for part in loc:
        if isinstance(part, int):
            continue
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            return []
        field = current.model_fields.get(str(part))
        if field is None:
            return []
        current = _model_in(field.annotation)
    if isinstance(current, type) and issubclass(current, BaseModel):
        return list(current.model_fields)
    return []


def _model_in(annotation: Any) -> Any:
    """The BaseModel inside Optional[...] / list[...] / dict[..., ...] annotations, if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        found = _model_in(arg)
        if found is not None:
            return found
    return None
