"""Finding the pull request of a workflow run (the fork-safe second stage)."""

from __future__ import annotations

from typing import Any

import pytest
from github_helpers import client_for
from servers.github_server import GitHubServer

from gate.core.errors import DataError
from gate.github.models import WorkflowRun
from gate.github.pulls import get_pull, pull_for_run

HEAD = "a1" * 20


def _run(pr_server: GitHubServer, **kw: Any) -> WorkflowRun:
    run_id = pr_server.state.add_run(
        head_sha=kw.pop("head_sha", HEAD), event="pull_request", head_branch="feature", **kw
    )
    return WorkflowRun.model_validate(next(r for r in pr_server.state.runs if r["id"] == run_id))


def test_same_repository_pr_comes_from_the_run(pr_server: GitHubServer) -> None:
    pull = pr_server.state.pulls[7]
    run = _run(pr_server, pull_requests=[{"number": 7, "head": pull["head"], "base": pull["base"]}])
    lookup = pull_for_run(client_for(pr_server), run)
    assert lookup.pull is not None and lookup.pull.number == 7
    assert not any(r["path"].endswith("/pulls") for r in pr_server.state.requests)  # no search needed


def test_fork_pr_is_found_by_owner_and_branch_across_pages(pr_server: GitHubServer) -> None:
    for number in (20, 21, 22):  # other forks' PRs from branches named feature
        pr_server.state.add_pull(number, head_sha="ee" * 20, head_repo=("eve/rag", 3003))
    pr_server.state.add_pull(8, head_sha="f1" * 20, head_repo=("mallory/rag", 2002))
    run = _run(pr_server, head_sha="f1" * 20, head_repository=("mallory/rag", 2002))
    lookup = pull_for_run(client_for(pr_server), run)
    assert lookup.pull is not None and lookup.pull.number == 8


def test_a_pr_that_moved_on_or_closed_gets_nothing(pr_server: GitHubServer) -> None:
    pr_server.state.add_pull(8, head_sha="f2" * 20, head_repo=("mallory/rag", 2002))
    run = _run(pr_server, head_sha="f1" * 20, head_repository=("mallory/rag", 2002))
    lookup = pull_for_run(client_for(pr_server), run)
    assert lookup.pull is None and lookup.reason == (
        "pull request #8 has moved on to f2f2f2f; the result for f1f1f1f is not posted"
    )
    pr_server.state.pulls[8]["head"]["sha"] = "f1" * 20
    pr_server.state.pulls[8]["state"] = "closed"
    lookup = pull_for_run(client_for(pr_server), run)
    assert lookup.pull is None
    assert lookup.reason is not None and "no open pull request" in lookup.reason


def test_no_pull_request_at_all(pr_server: GitHubServer) -> None:
    run = _run(pr_server, head_sha="99" * 20, head_repository=("nobody/rag", 4004))
    lookup = pull_for_run(client_for(pr_server), run)
    assert lookup.pull is None and "no open pull request has head commit 9999999" in (lookup.reason or "")


def test_a_malformed_response_is_one_data_error_naming_the_field(pr_server: GitHubServer) -> None:
    pr_server.state.check_contract = False  # GitHub never sends this: a malformed response on purpose
    del pr_server.state.pulls[7]["head"]
    with pytest.raises(DataError, match=r"^GitHub API response \(pull request #7\): head: Field required"):
        get_pull(client_for(pr_server), 7)
