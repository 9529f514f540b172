"""The check run on the pull request's head commit.

``POST /repos/{owner}/{repo}/check-runs`` with ``status: completed`` and a conclusion:
pass -> success, review -> neutral, block -> failure; no baseline -> neutral. GitHub caps
``output.title``, ``.summary`` and ``.text`` at 65,535 characters each: longer values are cut
at a line boundary below the cap and say so.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from gate.github.client import GitHubAPIError, GitHubClient
from gate.github.models import CheckRun, parse_response

PERMISSION = "checks: write"
OUTPUT_LIMIT = 65_535
_CUT_NOTE = "\n\n… (truncated: the full report is in the job summary and the run artifact)"

Conclusion = Literal["success", "neutral", "failure"]
CONCLUSION_OF_DECISION: dict[str, Conclusion] = {"pass": "success", "review": "neutral", "block": "failure"}


def fit(text: str, limit: int = OUTPUT_LIMIT - 1) -> str:
    """``text`` if shorter than ``limit`` + 1, else cut at a line boundary with a note."""
    if len(text) <= limit:
        return text
    room = limit - len(_CUT_NOTE)
    cut = text.rfind("\n", 0, room)
    return text[: cut if cut > room // 2 else room] + _CUT_NOTE


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
    """Create a completed check run; a token without ``checks: write`` gives ``created=False``."""
    output = {"title": fit(title, 1000), "summary": fit(summary)}
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
    try:
        data = client.call("checks.create", permission=PERMISSION, **params)
    except GitHubAPIError as exc:
        if exc.status == 403 and not exc.rate_limited:
            return CheckResult(None, False, str(exc))
        raise
    return CheckResult(parse_response(CheckRun, data, "check run").html_url, True)
