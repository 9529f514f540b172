"""The Actions context: GITHUB_* variables, the event file and INPUT_* values, read once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gate.core.environment import Environment
from gate.core.errors import DataError, UsageError
from gate.github.context import build_context, input_variable, read_inputs


def _env(tmp_path: Path, **variables: str) -> Environment:
    event = tmp_path / "event.json"
    if not event.exists():
        event.write_text(
            json.dumps(
                {
                    "pull_request": {
                        "number": 3,
                        "head": {"sha": "h", "ref": "f"},
                        "base": {"sha": "b", "ref": "main"},
                    }
                }
            )
        )
    base = {
        "GITHUB_REPOSITORY": "acme/rag",
        "GITHUB_EVENT_NAME": "pull_request",
        "GITHUB_EVENT_PATH": str(event),
        "GITHUB_WORKSPACE": str(tmp_path),
    }
    return Environment(variables={**base, **variables}, cwd=tmp_path)


def test_input_variables_keep_hyphens() -> None:
    assert input_variable("github-token") == "INPUT_GITHUB-TOKEN"
    assert input_variable("fail-on") == "INPUT_FAIL-ON"


def test_defaults_when_inputs_are_absent_or_empty(tmp_path: Path) -> None:
    inputs = read_inputs(_env(tmp_path, **{"INPUT_FAIL-ON": "", "INPUT_CONFIG": "  "}))
    assert (inputs.config, inputs.mode, inputs.baseline_artifact, inputs.check_name) == (
        "ragproof.yaml",
        "auto",
        "ragproof-run",
        "ragproof",
    )
    assert inputs.fail_on is None and inputs.comment is True and inputs.allow_mixed_judges is False


def test_inputs_are_parsed_and_typed(tmp_path: Path) -> None:
    env = _env(
        tmp_path,
        **{
            "INPUT_PR-NUMBER": "12",
            "INPUT_COMMENT": "False",
            "INPUT_ALLOW-MIXED-JUDGES": "TRUE",
            "INPUT_FAIL-ON": "review",
            "INPUT_CHECK-NAME": "ragproof judge",
            "INPUT_GITHUB-TOKEN": "ghs_x",
            "GITHUB_API_URL": "https://ghe.example/api/v3/",
            "GITHUB_WORKFLOW_REF": "acme/rag/.github/workflows/gate.yml@refs/pull/3/merge",
            "GITHUB_RUN_ID": "77",
        },
    )
    ctx = build_context(env)
    assert (ctx.inputs.pr_number, ctx.inputs.comment, ctx.inputs.allow_mixed_judges) == (12, False, True)
    assert ctx.inputs.fail_on == "review" and ctx.inputs.check_name == "ragproof judge"
    assert ctx.api_url == "https://ghe.example/api/v3"  # GitHub Enterprise
    assert ctx.workflow_file == "gate.yml"
    assert ctx.run_url == "https://github.com/acme/rag/actions/runs/77"
    assert ctx.token is not None and ctx.token.get_secret_value() == "ghs_x"
    assert "ghs_x" not in repr(ctx)
    assert ctx.event.pull_request is not None and ctx.event.pull_request.head.sha == "h"
    assert (ctx.owner, ctx.repo) == ("acme", "rag")


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        (
            "INPUT_FAIL-ON",
            "sometimes",
            "input fail-on (INPUT_FAIL-ON): Input should be 'block', 'review' or 'never'",
        ),
        ("INPUT_COMMENT", "maybe", "input comment (INPUT_COMMENT): expected true or false, got 'maybe'"),
        ("INPUT_PR-NUMBER", "seven", "input pr-number (INPUT_PR-NUMBER): Input should be a valid integer"),
        ("INPUT_CHECK-NAME", "x --> <b>", "input check-name (INPUT_CHECK-NAME): expected letters, digits"),
        ("INPUT_MODE", "deploy", "input mode (INPUT_MODE): Input should be 'auto', 'run' or 'compare'"),
    ],
)
def test_bad_inputs_name_the_input(tmp_path: Path, variable: str, value: str, message: str) -> None:
    with pytest.raises(UsageError) as info:
        build_context(_env(tmp_path, **{variable: value}))
    assert str(info.value).startswith(message)


def test_missing_job_variables_and_bad_event_files(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="GITHUB_REPOSITORY: expected owner/name"):
        build_context(_env(tmp_path, GITHUB_REPOSITORY=""))
    (tmp_path / "event.json").write_text("{not json")
    with pytest.raises(DataError, match=r"event.json:1: event file is not valid JSON"):
        build_context(_env(tmp_path))
    (tmp_path / "event.json").write_text(json.dumps({"pull_request": {"number": "x"}}))
    with pytest.raises(
        DataError, match=r"event payload: pull_request.number: Input should be a valid integer"
    ):
        build_context(_env(tmp_path))
    with pytest.raises(UsageError, match="cannot read the event file"):
        build_context(_env(tmp_path, GITHUB_EVENT_PATH=str(tmp_path / "missing.json")))
