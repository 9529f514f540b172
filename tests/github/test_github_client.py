"""The REST client against the GitHub test pr_server: pagination, retries, rate limits, downloads."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from github_helpers import client_for
from servers.github_server import GitHubServer

from gate.github.client import GitHubAPIError, GitHubClient, requested_wait


def _comment_gets(pr_server: GitHubServer) -> list[dict[str, Any]]:
    return [
        r
        for r in pr_server.state.requests
        if r["path"].endswith("/issues/7/comments") and r["method"] == "GET"
    ]


def test_paginate_follows_link_headers_to_the_last_page(pr_server: GitHubServer) -> None:
    for i in range(5):
        pr_server.state.add_comment(7, f"c{i}")
    bodies = [c["body"] for c in client_for(pr_server).paginate("issues.list_comments", issue_number=7)]
    assert bodies == ["c0", "c1", "c2", "c3", "c4"]
    pages = [r["query"].get("page", "1") for r in _comment_gets(pr_server)]
    assert pages == ["1", "2", "3"]
    assert all(r["query"]["per_page"] == "100" for r in _comment_gets(pr_server))


def test_server_errors_are_retried_then_succeed(pr_server: GitHubServer) -> None:
    pr_server.state.fail("GET", r"/pulls/7$", 502, times=2)
    pull = client_for(pr_server).call("pulls.get", pull_number=7)
    assert pull["head"]["sha"] == "a1" * 20
    assert len([r for r in pr_server.state.requests if r["path"].endswith("/pulls/7")]) == 3


def test_secondary_rate_limit_honours_retry_after(pr_server: GitHubServer) -> None:
    pr_server.state.secondary_rate_limit("POST", r"/issues/7/comments$", retry_after=1)
    started = time.monotonic()
    created = client_for(pr_server).call("issues.create_comment", issue_number=7, body="hello")
    assert time.monotonic() - started >= 1.0
    assert created["body"] == "hello"
    assert [c["body"] for c in pr_server.state.comments[7]] == ["hello"]


def test_primary_rate_limit_waits_for_reset(pr_server: GitHubServer) -> None:
    reset = int(time.time())  # already reached: the wait is the 1 s safety margin
    pr_server.state.fail(
        "GET", r"/pulls/7$", 403, headers={"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(reset)}
    )
    started = time.monotonic()
    assert client_for(pr_server).call("pulls.get", pull_number=7)["number"] == 7
    assert 0.5 <= time.monotonic() - started < 25  # the 1 s margin, nowhere near a minute's wait


def test_total_wait_is_bounded(pr_server: GitHubServer) -> None:
    pr_server.state.fail("GET", r"/pulls/7$", 429, headers={"Retry-After": "600"})
    started = time.monotonic()
    with pytest.raises(GitHubAPIError, match=r"rate limited \(429.*GitHub asks to wait 600 s more") as info:
        client_for(pr_server, max_total_wait=30).call("pulls.get", pull_number=7)
    assert time.monotonic() - started < 25  # gave up at once: it never waited the 30 s budget
    assert info.value.rate_limited


def test_the_wait_budget_is_shared_by_all_requests_of_a_client(pr_server: GitHubServer) -> None:
    client = client_for(pr_server, max_total_wait=1.5)
    started = time.monotonic()
    pr_server.state.fail("GET", r"/pulls/7$", 429, headers={"Retry-After": "1"})
    assert client.call("pulls.get", pull_number=7)["number"] == 7  # waited 1 s of the 1.5
    pr_server.state.fail("GET", r"/pulls/7$", 429, headers={"Retry-After": "1"})
    with pytest.raises(GitHubAPIError, match=r"rate limited \(429.*wait 1 s more"):
        client.call("pulls.get", pull_number=7)  # 1 s more would exceed the budget: no wait
    # It waited the first second only: the second wait would exceed the budget, so it failed at
    # once (a wait would have spent the budget below zero, and taken at least 2 s in all).
    assert time.monotonic() - started >= 1.0
    assert client._budget.remaining == 0.5
    assert len([r for r in pr_server.state.requests if r["path"].endswith("/pulls/7")]) == 3


def test_plain_403_is_not_retried_and_names_the_permission(pr_server: GitHubServer) -> None:
    with pytest.raises(GitHubAPIError) as info:
        client_for(pr_server, token="ghs_read").call(
            "checks.create", permission="checks: write", name="x", head_sha="a1" * 20
        )
    message = str(info.value)
    assert "403 Resource not accessible by integration" in message
    assert "`permissions: checks: write`" in message
    assert len([r for r in pr_server.state.requests if r["path"].endswith("/check-runs")]) == 1
    assert info.value.is_permission_denied


def test_bad_token_and_unreachable_server(pr_server: GitHubServer) -> None:
    with pytest.raises(GitHubAPIError, match="401 Bad credentials.*token was rejected"):
        client_for(pr_server, token="nope").call("repos.get")
    dead = GitHubClient(api_url="http://127.0.0.1:9", repository="acme/rag", token="t", backoff_factor=0.01)
    with pytest.raises(GitHubAPIError, match="cannot reach http://127.0.0.1:9"):
        dead.call("repos.get")


def test_download_follows_the_redirect_without_credentials(pr_server: GitHubServer, tmp_path: Path) -> None:
    run_id = pr_server.state.add_run(head_sha="c1" * 20)
    artifact_id = pr_server.state.add_artifact(run_id, "ragproof-run", b"PK-zip-bytes")
    size = client_for(pr_server).download_artifact(artifact_id, tmp_path / "a.zip", max_bytes=1000)
    assert size == 12 and (tmp_path / "a.zip").read_bytes() == b"PK-zip-bytes"
    assert pr_server.state.blob_requests == [{"path": f"/blob/{artifact_id}", "authorization": None}]
    with pytest.raises(GitHubAPIError, match="exceeds the 5-byte limit"):
        client_for(pr_server).download_artifact(artifact_id, tmp_path / "b.zip", max_bytes=5)


def test_requested_wait_parses_both_headers() -> None:
    assert requested_wait({"Retry-After": "7"}) == 7.0
    assert requested_wait({"x-ratelimit-remaining": "0", "x-ratelimit-reset": "110"}, now=100.0) == 11.0
    assert requested_wait({"x-ratelimit-remaining": "5", "x-ratelimit-reset": "110"}, now=100.0) is None
    assert requested_wait({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}, now=1445412470.0) == 10.0


SECONDARY = "You have exceeded a secondary rate limit"


def test_secondary_limit_without_headers_waits_then_retries(pr_server: GitHubServer) -> None:
    pr_server.state.fail("GET", r"/pulls/7$", 403, message=SECONDARY, times=2)
    started = time.monotonic()
    assert client_for(pr_server, headerless_wait=0.3).call("pulls.get", pull_number=7)["number"] == 7
    assert time.monotonic() - started >= 0.6
    assert len([r for r in pr_server.state.requests if r["path"].endswith("/pulls/7")]) == 3


def test_secondary_limit_without_headers_is_reported_as_a_rate_limit(pr_server: GitHubServer) -> None:
    # Three in a row, or a wait beyond the budget: a clear rate-limit failure, not a permission one.
    pr_server.state.fail("GET", r"/pulls/7$", 403, message=SECONDARY, times=3)
    with pytest.raises(GitHubAPIError, match="rate limited") as info:
        client_for(pr_server, headerless_wait=0.01).call("pulls.get", pull_number=7)
    assert info.value.rate_limited and "permissions" not in str(info.value)
    pr_server.state.fail("GET", r"/pulls/7$", 403, message=SECONDARY, times=1)
    started = time.monotonic()
    with pytest.raises(GitHubAPIError, match="rate limited"):
        client_for(pr_server, max_total_wait=30).call("pulls.get", pull_number=7)  # 60 s > 30 s
    assert time.monotonic() - started < 25  # gave up at once: it never waited the 30 s budget
