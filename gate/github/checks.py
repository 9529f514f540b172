"""The check run on the commit that was evaluated.

``POST /repos/{owner}/{repo}/check-runs`` with ``status: completed`` and a conclusion:
pass -> success, review -> ``action_required`` by default (a required check counts
``success``, ``neutral`` and ``skipped`` as passing, so ``review`` must not be neutral unless
the workflow says so: input ``review-conclusion``), block -> failure; no baseline -> neutral
(nothing to protect yet); a result accepted by a maintainer -> success. A red check is a red
step: :func:`step_exit_code` fails the step whenever the check concludes failure or
``action_required``, whatever ``fail-on`` says (a ``none`` decision included).

GitHub caps ``output.summary`` and ``.text`` at 65,535 **bytes** each (UTF-8; a report with
non-ASCII text can be far longer in bytes than in characters): longer values are cut at a
line boundary below the cap, never inside a character, and say so. Should GitHub still refuse
the output (422), the check is created once more with a summary a quarter of that size.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from gate.core.errors import EXIT_FAILED, EXIT_OK
from gate.github.client import GitHubAPIError, GitHubClient
from gate.github.models import CheckRun, parse_response

PERMISSION = "checks: write"
OUTPUT_LIMIT = 65_535  # bytes of UTF-8, per output field
RETRY_LIMIT = OUTPUT_LIMIT // 4
TITLE_LIMIT = 1_000
_CUT_NOTE = "\n\n… (truncated: the full report is in the job summary and the run artifact)"

Conclusion = Literal["success", "neutral", "failure", "action_required"]
ReviewConclusion = Literal["action_required", "failure", "neutral"]
CONCLUSION_OF_DECISION: dict[str, Conclusion] = {
    "pass": "success",
    "review": "action_required",
    "block": "failure",
}


def conclusion_for(decision: str, review: ReviewConclusion = "action_required") -> Conclusion:
    """The check conclusion of a gate decision; ``review`` maps to the configured one, and so
    does ``none`` (nothing could be compared is no pass: a person looks)."""
    return review if decision in ("review", "none") else CONCLUSION_OF_DECISION[decision]


RED_CONCLUSIONS: frozenset[Conclusion] = frozenset({"failure", "action_required"})


def step_exit_code(exit_code: int, conclusion: Conclusion) -> int:
    """The step's exit code beside a check of ``conclusion``: ``exit_code`` (by ``fail-on``), but
    never 0 beside a red check (failure or ``action_required``): then 1 (EXIT_FAILED), so a
    workflow's later steps and its own status never read as green what the check reads as red."""
    return EXIT_FAILED if exit_code == EXIT_OK and conclusion in RED_CONCLUSIONS else exit_code


def utf8_len(text: str) -> int:
    return len(text.encode("utf-8"))


def fit(text: str, limit: int = OUTPUT_LIMIT) -> str:
    """``text`` if at most ``limit`` UTF-8 bytes, else cut at a line boundary with a note.

    The cut is made on the encoded bytes and decoded with ``errors="ignore"``, so a character
    split by the cut is dropped whole; the result (note included) is at most ``limit`` bytes.
    A line boundary is used when one lies in the second half of the room, else the raw cut;
    a ``limit`` too small for the note gets the cut alone.
    """
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    note = _CUT_NOTE if utf8_len(_CUT_NOTE) < limit else ""  # no room for the note: cut only
    room = limit - utf8_len(note)
    cut = data.rfind(b"\n", 0, room)
    return data[: cut if cut > room // 2 else room].decode("utf-8", errors="ignore") + note


def app_of(author: str) -> str:
    """The GitHub App slug behind a bot login (``github-actions[bot]`` -> ``github-actions``): the
    app whose token creates our check runs."""
    return author.removesuffix("[bot]")


def own_check_runs(client: GitHubClient, *, name: str, head_sha: str, author: str) -> Iterator[CheckRun]:
    """The check runs called ``name`` on ``head_sha`` created with the token of ``author``'s app
    (every page): the ones ragproof posted. A pull request's code cannot create check runs (a
    fork's token is read-only), and another app's cannot pass for ours."""
    for item in client.paginate(
        "checks.list_for_ref",
        permission="checks: read",
        item_key="check_runs",
        ref=head_sha,
        check_name=name,
        filter="all",
    ):
        check = parse_response(CheckRun, item, f"check runs of {head_sha[:7]}")
        app = check.app.slug if check.app is not None else None
        if check.name == name and check.head_sha == head_sha and app == app_of(author):
            yield check


@dataclass(frozen=True)
class CheckResult:
    url: str | None
    created: bool
    message: str | None = None


def create_check_run(
    client: GitHubClient,
    *,
    name: str,
    head_sha: str,
    conclusion: Conclusion,
    title: str,
    summary: str,
    text: str | None = None,
    details_url: str | None = None,
) -> CheckResult:
    """Create a completed check run; a token without ``checks: write`` gives ``created=False``.

    A 422 (GitHub refusing the output) is answered by one more attempt with the summary cut to
    :data:`RETRY_LIMIT` bytes and no text, so the check is still created.
    """
    output = {"title": fit(title, TITLE_LIMIT), "summary": fit(summary)}
    if text:
        output["text"] = fit(text)
    params: dict[str, object] = {
        "name": name,
        "head_sha": head_sha,
        "status": "completed",
        "conclusion": conclusion,
        "completed_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "output": output,
    }
    if details_url:
        params["details_url"] = details_url
    for attempt in range(2):
        try:
            data = client.call("checks.create", permission=PERMISSION, **params)
        except GitHubAPIError as exc:
            if exc.status == 403 and not exc.rate_limited:
                return CheckResult(None, False, str(exc))
            if exc.status == 422 and attempt == 0:
                params["output"] = {"title": output["title"], "summary": fit(summary, RETRY_LIMIT)}
                continue
            raise
        return CheckResult(parse_response(CheckRun, data, "check run").html_url, True)
    raise AssertionError("unreachable: the second attempt returns or raises")
