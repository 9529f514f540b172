"""The GitHub Actions context of one ``ragproof action`` step, built once from the Environment.

The runner describes the job in ``GITHUB_*`` variables and passes each input of action.yml as
``INPUT_`` + the input name upper-cased with hyphens kept (``github-token`` ->
``INPUT_GITHUB-TOKEN``). The event that started the workflow is a JSON file named by
``GITHUB_EVENT_PATH``. Everything here is parsed and validated up front so later stages
receive typed values and a bad value is one clear line naming the variable or input.

An empty input is the same as an absent one (the runner sets every declared input, using
``""`` where the workflow gives none and action.yml has no default).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator

from gate.core.environment import Environment
from gate.core.errors import DataError, UsageError, pydantic_message, validated
from gate.core.network import NetworkSettings
from gate.core.strict import StrictModel
from gate.github.models import EventPayload
from gate.model.config import FailOn, JudgeProvider

DEFAULT_API_URL = "https://api.github.com"
DEFAULT_SERVER_URL = "https://github.com"

_CHECK_NAME = re.compile(r"[\w .:/=-]{1,100}")
_TRUE = {"true", "yes", "1", "on"}
_FALSE = {"false", "no", "0", "off"}


def input_variable(name: str) -> str:
    """The variable the runner uses for input ``name`` (``fail-on`` -> ``INPUT_FAIL-ON``)."""
    return "INPUT_" + name.replace(" ", "_").upper()


class ActionInputs(StrictModel):
    """The inputs of action.yml (see there for their documentation)."""

    config: str = "ragproof.yaml"
    mode: Literal["auto", "run", "compare"] = "auto"
    candidate: str | None = None
    baseline_artifact: str = "ragproof-run"
    baseline_workflow: str | None = None
    pr_number: int | None = Field(default=None, ge=1)
    comment: bool = True
    check_name: str = "ragproof"
    fail_on: FailOn | None = None  # None: the config's gate.fail_on
    out: str = ".ragproof/run"
    allow_mixed_judges: bool = False
    install: str | None = None
    # -- trust (docs/action.md "Security model") --
    review_conclusion: Literal["action_required", "failure", "neutral"] = "action_required"
    accept_label: str = "ragproof:accept"
    comment_author: str = "github-actions[bot]"  # the token's identity: whose comment is ours
    allow_pull_request_target: bool = False
    candidate_workflow: str | None = None  # workflow_run: the PR workflow's path (default: the baseline's)
    store_dir: str | None = None  # a directory the workflow restored (judge cache); else a fresh one
    judge_provider: JudgeProvider | None = None
    judge_model: str | None = None
    judge_base_url: str | None = None
    judge_api_key_env: str | None = None

    @field_validator("check_name")
    @classmethod
    def _check_name_plain(cls, value: str) -> str:
        # The name goes into the hidden HTML comment marker of the sticky comment.
        if not _CHECK_NAME.fullmatch(value) or "--" in value:
            raise ValueError(
                "expected letters, digits, spaces and . : / = - (no '--'), at most 100 characters"
            )
        return value


# input name in action.yml -> field of ActionInputs
INPUT_FIELDS = {name.replace("_", "-"): name for name in ActionInputs.model_fields}


def _parse_bool(name: str, raw: str) -> bool:
    text = raw.strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise UsageError(f"input {name} ({input_variable(name)}): expected true or false, got {raw!r}")


def read_inputs(env: Environment) -> ActionInputs:
    """Collect the ``INPUT_*`` values of the declared inputs (empty = not given)."""
    data: dict[str, object] = {}
    for name, field_name in INPUT_FIELDS.items():
        raw = env.get(input_variable(name))
        if raw is None or raw.strip() == "":
            continue
        annotation = ActionInputs.model_fields[field_name].annotation
        data[field_name] = _parse_bool(name, raw) if annotation is bool else raw.strip()
    try:
        return ActionInputs.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        field_name = str(first["loc"][0]) if first.get("loc") else ""
        name = field_name.replace("_", "-")
        detail = pydantic_message(exc).split(": ", 1)[-1].removeprefix("Value error, ")
        raise UsageError(f"input {name} ({input_variable(name)}): {detail}") from None


class GitHubContext(BaseModel):
    """Everything the action knows about the job before calling the API."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    event_name: str
    event_path: Path | None
    event: EventPayload
    repository: str  # "owner/name"
    api_url: str
    server_url: str
    sha: str | None
    ref: str | None
    run_id: str | None
    run_attempt: str | None
    workflow_ref: str | None  # "owner/name/.github/workflows/gate.yml@refs/heads/main"
    workspace: Path
    output_path: Path | None
    summary_path: Path | None
    inputs: ActionInputs
    token: SecretStr | None
    network: NetworkSettings = NetworkSettings()  # proxies and CA bundle of the step

    @property
    def owner(self) -> str:
        return self.repository.split("/", 1)[0]

    @property
    def repo(self) -> str:
        return self.repository.split("/", 1)[1]

    @property
    def workflow_file(self) -> str | None:
        """The file name of the running workflow (``gate.yml``), from ``GITHUB_WORKFLOW_REF``."""
        if not self.workflow_ref:
            return None
        path = self.workflow_ref.split("@", 1)[0]
        return path.rsplit("/", 1)[-1] or None

    @property
    def run_url(self) -> str | None:
        if not self.run_id:
            return None
        return f"{self.server_url}/{self.repository}/actions/runs/{self.run_id}"

    def workspace_path(self, relative: str) -> Path:
        """A path from an input, resolved against the workspace."""
        path = Path(relative)
        return path if path.is_absolute() else self.workspace / path


