"""Finding the pull request a result belongs to.

``workflow_dispatch`` names the PR by number; its head commit comes from the pulls API.
``workflow_run`` (the trusted second stage of the fork-safe pattern) names only the run that
produced the candidate: its ``pull_requests`` list is filled for same-repository PRs only,
so for forks the open PRs of ``owner:branch`` are searched (all pages) for one whose head
is that branch of that repository. Either way the PR is then read again and must still have that head
commit: a result for an older push is never posted on a PR that has moved on.
"""

from __future__ import annotations

from dataclasses import dataclass

from gate.github.client import GitHubClient
from gate.github.models import PullRequest, WorkflowRun, parse_response

PERMISSION = "pull-requests: read"


def get_pull(client: GitHubClient, number: int) -> PullRequest:
    data = client.call("pulls.get", permission=PERMISSION, pull_number=number)
    return parse_response(PullRequest, data, f"pull request #{number}")


@dataclass(frozen=True)
class PullLookup:
    pull: PullRequest | None
    reason: str | None = None


def pull_for_run(client: GitHubClient, run: WorkflowRun) -> PullLookup:
    """The open PR whose head is ``run.head_sha``, checked against the live PR."""
    numbers = [entry.number for entry in run.pull_requests if entry.head.sha == run.head_sha]
    head_repository = run.head_repository.full_name if run.head_repository else None
    if not numbers and head_repository and run.head_branch:
        owner = head_repository.split("/", 1)[0]
        for item in client.paginate(
            "pulls.list", permission=PERMISSION, state="open", head=f"{owner}:{run.head_branch}"
        ):
            candidate = parse_response(PullRequest, item, "open pull requests")
            head_repo = candidate.head.repo.full_name if candidate.head.repo else None
            if (
                candidate.head.ref == run.head_branch
                and head_repo is not None
                and head_repo.lower() == head_repository.lower()
            ):
                numbers.append(candidate.number)
    if not numbers:
        return PullLookup(None, f"no open pull request has head commit {run.head_sha[:7]} of run {run.id}")
    pull = get_pull(client, numbers[0])
    if pull.state != "open":
        return PullLookup(None, f"pull request #{pull.number} is {pull.state}")
    if pull.head.sha != run.head_sha:
        return PullLookup(
            None,
            f"pull request #{pull.number} has moved on to {pull.head.sha[:7]}; "
            f"the result for {run.head_sha[:7]} is not posted",
        )
    return PullLookup(pull)
