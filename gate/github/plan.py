"""Resolving the event into a plan: which commit is gated, for which pull request, against
which workflow's baselines, and what started the run.

- :func:`refuse_dangerous_event`: ``pull_request_target`` is refused unless the workflow allows
  it, before anything is read from the checkout.
- :meth:`EventPlan.target`: the commit to gate and its pull request: ``pull_request.head.sha``
  of a ``pull_request`` event (not the merge commit); for ``workflow_dispatch`` with
  ``pr-number`` the head from the pulls API (a fork's pull request may only be compared from a
  ``candidate``, never run); otherwise ``GITHUB_SHA`` with no pull request (summary only).
- :meth:`EventPlan.trigger`: what started the run, as acceptance needs it
  (:class:`gate.github.accept.Trigger`).
- :func:`checkout_head`: the commit the workspace holds, read from ``.git``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from gate.core.errors import UsageError
from gate.github.accept import Trigger
from gate.github.baseline import BaselineSearch, repository_info
from gate.github.client import GitHubClient
from gate.github.context import GitHubContext
from gate.github.models import PullRequest, Repository, WorkflowRun, parse_response
from gate.github.pulls import get_pull


def refuse_dangerous_event(event_name: str, allow_pull_request_target: bool) -> None:
    """UsageError (exit 64) for ``pull_request_target`` unless the workflow allows it."""
    if event_name == "pull_request_target" and not allow_pull_request_target:
        raise UsageError(
            "refusing to run on pull_request_target: it runs with this repository's secrets and a write "
            "token, which a pull request's code could steal; use pull_request (or the fork-safe "
            "workflow_run pair), or set allow-pull-request-target: true if you accept that risk"
        )


_OBJECT_ID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


def checkout_head(workspace: Path) -> str | None:
    """The commit checked out in ``workspace`` (``git rev-parse HEAD``), None if not a checkout.

    Read from ``.git`` directly (the image needs no git; the checkout step wrote it, and a pull
    request cannot commit into ``.git``): ``HEAD`` is a commit id (a detached checkout, as
    actions/checkout makes of a sha) or ``ref: refs/...``, resolved through the loose ref file
    or ``packed-refs``; a ``.git`` file (``gitdir: ...``) and a worktree's ``commondir`` are
    followed. At most 5 symbolic steps.
    """
    git = workspace / ".git"
    try:
        if git.is_file():
            pointer = git.read_text(encoding="utf-8").strip()
            if not pointer.startswith("gitdir:"):
                return None
            git = (workspace / pointer[len("gitdir:") :].strip()).resolve()
        common = git
        if (git / "commondir").is_file():
            common = (git / (git / "commondir").read_text(encoding="utf-8").strip()).resolve()
        head = (git / "HEAD").read_text(encoding="utf-8").strip()
        for _ in range(5):
            if _OBJECT_ID.fullmatch(head):
                return head
            if not head.startswith("ref:"):
                return None
            ref = head[len("ref:") :].strip()
            loose = next((d / ref for d in (git, common) if (d / ref).is_file()), None)
            if loose is not None:
                head = loose.read_text(encoding="utf-8").strip()
                continue
            packed = common / "packed-refs"
            lines = packed.read_text(encoding="utf-8").splitlines() if packed.is_file() else []
            head = next((ln.split(" ", 1)[0] for ln in lines if ln.endswith(" " + ref)), "")
    except (OSError, UnicodeDecodeError):
        return None
    return None


def workflow_path(path: str) -> str:
    """A run's workflow file path without the ref the REST API may append (``gate.yml@main``)."""
    return path.split("@", 1)[0]


@dataclass
class Target:
    """Where a gated result goes: the commit compared, and the PR (None: summary only)."""

    head_sha: str
    pull: PullRequest | None
    baseline_workflow: str


class GitHubSession:
    """The API client and the repository, made on first use: a baseline run makes no API call."""

    def __init__(self, context: GitHubContext) -> None:
        self.ctx = context
        self._client: GitHubClient | None = None
        self._repository: Repository | None = None

    @property
    def client(self) -> GitHubClient:
        if self._client is None:
            if self.ctx.token is None:
                raise UsageError(
                    "input github-token (INPUT_GITHUB-TOKEN) is empty: comparing needs a token "
                    "with `permissions: contents: read, actions: read`"
                )
            self._client = GitHubClient(
                api_url=self.ctx.api_url,
                repository=self.ctx.repository,
                token=self.ctx.token.get_secret_value(),
                network=self.ctx.network,
            )
        return self._client

    @property
    def repository(self) -> Repository:
        if self._repository is None:
            self._repository = repository_info(self.client)
        return self._repository