def _read_event(path: Path) -> EventPayload:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"{path}: cannot read the event file (GITHUB_EVENT_PATH): {exc.strerror}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}:{exc.lineno}: event file is not valid JSON: {exc.msg}") from None
    if not isinstance(data, dict):
        raise DataError(f"{path}: event file: expected a JSON object")
    return validated(EventPayload, data, f"{path}: event payload")


def build_context(env: Environment) -> GitHubContext:
    """Read the job's ``GITHUB_*`` variables, the event file and the inputs, once."""
    inputs = read_inputs(env)

    def var(name: str) -> str | None:
        value = env.get(name)
        return value if value not in (None, "") else None

    repository = var("GITHUB_REPOSITORY")
    if repository is None or repository.count("/") != 1 or "" in repository.split("/"):
        raise UsageError(
            "GITHUB_REPOSITORY: expected owner/name (ragproof action runs as a step of a GitHub Actions job)"
        )
    event_name = var("GITHUB_EVENT_NAME")
    if event_name is None:
        raise UsageError(
            "GITHUB_EVENT_NAME is not set (ragproof action runs as a step of a GitHub Actions job)"
        )
    event_path_raw = var("GITHUB_EVENT_PATH")
    event_path = Path(event_path_raw) if event_path_raw else None
    event = _read_event(event_path) if event_path else EventPayload()

    workspace = Path(var("GITHUB_WORKSPACE") or env.cwd)
    output = var("GITHUB_OUTPUT")
    summary = var("GITHUB_STEP_SUMMARY")
    token = var(input_variable("github-token")) or var("GITHUB_TOKEN")
    return GitHubContext(
        event_name=event_name,
        event_path=event_path,
        event=event,
        repository=repository,
        api_url=(var("GITHUB_API_URL") or DEFAULT_API_URL).rstrip("/"),
        server_url=(var("GITHUB_SERVER_URL") or DEFAULT_SERVER_URL).rstrip("/"),
        sha=var("GITHUB_SHA"),
        ref=var("GITHUB_REF"),
        run_id=var("GITHUB_RUN_ID"),
        run_attempt=var("GITHUB_RUN_ATTEMPT"),
        workflow_ref=var("GITHUB_WORKFLOW_REF"),
        workspace=workspace,
        output_path=Path(output) if output else None,
        summary_path=Path(summary) if summary else None,
        inputs=inputs,
        token=SecretStr(token) if token else None,
        network=NetworkSettings.from_variables(env.variables),
    )
