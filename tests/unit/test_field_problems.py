"""One formatter for pydantic's validation errors: a field's path and message, the model as a
whole, and the record store's longer form that also shows the value given."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel, ValidationError, model_validator

from r2bench.config.errors import field_problems
from r2bench.runfolder.runmodel import validation_problems


class _Span(BaseModel):
    low: int
    high: int

    @model_validator(mode="after")
    def _ordered(self) -> _Span:
        if self.low > self.high:
            raise ValueError("low above high")
        return self


class _Spans(BaseModel):
    spans: list[_Span]


def _error(data: object, model: type[BaseModel] = _Span) -> ValidationError:
    with pytest.raises(ValidationError) as caught:
        model.model_validate(data)
    return caught.value


def test_each_refused_field_is_named_by_its_dotted_path_in_pydantic_order() -> None:
    problems = field_problems(_error({"spans": [{"low": 1, "high": 2}, {"low": "x"}]}, _Spans))
    # a missing field's value given is the mapping it is missing from
    assert [(p.where, p.given) for p in problems] == [
        ("spans.1.low", "x"),
        ("spans.1.high", {"low": "x"}),
    ]
    assert problems[0].describe().startswith("spans.1.low: Input should be a valid integer")
    assert problems[1].describe() == "spans.1.high: Field required"


def test_a_problem_of_the_model_as_a_whole_has_an_empty_path_unless_named() -> None:
    [problem] = field_problems(_error({"low": 2, "high": 1}))
    assert problem.describe() == ": Value error, low above high"
    assert problem.describe("(top level)") == "(top level): Value error, low above high"


def test_the_record_store_says_the_file_each_field_and_the_value_given() -> None:
    message = validation_problems(Path("run/spec.json"), _error({"low": "x", "high": "y" * 80}))
    parts = message.split("; ")
    assert len(parts) == 2
    assert parts[0].startswith("run/spec.json: low: Input should be a valid integer")
    assert parts[0].endswith("(got 'x')")
    assert parts[1].endswith(f"(got {repr('y' * 80)[:60]})")  # the value given, cut at 60
