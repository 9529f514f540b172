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

**An acceptance holds for one commit**, the pull request's head when the label was applied, so
a later push needs a fresh look. A writer's label accepts the commit under test when

- this run was started by applying it: a ``pull_request`` event with ``action: labeled`` for
  this label, sent by the user who applied it last (the event's ``pull_request.head.sha`` is the
  head at that moment, and it is the commit under test); or, in the fork-safe pair, a
  ``workflow_run`` whose stage-one run was started, and this attempt too, by that user
  (``actor`` and ``triggering_actor``) after the label was applied, **on the head the label was
  given on**: a stage-one run of the pull request on this very commit was created before the
  label (the commit was the head by then; runs and their times are GitHub's), and the head has
  not been force-pushed since (a ``head_ref_force_pushed`` event after the label: the head may
  have left and come back). A later push, or any run on another head, is never accepted by it,
  whoever starts it; or
- an earlier run accepted this very commit for that user: ragproof's own check run on the
  commit records it on its summary's second line (:func:`record_line`). Only check runs named
  like the check and created by the token's app count (:func:`gate.github.checks.own_check_runs`),
  never a comment: every workflow's token comments as ``github-actions[bot]``, and a workflow
  that quotes text the author chose could forge a record in a comment.

Otherwise the label was given for another commit (or its run recorded nothing): ignored, and the
report says to apply it again.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

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
    # a writer's label applied while an earlier commit was the head: not this commit's acceptance
    earlier_commit: bool = False

    def note(self) -> str | None:
        """One plain-text line for the report (None when the label is absent)."""
        if self.actor is None:
            return None
        if self.accepted:
            return f"Accepted by {self.actor} ({self.role} permission) with the label {self.label}."
        if self.earlier_commit:
            return (
                f"The label {self.label} by {self.actor} does not accept this commit: an acceptance holds for "
                "the commit it was given on (recorded by the run the label starts, so the workflow must run "
                "on labeled); to accept this commit, remove the label and apply it again."
            )
        return (
            f"The label {self.label} was applied by {self.actor}, whose permission is {self.role or 'unknown'}: "
            "ignored (only users with write, maintain or admin permission can accept a result)."
        )


@dataclass(frozen=True)
class LabelEvent:
    """The label's last ``labeled`` event not followed by an ``unlabeled`` one."""

    actor: str
    created_at: datetime | None = None
    # the pull request's head was force-pushed after the label (it may have changed and come back)
    head_moved: bool = False


@dataclass(frozen=True)
class Trigger:
    """What started this run, as far as acceptance cares.

    ``labeled_by``: the sender of a ``pull_request`` ``labeled`` event for the accept label.
    ``started_by`` / ``started_at``: in the fork-safe pair, the user who started the stage-one run
    and this attempt of it (None when they differ), and when that run was created.
    ``head_since``: in the fork-safe pair, when the first stage-one run on the commit under test
    was created (the commit was the pull request's head by then); None: no such run.
    """

    labeled_by: str | None = None
    started_by: str | None = None
    started_at: datetime | None = None
    head_since: datetime | None = None

    def applied(self, event: LabelEvent) -> bool:
        """Whether this run was started by applying the label of ``event`` to the commit under test."""
        if self.labeled_by is not None:
            return self.labeled_by.lower() == event.actor.lower()
        if self.started_by is None or self.started_at is None or event.created_at is None:
            return False
        given_on_this_head = (
            self.head_since is not None and self.head_since <= event.created_at and not event.head_moved
        )
        return (
            self.started_by.lower() == event.actor.lower()
            and event.created_at <= self.started_at
            and given_on_this_head
        )


_RECORD = re.compile(r"<!-- ragproof:accepted sha=([0-9a-f]{40}) by=([A-Za-z0-9_.\[\]-]{1,100}) -->")


def record_line(head_sha: str, actor: str) -> str:
    """The hidden line a report carries when it accepted ``head_sha`` for ``actor``."""
    return f"<!-- ragproof:accepted sha={head_sha} by={actor} -->"


def with_record(report: str, tag: str, head_sha: str, actor: str) -> str:
    """``report`` with the sticky comment's marker ``tag`` first and the record on line 2."""
    body = report.lstrip()
    rest = body[len(tag) :].lstrip("\n") if body.startswith(tag) else body
    return f"{tag}\n{record_line(head_sha, actor)}\n{rest}"


def carried_record(report: str, previous: str | None, head_sha: str, tag: str) -> str:
    """``report`` keeping the record of the report it follows (``previous``: an earlier check run's
    summary) when that record is for the same commit (a run of another event on an accepted
    commit must not drop it); else unchanged."""
    kept = recorded_acceptance(previous)
    if kept is None or kept[0] != head_sha or recorded_acceptance(report) is not None:
        return report
    return with_record(report, tag, *kept)


def recorded_acceptance(body: str | None) -> tuple[str, str] | None:
    """(sha, actor) from the second line of a report, if it records an acceptance.

    Only that line counts: the first is the comment's marker, and everything after it is the
    rendered report, in which user strings are escaped.
    """
    lines = (body or "").lstrip().splitlines()
    match = _RECORD.fullmatch(lines[1].strip()) if len(lines) > 1 else None
    return (match.group(1), match.group(2)) if match else None


def check_run_record(client: GitHubClient, *, name: str, head_sha: str, author: str) -> str | None:
    """The summary of ragproof's own check run on ``head_sha`` that records its acceptance, if any
    (read with :func:`recorded_acceptance`)."""
    from gate.github.checks import own_check_runs

    for check in own_check_runs(client, name=name, head_sha=head_sha, author=author):
        summary = check.output.summary if check.output else None
        record = recorded_acceptance(summary)
        if record is not None and record[0] == head_sha:
            return summary
    return None


def _time(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def label_event(client: GitHubClient, issue_number: int, label: str) -> LabelEvent | None:
    """Who applied ``label`` last and when, if it is still on the issue (from its events), and
    whether the head was force-pushed after that."""
    found: LabelEvent | None = None
    for event in client.paginate("issues.list_events", permission=PERMISSION, issue_number=issue_number):
        if not isinstance(event, dict):
            continue
        if event.get("event") == "head_ref_force_pushed" and found is not None:
            found = dataclasses.replace(found, head_moved=True)
            continue
        name = (event.get("label") or {}).get("name") if isinstance(event.get("label"), dict) else None
        if name != label:
            continue
        if event.get("event") == "labeled":
            who = event.get("actor")
            login = who.get("login") if isinstance(who, dict) else None
            found = LabelEvent(login, _time(event.get("created_at"))) if isinstance(login, str) else None
        elif event.get("event") == "unlabeled":
            found = None
    return found


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


def find_acceptance(
    client: GitHubClient,
    issue_number: int,
    label: str,
    *,
    head_sha: str,
    trigger: Trigger,
    recorded: Callable[[], tuple[str, str] | None],
) -> Acceptance:
    """The accept label's state for the commit ``head_sha`` (see the module's rules).

    The permission is asked only when the label is present, ``recorded`` (the sticky comment's
    record) only when this run was not started by the label.
    """
    event = label_event(client, issue_number, label)
    if event is None:
        return Acceptance(label)
    actor = event.actor
    try:
        role = role_of(client, actor)
    except GitHubAPIError as exc:
        if not exc.is_permission_denied:
            raise
        role = "none"  # not a collaborator (404), or the token may not ask: never accepted
    if role not in ACCEPTING_ROLES:
        return Acceptance(label, actor, role)
    if trigger.applied(event) or recorded() == (head_sha, actor):
        return Acceptance(label, actor, role, accepted=True)
    return Acceptance(label, actor, role, earlier_commit=True)
