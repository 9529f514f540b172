"""The check run against the GitHub test pr_server; output capped below GitHub's limit."""

from __future__ import annotations

from github_helpers import client_for
from servers.github_server import GitHubServer

from gate.github.checks import CONCLUSION_OF_DECISION, OUTPUT_LIMIT, create_check_run, fit


def test_conclusions_of_decisions() -> None:
    assert CONCLUSION_OF_DECISION == {"pass": "success", "review": "neutral", "block": "failure"}


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
        assert len(run["output"][part]) < OUTPUT_LIMIT
        assert run["output"][part].endswith(
            "(truncated: the full report is in the job summary and the run artifact)"
        )
    assert run["output"]["title"] == "ragproof: block"


def test_fit_keeps_short_text_and_cuts_at_a_line() -> None:
    note = "\n\n… (truncated: the full report is in the job summary and the run artifact)"
    assert fit("short") == "short"
    text = "aaaa\n" * 40  # 200 characters
    assert fit(text, limit=200) == text
    assert fit(text, limit=len(note) + 12) == "aaaa\naaaa" + note
    assert len(fit(text, limit=len(note) + 12)) <= len(note) + 12
