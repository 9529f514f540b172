"""The sticky comment against the GitHub test pr_server: one per check name, updated in place."""

from __future__ import annotations

from github_helpers import client_for
from servers.github_server import GitHubServer

from gate.github.checks import create_check_run
from gate.github.client import GitHubClient
from gate.github.comment import CommentResult, find_comment, marker, write_comment

HUMAN = {"login": "mallory", "type": "User"}


def upsert_comment(client: GitHubClient, pr_number: int, check_name: str, body: str) -> CommentResult:
    """The flow's two steps: find the sticky comment, then update it or post a new one."""
    return write_comment(client, pr_number, check_name, body, find_comment(client, pr_number, check_name))


def test_created_then_updated_in_place_behind_several_pages(pr_server: GitHubServer) -> None:
    for i in range(5):
        pr_server.state.add_comment(7, f"chatter {i}", HUMAN)
    first = upsert_comment(client_for(pr_server), 7, "ragproof", "## report v1")
    assert first.action == "created"
    for i in range(3):
        pr_server.state.add_comment(7, f"more chatter {i}", HUMAN)
    second = upsert_comment(client_for(pr_server), 7, "ragproof", "## report v2")
    assert second.action == "updated" and second.url == first.url
    ours = [c for c in pr_server.state.comments[7] if c["body"].startswith(marker("ragproof"))]
    assert len(ours) == 1
    assert ours[0]["body"] == "<!-- ragproof:ragproof -->\n## report v2"


def test_markers_per_check_name_and_human_quotes_are_left_alone(pr_server: GitHubServer) -> None:
    quoted = pr_server.state.add_comment(7, "<!-- ragproof:ragproof --> look at this", HUMAN)
    upsert_comment(client_for(pr_server), 7, "ragproof", "main config")
    upsert_comment(client_for(pr_server), 7, "ragproof-judge", "judge config")
    bodies = [c["body"] for c in pr_server.state.comments[7]]
    assert bodies[0] == quoted["body"]
    assert bodies[1:] == [
        "<!-- ragproof:ragproof -->\nmain config",
        "<!-- ragproof:ragproof-judge -->\njudge config",
    ]
    found = find_comment(client_for(pr_server), 7, "ragproof-judge")
    assert found is not None and (found.body or "").endswith("judge config")


def test_read_only_token_is_denied_not_crashed(pr_server: GitHubServer) -> None:
    result = upsert_comment(client_for(pr_server, "ghs_read"), 7, "ragproof", "body")
    assert result.action == "denied" and result.url is None
    assert "pull-requests: write" in (result.message or "")
    assert pr_server.state.comments.get(7, []) == []
    check = create_check_run(
        client_for(pr_server, "ghs_read"),
        name="ragproof",
        head_sha="a1" * 20,
        conclusion="neutral",
        title="t",
        summary="s",
    )
    assert not check.created and "checks: write" in (check.message or "")


def test_a_foreign_bot_comment_with_our_marker_is_left_alone_and_ours_is_posted(
    pr_server: GitHubServer,
) -> None:
    forged_body = "<!-- ragproof:ragproof -->\n## ragproof: ✅ Passed"
    forged = pr_server.state.add_comment(7, forged_body, {"login": "evil-app[bot]", "type": "Bot"})
    result = upsert_comment(client_for(pr_server), 7, "ragproof", "## ragproof: ❌ Blocked")
    assert result.action == "created"
    bodies = [(c["user"]["login"], c["body"]) for c in pr_server.state.comments[7]]
    assert bodies == [
        ("evil-app[bot]", forged["body"]),
        ("github-actions[bot]", "<!-- ragproof:ragproof -->\n## ragproof: ❌ Blocked"),
    ]
    assert not any(r["method"] == "PATCH" for r in pr_server.state.requests)


def test_the_comment_author_input_names_another_identity(pr_server: GitHubServer) -> None:
    mine = pr_server.state.add_comment(
        7, "<!-- ragproof:ragproof -->\nold", {"login": "ragproof-app[bot]", "type": "Bot"}
    )
    assert find_comment(client_for(pr_server), 7, "ragproof") is None  # not github-actions[bot]'s
    found = find_comment(client_for(pr_server), 7, "ragproof", author="ragproof-app[bot]")
    assert found is not None and found.id == mine["id"]


def test_a_refused_edit_posts_a_new_comment(pr_server: GitHubServer) -> None:
    pr_server.state.add_comment(7, "<!-- ragproof:ragproof -->\nold")
    pr_server.state.fail(
        "PATCH", r"/issues/comments/\d+$", 403, message="Resource not accessible by integration"
    )
    result = upsert_comment(client_for(pr_server), 7, "ragproof", "new")
    assert result.action == "created"
    assert [c["body"] for c in pr_server.state.comments[7]] == [
        "<!-- ragproof:ragproof -->\nold",
        "<!-- ragproof:ragproof -->\nnew",
    ]