class EventPlan:
    """What the event asks of this step (see the module docstring)."""

    def __init__(self, context: GitHubContext, session: GitHubSession) -> None:
        self.ctx = context
        self.inputs = context.inputs
        self.session = session

    def default_branch(self) -> str:
        payload = self.ctx.event.repository
        if payload is not None and payload.default_branch:
            return payload.default_branch
        return self.session.repository.default_branch or "main"

    def records_a_baseline(self) -> bool:
        """``mode: run``, or in ``auto`` a push to the default branch: the run is recorded, not gated."""
        if self.inputs.mode == "run":
            return True
        return (
            self.inputs.mode == "auto"
            and self.ctx.event_name == "push"
            and self.ctx.ref == f"refs/heads/{self.default_branch()}"
        )

    def on_default_branch(self) -> bool:
        """Whether the checkout is the default branch's (trusted code): never on a pull request's event."""
        if self.ctx.event_name.startswith("pull_request") or self.ctx.event_name == "workflow_run":
            return False
        payload = self.ctx.event.repository
        if (payload is None or not payload.default_branch) and self.ctx.token is None:
            return False  # cannot ask (`mode: run` without a token): not trusted
        return self.ctx.ref == f"refs/heads/{self.default_branch()}"

    def baseline_workflow(self) -> str:
        workflow = self.inputs.baseline_workflow or self.ctx.workflow_file
        if not workflow:
            raise UsageError(
                "input baseline-workflow is empty and GITHUB_WORKFLOW_REF is not set: name the workflow "
                "file whose push runs upload the baseline (e.g. pr-gate.yml)"
            )
        return workflow.rsplit("/", 1)[-1]

    def _same_repository(self, pull: PullRequest) -> bool:
        repo = pull.head.repo
        if repo is None:
            return False
        if repo.id is not None and self.session.repository.id is not None:
            return repo.id == self.session.repository.id
        return (repo.full_name or "").lower() == self.ctx.repository.lower()

    def target(self) -> Target:
        """The commit to gate and its pull request, for every event but ``workflow_run``."""
        event = self.ctx.event_name
        pull: PullRequest | None = None
        if event in ("pull_request", "pull_request_target"):
            pull = self.ctx.event.pull_request
            if pull is None:
                raise UsageError(f"{self.ctx.event_path}: a {event} event without pull_request")
        elif self.inputs.pr_number is not None:
            pull = get_pull(self.session.client, self.inputs.pr_number)
            runs_code = not (self.inputs.mode == "compare" and self.inputs.candidate)
            if runs_code and not self._same_repository(pull):
                repo = pull.head.repo
                origin = (repo.full_name or f"repository {repo.id}") if repo else "a deleted fork"
                raise UsageError(
                    f"input pr-number: pull request #{pull.number} comes from {origin}, not this repository: "
                    "refusing to run its code with this workflow's secrets (only mode: compare with a "
                    "candidate run is allowed; for forks use the fork-safe workflow_run pair)"
                )
        if pull is not None:
            return Target(pull.head.sha, pull, self.baseline_workflow())
        head = self.ctx.sha or (self.ctx.event.after if self.ctx.event else None)
        if not head:
            raise UsageError("GITHUB_SHA is not set: cannot tell which commit to compare")
        return Target(head, None, self.baseline_workflow())

    def candidate_workflow(self, search: BaselineSearch, baseline_workflow: str) -> str:
        """The workflow path a ``workflow_run`` candidate must come from: the input, else the
        baseline's run's, else the baseline workflow."""
        configured = self.inputs.candidate_workflow
        if not configured and search.baseline is not None and search.baseline.run.path:
            configured = workflow_path(search.baseline.run.path)
        configured = configured or baseline_workflow
        return configured if "/" in configured else f".github/workflows/{configured}"

    def trigger(self, candidate_path: str | None = None) -> Trigger:
        """What started this run: the accept label itself, or (fork-safe pair) which user, when,
        and since when the commit under test has been the pull request's head: the first
        stage-one run on it of the workflow at ``candidate_path`` (all pages)."""
        event = self.ctx.event
        label = self.inputs.accept_label
        if self.ctx.event_name in ("pull_request", "pull_request_target"):
            labeled = event.action == "labeled" and event.label is not None and event.label.name == label
            return Trigger(labeled_by=event.sender.login if labeled and event.sender else None)
        run = event.workflow_run if self.ctx.event_name == "workflow_run" else None
        starter = run.actor.login if run is not None and run.actor else None
        again = run.triggering_actor.login if run is not None and run.triggering_actor else None
        if run is None or starter is None or again is None or starter.lower() != again.lower():
            return Trigger()  # a re-run by someone else is not the labeler's own start
        since = self._head_since(run, candidate_path) if candidate_path else None
        return Trigger(started_by=starter, started_at=run.created_at, head_since=since)

    def _head_since(self, run: WorkflowRun, candidate_path: str) -> datetime | None:
        """When the first pull-request run of the candidate workflow on ``run.head_sha`` was
        created (GitHub sets a run's commit and time; a pull request cannot date one back)."""
        first: datetime | None = None
        for item in self.session.client.paginate(
            "actions.list_workflow_runs",
            permission="actions: read",
            item_key="workflow_runs",
            workflow_id=candidate_path.rsplit("/", 1)[-1],
            head_sha=run.head_sha,
        ):
            other = parse_response(WorkflowRun, item, f"runs of {candidate_path}")
            if (
                other.head_sha == run.head_sha
                and other.event in ("pull_request", "pull_request_target")
                and workflow_path(other.path or "") == candidate_path
                and (first is None or other.created_at < first)
            ):
                first = other.created_at
        return first
