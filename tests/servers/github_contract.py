"""GitHub's REST API contract for the tests: the operations the action uses, from GitHub's
official OpenAPI description (tests/data/github/openapi.json, see its README).

The GitHub API test server checks every request it receives and every response it sends
against this contract (a shared fixture in conftest.py fails the test on any mismatch), so the
action's tests cannot drift from the real API:

- a request must match an operation: its method and path template, only declared query
  parameters (each once, valid against its schema and limits, e.g. ``per_page`` at most 100),
  path parameters valid against theirs, and a JSON body valid against the request body schema;
- a response with a status the operation declares must validate against that response's
  schema (an undeclared error status, e.g. an injected 429, is allowed: any call can get one).

OpenAPI 3.0 schemas are JSON Schema with ``nullable``; they are read as JSON Schema 2020-12
with ``nullable: true`` turned into "or null".
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from jsonschema import Draft202012Validator

SPEC_PATH = Path(__file__).resolve().parents[1] / "data" / "github" / "openapi.json"


@functools.cache
def spec() -> dict[str, Any]:
    return cast("dict[str, Any]", json.loads(SPEC_PATH.read_text()))


def _json_schema(value: Any) -> Any:
    """OpenAPI 3.0 schema -> JSON Schema: ``nullable: true`` becomes ``anyOf [..., null]``."""
    if isinstance(value, list):
        return [_json_schema(v) for v in value]
    if not isinstance(value, dict):
        return value
    out = {
        key: (
            {name: _json_schema(s) for name, s in item.items()} if key == "properties" else _json_schema(item)
        )
        for key, item in value.items()
        if key not in ("nullable", "example", "examples", "x-github")
    }
    if value.get("nullable") is True:
        return {"anyOf": [out, {"type": "null"}]}
    return out


@functools.cache
def _components() -> dict[str, Any]:
    return {"schemas": _json_schema(spec()["components"].get("schemas", {}))}


@functools.cache
def _validator(schema_json: str) -> Draft202012Validator:
    schema = {"components": _components(), "allOf": [_json_schema(json.loads(schema_json))]}
    return Draft202012Validator(schema)


def schema_errors(schema: dict[str, Any], instance: Any, where: str) -> list[str]:
    """Every way ``instance`` breaks ``schema`` (an OpenAPI schema), as one line each."""
    validator = _validator(json.dumps(schema, sort_keys=True))
    lines = []
    for error in sorted(validator.iter_errors(instance), key=lambda e: list(map(str, e.absolute_path))):
        message = error.message
        if len(message) > 300:  # the message quotes the whole value: name the rule instead
            message = f"breaks {error.validator}: {json.dumps(error.validator_value)[:200]}"
        lines.append(f"{where}: {'/'.join(map(str, error.absolute_path)) or '(root)'}: {message}")
    return lines


def _resolve(value: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in value:
        _, _, kind, name = value["$ref"].split("/", 3)
        value = spec()["components"][kind][name]
    return value


@dataclass(frozen=True)
class Operation:
    operation_id: str
    method: str
    template: str
    pattern: re.Pattern[str]
    raw: dict[str, Any]

    def parameters(self, where: str) -> dict[str, dict[str, Any]]:
        found = {}
        for parameter in self.raw.get("parameters", []):
            resolved = _resolve(parameter)
            if resolved["in"] == where:
                found[resolved["name"]] = resolved
        return found

    def response_schema(self, status: int) -> tuple[bool, dict[str, Any] | None]:
        """(declared, JSON schema of the body or None)."""
        response = self.raw["responses"].get(str(status))
        if response is None:
            return False, None
        content = _resolve(response).get("content", {})
        media = content.get("application/json") or next(iter(content.values()), None)
        return True, (media or {}).get("schema")


def _pattern(template: str) -> re.Pattern[str]:
    parts = re.split(r"(\{[^}]+\})", template)
    regex = "".join(
        f"(?P<{part[1:-1]}>[^/]+?)" if part.startswith("{") else re.escape(part) for part in parts if part
    )
    return re.compile(regex + "$")


@functools.cache
def operations() -> tuple[Operation, ...]:
    found = []
    for template, item in spec()["paths"].items():
        for method, raw in item.items():
            found.append(Operation(raw["operationId"], method.upper(), template, _pattern(template), raw))
    return tuple(found)


def match(method: str, path: str) -> tuple[Operation, dict[str, str]] | None:
    """The operation serving ``method path`` and its path parameters, or None."""
    for operation in operations():
        if operation.method == method:
            hit = operation.pattern.match(path)
            if hit:
                return operation, hit.groupdict()
    return None


def _typed(raw: str, schema: dict[str, Any]) -> Any:
    """A query or path value (always text on the wire) as the type its schema declares."""
    kind = schema.get("type")
    try:
        if kind == "integer":
            return int(raw)
        if kind == "number":
            return float(raw)
    except ValueError:
        return raw
    if kind == "boolean":
        return {"true": True, "false": False}.get(raw, raw)
    return raw


def request_errors(method: str, path: str, query: dict[str, list[str]], body: Any) -> list[str]:
    """Every way a request breaks the contract (empty: it matches an operation exactly)."""
    found = match(method, path)
    if found is None:
        return [f"{method} {path}: no operation of the GitHub API (tests/data/github/openapi.json) matches"]
    operation, path_values = found
    where = f"{method} {operation.template} ({operation.operation_id})"
    errors: list[str] = []
    path_parameters = operation.parameters("path")
    for name, value in path_values.items():
        schema = path_parameters.get(name, {}).get("schema", {})
        errors += schema_errors(schema, _typed(value, schema), f"{where}: path parameter {name}={value!r}")
    declared = operation.parameters("query")
    for name, values in query.items():
        if name not in declared:
            errors.append(f"{where}: query parameter {name!r} is not declared (declared: {sorted(declared)})")
            continue
        schema = declared[name].get("schema", {})
        if len(values) > 1 and schema.get("type") != "array":
            errors.append(f"{where}: query parameter {name!r} given {len(values)} times")
        for value in values:
            errors += schema_errors(
                schema, _typed(value, schema), f"{where}: query parameter {name}={value!r}"
            )
    request_body = operation.raw.get("requestBody")
    if request_body is None:
        if body is not None:
            errors.append(f"{where}: the operation takes no request body")
    else:
        schema = _resolve(request_body).get("content", {}).get("application/json", {}).get("schema")
        if body is None and request_body.get("required"):
            errors.append(f"{where}: the request body is required")
        elif schema is not None and body is not None:
            errors += schema_errors(schema, body, f"{where}: request body")
    return errors


def response_errors(method: str, path: str, status: int, body: Any) -> list[str]:
    """Every way a response breaks the declared response schema of its operation."""
    found = match(method, path)
    if found is None:
        return []  # the request was already reported
    operation, _ = found
    declared, schema = operation.response_schema(status)
    where = f"{method} {operation.template} ({operation.operation_id}) -> {status}"
    if not declared:
        if status < 400:
            return [f"{where}: status {status} is not a declared response"]
        return []
    if schema is None:
        return []
    return schema_errors(schema, body, f"{where}: response body")


def example(name: str) -> Any:
    """A copy of GitHub's example ``components.examples[name].value``."""
    return json.loads(json.dumps(spec()["components"]["examples"][name]["value"]))
