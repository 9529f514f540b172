"""Error helpers: one-line messages that name the file, line and field."""

from __future__ import annotations

import json

import pytest
import yaml
from pydantic import BaseModel, ConfigDict

from gate.core.errors import DataError, UsageError, json_problem, validated, yaml_problem


class _Point(BaseModel):
    model_config = ConfigDict(extra="forbid")

    x: int
    y: int = 0


def test_validated_names_where_and_the_field() -> None:
    assert validated(_Point, {"x": 1}, "p.json") == _Point(x=1)
    with pytest.raises(DataError, match=r"^p.json:3: x: Input should be a valid integer"):
        validated(_Point, {"x": "one"}, "p.json:3")
    with pytest.raises(UsageError, match=r"^cfg.yaml: z: unknown key$"):
        validated(_Point, {"x": 1, "z": 1}, "cfg.yaml", UsageError)


def test_json_problem_gives_the_column_of_a_line_and_the_line_of_a_document() -> None:
    with pytest.raises(json.JSONDecodeError) as one_line:
        json.loads('{"a": }')
    assert json_problem(one_line.value) == "malformed JSON (Expecting value at column 7)"
    with pytest.raises(json.JSONDecodeError) as document:
        json.loads('{\n  "a": 1,\n  "b"\n}')
    assert json_problem(document.value) == "malformed JSON (Expecting ':' delimiter at line 4 column 1)"


def test_yaml_problem_names_the_line() -> None:
    with pytest.raises(yaml.YAMLError) as parse_error:
        yaml.safe_load("a: 1\nb: [unclosed\n")
    where, problem = yaml_problem("ragproof.yaml", parse_error.value)
    assert where == "ragproof.yaml:3"
    assert problem == "expected ',' or ']', but got '<stream end>'"
    assert yaml_problem("x.yaml", yaml.YAMLError("no mark")) == ("x.yaml", "invalid YAML")
