#!/usr/bin/env python3
"""Refresh tests/data/github/ from GitHub's official descriptions, published on npm:

- ``@octokit/webhooks-examples``: example webhook payloads (``api.github.com/index.json``);
- ``@octokit/openapi``: GitHub's REST API OpenAPI description (``generated/api.github.com.json``).

Usage (both packages unpacked with ``npm pack NAME && tar -xzf NAME-VERSION.tgz``)::

    python scripts/vendor-github-data.py --webhooks DIR --openapi DIR

Only what the action's tests need is kept: the payload examples listed in EXAMPLES, and the
operations in OPERATIONS with every component they reference (schemas, parameters, responses,
headers, examples), so the file stays small. Two changes, both mechanical:

- ``description`` texts are dropped (they are most of the bytes), after a limit that GitHub
  states only in a parameter's description ("(max 100)") is turned into ``maximum``;
- nothing else is edited: schemas, ``required`` lists and examples are GitHub's.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parents[1] / "tests" / "data" / "github"

# event, action (None: the event has none), which example of that action (0 = the first)
EXAMPLES: list[tuple[str, str | None, int]] = [
    ("pull_request", "opened", 0),
    ("pull_request", "synchronize", 0),
    ("pull_request", "reopened", 0),
    ("pull_request", "labeled", 0),
    ("push", None, 4),  # the first example that pushes a branch (refs/heads/master)
    ("workflow_dispatch", None, 0),
    ("workflow_run", "completed", 2),  # the one whose run lists a pull request
]

# operationId -> the ghapi name the action calls it by (gate/github/); download-artifact is
# requested directly (the redirect is followed by hand).
OPERATIONS = {
    "repos/get": "repos.get",
    "repos/compare-commits": "repos.compare_commits",
    "actions/list-workflow-runs": "actions.list_workflow_runs",
    "actions/list-workflow-run-artifacts": "actions.list_workflow_run_artifacts",
    "actions/download-artifact": "download_artifact",
    "pulls/get": "pulls.get",
    "pulls/list": "pulls.list",
    "issues/list-comments": "issues.list_comments",
    "issues/create-comment": "issues.create_comment",
    "issues/update-comment": "issues.update_comment",
    "checks/create": "checks.create",
    # who applied the accept label, and with which permission (gate/github/accept.py)
    "issues/list-events": "issues.list_events",
    "repos/get-collaborator-permission-level": "repos.get_collaborator_permission_level",
    # the record of an acceptance, read from ragproof's own check runs on the commit
    "checks/list-for-ref": "checks.list_for_ref",
}
METHODS = {"get", "put", "post", "patch", "delete", "head", "options"}
_MAX_IN_TEXT = re.compile(r"\(max (\d+)\)")


def _file_name(event: str, action: str | None) -> str:
    return f"{event}.{action}.json" if action else f"{event}.json"


def vendor_examples(package: Path) -> dict[str, str]:
    index = json.loads((package / "api.github.com" / "index.json").read_text())
    events = {entry["name"]: entry for entry in index}
    written: dict[str, str] = {}
    for event, action, nth in EXAMPLES:
        examples = [e for e in events[event]["examples"] if e.get("action") == action]
        name = _file_name(event, action)
        (OUT / "webhooks" / name).write_text(json.dumps(examples[nth], indent=2) + "\n")
        written[name] = (
            f"{event}" + (f" {action}" if action else "") + f", example {nth + 1} of {len(examples)}"
        )
    return written


def _refs(value: Any) -> set[str]:
    found: set[str] = set()
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "$ref" and isinstance(item, str):
                found.add(item)
            else:
                found |= _refs(item)
    elif isinstance(value, list):
        for item in value:
            found |= _refs(item)
    return found


VERBATIM = {"examples", "example", "default", "enum", "value"}  # data, not description


def _lean(value: Any, *, in_properties: bool = False) -> Any:
    """``value`` without description texts (a property *named* description, and examples, kept)."""
    if isinstance(value, dict):
        if in_properties:
            return {key: _lean(item) for key, item in value.items()}
        out = {}
        for key, item in value.items():
            if key == "description" and isinstance(item, str):
                continue
            out[key] = item if key in VERBATIM else _lean(item, in_properties=key == "properties")
        return out
    if isinstance(value, list):
        return [_lean(item) for item in value]
    return value


def _with_stated_limits(parameter: dict[str, Any]) -> dict[str, Any]:
    match = _MAX_IN_TEXT.search(parameter.get("description", ""))
    schema = parameter.get("schema")
    if match and isinstance(schema, dict) and schema.get("type") == "integer" and "maximum" not in schema:
        parameter = {**parameter, "schema": {**schema, "maximum": int(match[1])}}
    return parameter


def vendor_openapi(package: Path) -> tuple[str, int]:
    spec = json.loads((package / "generated" / "api.github.com.json").read_text())
    paths: dict[str, dict[str, Any]] = {}
    for path, item in spec["paths"].items():
        for method, operation in item.items():
            if method in METHODS and operation.get("operationId") in OPERATIONS:
                operation = {**operation, "x-ragproof-call": OPERATIONS[operation["operationId"]]}
                operation["parameters"] = [
                    _with_stated_limits(p) if "$ref" not in p else p for p in operation.get("parameters", [])
                ]
                paths.setdefault(path, {})[method] = operation
    found = {op["operationId"] for item in paths.values() for op in item.values()}
    missing = set(OPERATIONS) - found
    if missing:
        raise SystemExit(f"operations not in the description: {sorted(missing)}")
    components: dict[str, dict[str, Any]] = {}
    todo = sorted(_refs(paths))
    while todo:
        ref = todo.pop()
        _, _, kind, name = ref.split("/", 3)
        if name in components.get(kind, {}):
            continue
        value = spec["components"][kind][name]
        if kind == "parameters":
            value = _with_stated_limits(value)
        components.setdefault(kind, {})[name] = value
        todo += sorted(_refs(value))
    subset = {
        "openapi": spec["openapi"],
        "info": {"title": spec["info"]["title"], "version": spec["info"]["version"]},
        "servers": spec.get("servers", []),
        "paths": paths,
        "components": {kind: dict(sorted(items.items())) for kind, items in sorted(components.items())},
    }
    text = json.dumps(_lean(subset), separators=(",", ":")) + "\n"
    (OUT / "openapi.json").write_text(text)
    return spec["info"]["version"], len(text)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--webhooks", type=Path, required=True, help="unpacked @octokit/webhooks-examples")
    parser.add_argument("--openapi", type=Path, required=True, help="unpacked @octokit/openapi")
    args = parser.parse_args()
    (OUT / "webhooks").mkdir(parents=True, exist_ok=True)
    for name, text in vendor_examples(args.webhooks).items():
        print(f"webhooks/{name}: {text}")
    version, size = vendor_openapi(args.openapi)
    versions = {
        "webhooks": json.loads((args.webhooks / "package.json").read_text())["version"],
        "openapi": json.loads((args.openapi / "package.json").read_text())["version"],
    }
    print(f"openapi.json: {len(OPERATIONS)} operations of the API description {version}, {size} bytes")
    print(f"package versions: {versions}")


if __name__ == "__main__":
    main()
