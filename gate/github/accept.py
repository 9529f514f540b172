"""A maintainer's acceptance of a result: the accept label, and who applied it.

A ``review`` or ``block`` result becomes a success when the pull request carries the accept
label (input ``accept-label``, default ``ragproof:accept``) and the user who applied it last
has write, maintain or admin permission on the repository. Who applied it comes from the
issue's events (``GET /repos/{owner}/{repo}/issues/{n}/events``, oldest first, every page):
the label's last ``labeled`` event not followed by an ``unlabeled`` one; the permission from
``GET /repos/{owner}/{repo}/collaborators/{username}/permission`` (``permission`` is
``admin``/``write``/``read``/``none``; ``role_name`` adds ``maintain`` and ``triage``).

Anyone with triage permission can apply a label, so a label by a reader or triager is
ignored, and the report says so. The event list, not the event payload's labels, is the
source: a payload is a snapshot of when the workflow started.
"""

from __future__ import annotations

from dataclasses import dataclass

from gate.github.client import GitHubAPIError, GitHubClient

PERMISSION = "pull-requests: read"
ACCEPTING_ROLES = frozenset({"admin", "maintain", "write"})


@dataclass(frozen=True)
class Acceptance:
    """The accept label's state: absent (``actor`` None), accepted, or applied by a non-writer."""

    label: str
    actor: str | None = None
    role: str | None = None
    accepted: bool = False

    def note(self) -> str | None:
        """One plain-text line for the report (None when the label is absent)."""
        if self.actor is None:
            return None
        if self.accepted:
            return f"Accepted by {self.actor} ({self.role} permission) with the label {self.label}."
        return (
            f"The label {self.label} was applied by {self.actor}, whose permission is {self.role or 'unknown'}: "
            "ignored (only users with write, maintain or admin permission can accept a result)."
        )


def label_actor(client: GitHubClient, issue_number: int, label: str) -> str | None:
    """Who applied ``label`` last, if it is still on the issue (from its events)."""
    actor: str | None = None
    for event in client.paginate("issues.list_events", permission=PERMISSION, issue_number=issue_number):
        if not isinstance(event, dict):
            continue
        name = (event.get("label") or {}).get("name") if isinstance(event.get("label"), dict) else None
        if name != label:
            continue
        if event.get("event") == "labeled":
            who = event.get("actor")
            actor = who.get("login") if isinstance(who, dict) and isinstance(who.get("login"), str) else None
        elif event.get("event") == "unlabeled":
            actor = None
    return actor


def role_of(client: GitHubClient, username: str) -> str:
    """The user's role on the repository: admin, maintain, write, triage, read or none."""
    data = client.call(
        "repos.get_collaborator_permission_level", permission="contents: read", username=username
    )
    if not isinstance(data, dict):
        return "none"
    role = data.get("role_name")
    if isinstance(role, str) and role:
        return role
    permission = data.get("permission")
    return permission if isinstance(permission, str) else "none"


def find_acceptance(client: GitHubClient, issue_number: int, label: str) -> Acceptance:
    """The accept label's state on the pull request (permission asked only when it is present)."""
    actor = label_actor(client, issue_number, label)
    if actor is None:
        return Acceptance(label)
    try:
        role = role_of(client, actor)
    except GitHubAPIError as exc:
        if not exc.is_permission_denied:
            raise
        role = "none"  # not a collaborator (404), or the token may not ask: never accepted
    return Acceptance(label, actor, role, role in ACCEPTING_ROLES)
