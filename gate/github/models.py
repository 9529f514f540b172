"""pydantic models of the GitHub objects the action reads (event payloads and REST responses).

Only the fields the action uses are declared; everything else GitHub sends is ignored, so a
new field upstream never breaks parsing. A field is required only where the action cannot work
without it; everything else is optional, because GitHub sends shorter objects in places:
``pull_requests`` of a workflow run (webhook and REST) names repositories as ``{id, url,
name}`` only, a deleted fork's ``head.repo`` is null, a ghost user is null, and a run's
``pull_requests`` may be null. A missing required field is a clear error naming it. The tests
parse GitHub's own example payloads and responses (tests/data/github/).
"""

from __future__ import annotations

from datetime import datetime
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from gate.core.errors import DataError, pydantic_message


class _GitHubModel(BaseModel):
    model_config = ConfigDict(extra="ignore")


Model = TypeVar("Model", bound=BaseModel)


def parse_response(model: type[Model], data: object, what: str) -> Model:
    """``data`` from the API as ``model``; a malformed response is one DataError naming the field."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise DataError(f"GitHub API response ({what}): {pydantic_message(exc)}") from None


class Account(_GitHubModel):
    login: str
    type: str = "User"  # "User", "Bot" or "Organization"


class Repository(_GitHubModel):
    """A repository: full, minimal, or the short ``{id, url, name}`` of a run's pull request."""

    id: int | None = None
    full_name: str | None = None  # "owner/name"; absent from the short form
    default_branch: str | None = None
    html_url: str | None = None
    fork: bool = False


class GitRef(_GitHubModel):
    """``pull_request.head`` / ``.base``: the branch, its commit and the repository it lives in."""

    sha: str
    ref: str
    repo: Repository | None = None  # None when the fork was deleted


class PullRequest(_GitHubModel):
    number: int
    state: str = "open"
    html_url: str | None = None
    head: GitRef
    base: GitRef | None = None  # not read by the action


class RunPullRequest(_GitHubModel):
    """An entry of ``workflow_run.pull_requests`` (``pull-request-minimal``: its repositories
    are the short ``{id, url, name}``). GitHub lists same-repository PRs only."""

    number: int
    head: GitRef
    base: GitRef | None = None


class WorkflowRun(_GitHubModel):
    id: int
    name: str | None = None
    event: str
    status: str | None = None
    conclusion: str | None = None
    head_sha: str
    head_branch: str | None = None
    head_repository: Repository | None = None
    repository: Repository | None = None
    path: str | None = None  # ".github/workflows/gate.yml"
    workflow_id: int | None = None
    run_number: int | None = None
    html_url: str | None = None
    created_at: datetime
    pull_requests: list[RunPullRequest] = Field(default_factory=list)  # null: none
    actor: Account | None = None  # who started the run's event (a push, a label)
    triggering_actor: Account | None = None  # who started this attempt (differs on a re-run)

    @field_validator("pull_requests", mode="before")
    @classmethod
    def _null_is_empty(cls, value: object) -> object:
        return [] if value is None else value


class ArtifactRun(_GitHubModel):
    id: int | None = None
    repository_id: int | None = None
    head_repository_id: int | None = None
    head_branch: str | None = None
    head_sha: str | None = None


class Artifact(_GitHubModel):
    id: int
    name: str
    size_in_bytes: int = 0
    expired: bool = False
    archive_download_url: str | None = None
    created_at: datetime | None = None
    expires_at: datetime | None = None
    workflow_run: ArtifactRun | None = None


class CommitDetail(_GitHubModel):
    class _Person(_GitHubModel):
        date: datetime | None = None

    committer: _Person | None = None


class Commit(_GitHubModel):
    sha: str
    commit: CommitDetail | None = None


class CommitComparison(_GitHubModel):
    """``GET /repos/{owner}/{repo}/compare/{base}...{head}``."""

    status: str  # "ahead" | "behind" | "identical" | "diverged"
    ahead_by: int = 0
    behind_by: int = 0
    merge_base_commit: Commit
    base_commit: Commit | None = None


class IssueComment(_GitHubModel):
    id: int
    body: str | None = None
    html_url: str | None = None
    user: Account | None = None


class CheckRunOutput(_GitHubModel):
    title: str | None = None
    summary: str | None = None


class App(_GitHubModel):
    slug: str | None = None


class CheckRun(_GitHubModel):
    id: int | None = None
    name: str | None = None
    head_sha: str | None = None
    html_url: str | None = None
    conclusion: str | None = None
    app: App | None = None  # the GitHub App whose token created it ("github-actions" for a workflow's)
    output: CheckRunOutput | None = None


class Label(_GitHubModel):
    name: str


class EventPayload(_GitHubModel):
    """The parts of ``$GITHUB_EVENT_PATH`` the action reads, for every event it handles."""

    repository: Repository | None = None
    pull_request: PullRequest | None = None
    workflow_run: WorkflowRun | None = None
    inputs: dict[str, str | bool | int | float | None] | None = None  # workflow_dispatch
    ref: str | None = None  # push
    after: str | None = None  # push: the pushed commit
    action: str | None = None  # pull_request: opened, synchronize, labeled, ...
    label: Label | None = None  # pull_request labeled / unlabeled: which label
    sender: Account | None = None  # who caused the event
