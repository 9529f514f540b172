"""One sticky pull-request comment per check name, updated in place on every run.

The comment starts with a hidden marker ``<!-- ragproof:NAME -->`` (NAME = the check name),
so several configurations can each keep their own comment on one PR. To find it, every page
of the PR's comments is read and the first comment that starts with the marker and was
written by the token's own identity is taken: ``github-actions[bot]`` for a workflow's token
(the identity of an installation token cannot be asked for: ``GET /user`` answers 403), or
the login named by the input ``comment-author`` for any other token. A comment by anyone
else carrying the marker (a human quoting it, another bot forging a "passed" report) is never
adopted. Found: PATCH it; if that edit is refused (403/404), or nothing was found, POST a new one.

A token without ``pull-requests: write`` (a pull request from a fork) cannot comment: the
result says so and the caller warns and relies on the job summary instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gate.github.client import GitHubAPIError, GitHubClient
from gate.github.models import IssueComment, parse_response

PERMISSION = "pull-requests: write"
BOT_LOGIN = "github-actions[bot]"


def marker(check_name: str) -> str:
    return f"<!-- ragproof:{check_name} -->"


@dataclass(frozen=True)
class CommentResult:
    url: str | None
    action: Literal["created", "updated", "denied"]
    message: str | None = None


def _is_ours(comment: IssueComment, tag: str, author: str) -> bool:
    login = comment.user.login if comment.user is not None else ""
    return login.lower() == author.lower() and (comment.body or "").lstrip().startswith(tag)


def find_comment(
    client: GitHubClient, pr_number: int, check_name: str, *, author: str = BOT_LOGIN
) -> IssueComment | None:
    """The sticky comment of ``check_name`` by ``author`` on the PR, searching all pages."""
    tag = marker(check_name)
    for item in client.paginate(
        "issues.list_comments", permission="pull-requests: read", issue_number=pr_number
    ):
        comment = parse_response(IssueComment, item, f"comments of #{pr_number}")
        if _is_ours(comment, tag, author):
            return comment
    return None


def write_comment(
    client: GitHubClient, pr_number: int, check_name: str, body: str, existing: IssueComment | None
) -> CommentResult:
    """Update ``existing`` (the sticky comment :func:`find_comment` returned) or post a new one."""
    tag = marker(check_name)
    text = body if body.lstrip().startswith(tag) else f"{tag}\n{body}"
    try:
        if existing is not None:
            try:
                data = client.call(
                    "issues.update_comment", permission=PERMISSION, comment_id=existing.id, body=text
                )
                return CommentResult(parse_response(IssueComment, data, "comment").html_url, "updated")
            except GitHubAPIError as exc:
                # Refused (not ours after all, or deleted meanwhile): a new comment, never silence.
                if not exc.is_permission_denied:
                    raise
        data = client.call("issues.create_comment", permission=PERMISSION, issue_number=pr_number, body=text)
    except GitHubAPIError as exc:
        if exc.status == 403 and not exc.rate_limited:
            return CommentResult(None, "denied", str(exc))
        raise
    return CommentResult(parse_response(IssueComment, data, "comment").html_url, "created")
