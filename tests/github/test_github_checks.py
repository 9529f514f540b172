"""The check run against the GitHub test pr_server; output capped below GitHub's limit."""

from __future__ import annotations

from github_helpers import client_for
from servers.github_server import GitHubServer

from gate.github.checks import (
    CONCLUSION_OF_DECISION,
    OUTPUT_LIMIT,
    RETRY_LIMIT,
    conclusion_for,
    create_check_run,
    fit,
)


def test_conclusions_of_decisions() -> None:
    # A required check passes on success, neutral and skipped: review must not be neutral.
    assert CONCLUSION_OF_DECISION == {"pass": "success", "review": "action_required", "block": "failure"}
    assert [conclusion_for("review", c) for c in ("action_required", "failure", "neutral")] == [
        "action_required",
        "failure",
        "neutral",
    ]
    assert conclusion_for("block", "neutral") == "failure" and conclusion_for("pass", "failure") == "success"


def test_check_run_is_completed_on_the_head_sha_with_capped_output(pr_server: GitHubServer) -> None:
    long = "| row |\n" * 20_000  # 160,000 characters
    result = create_check_run(
        client_for(pr_server),
        name="ragproof",
        head_sha="a1" * 20,
        conclusion="failure",
        title="ragproof: block",
        summary=long,
        text=long,
    )
    assert result.created
    (run,) = pr_server.state.check_runs
    assert run["head_sha"] == "a1" * 20 and run["status"] == "completed" and run["conclusion"] == "failure"
    for part in ("summary", "text"):
        assert len(run["output"][part].encode()) <= OUTPUT_LIMIT
        assert run["output"][part].endswith(
            "(truncated: the full report is in the job summary and the run artifact)"
        )
    assert run["output"]["title"] == "ragproof: block"


def test_fit_keeps_short_text_and_cuts_at_a_line() -> None:
    note = "\n\n… (truncated: the full report is in the job summary and the run artifact)"
    assert fit("short") == "short"
    text = "aaaa\n" * 40  # 200 characters
    assert fit(text, limit=200) == text
    room = len(note.encode()) + 12  # the note's "…" is 3 bytes
    assert fit(text, limit=room) == "aaaa\naaaa" + note
    assert len(fit(text, limit=room).encode()) <= room


def test_output_is_cut_by_utf8_bytes_not_characters(pr_server: GitHubServer) -> None:
    # 53,058 characters of which most are 2-3 bytes: 85,671 bytes, over GitHub's byte limit.
    line = "| é ✓ ü — ragproof |\n"
    summary = line * (53_058 // len(line))
    assert len(summary) < OUTPUT_LIMIT < len(summary.encode())
    result = create_check_run(
        client_for(pr_server),
        name="ragproof",
        head_sha="a1" * 20,
        conclusion="success",
        title="t",
        summary=summary,
    )
    assert result.created
    (run,) = pr_server.state.check_runs
    sent = run["output"]["summary"]
    assert len(sent.encode()) <= OUTPUT_LIMIT
    assert sent.endswith("(truncated: the full report is in the job summary and the run artifact)")
    assert sent.startswith(line) and sent.split("\n\n… (truncated")[0].endswith("|")  # whole lines only


def test_fit_never_splits_a_character() -> None:
    text = "€" * 100  # 300 bytes, no line break
    cut = fit(text, limit=200)
    assert len(cut.encode()) <= 200 and cut.replace("€", "").startswith("\n\n… (truncated")
    assert fit("€€", limit=5) == "€"  # no room for the note: the cut alone, a whole character


def test_a_422_is_retried_once_with_a_shorter_summary(pr_server: GitHubServer) -> None:
    pr_server.state.fail("POST", r"/check-runs$", 422, message="Invalid request. output.summary is invalid")
    result = create_check_run(
        client_for(pr_server),
        name="ragproof",
        head_sha="a1" * 20,
        conclusion="failure",
        title="ragproof: block",
        summary="x\n" * 30_000,
        text="detail",
    )
    assert result.created
    (run,) = pr_server.state.check_runs
    assert len(run["output"]["summary"].encode()) <= RETRY_LIMIT
    posts = [
        r for r in pr_server.state.requests if r["method"] == "POST" and r["path"].endswith("/check-runs")
    ]
    assert len(posts) == 2
    assert "text" in posts[0]["body"]["output"] and "text" not in posts[1]["body"]["output"]
