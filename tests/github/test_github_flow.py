"""The step's exit code and the checkout's commit (the rest of the flow: tests/commands/).

The flow exits as ``ragproof compare`` does for a decision (gate.decision.decide.exit_code_for, tested
in test_decide.py), except that a red check is a red step: beside a check that concludes failure
or ``action_required`` the step never exits 0, whatever ``fail-on`` says (``none`` included);
a ``none`` with no red check (a baseline run, no baseline yet, nothing to gate) passes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gate.decision.decide import exit_code_for
from gate.github import plan
from gate.github.checks import ReviewConclusion, conclusion_for, step_exit_code


@pytest.mark.parametrize("fail_on", ["block", "review", "never"])
@pytest.mark.parametrize("decision", ["pass", "review", "block", "none"])
@pytest.mark.parametrize("review", ["action_required", "failure", "neutral"])
def test_a_red_check_is_a_red_step(fail_on: str, decision: str, review: ReviewConclusion) -> None:
    conclusion = conclusion_for(decision, review)
    code = step_exit_code(exit_code_for(decision, fail_on), conclusion)
    if conclusion in ("failure", "action_required"):
        assert code == 1
    else:
        assert code == exit_code_for(decision, fail_on)
    assert step_exit_code(3, "failure") == 3  # a more specific code stays
    assert step_exit_code(0, "neutral") == 0 and step_exit_code(0, "success") == 0


def _git(cwd: Path, *args: str) -> str:
    import os
    import subprocess

    env = {
        "PATH": os.environ["PATH"],
        "HOME": "/nonexistent",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "dev",
        "GIT_AUTHOR_EMAIL": "dev@example.com",
        "GIT_COMMITTER_NAME": "dev",
        "GIT_COMMITTER_EMAIL": "dev@example.com",
    }
    return subprocess.run(
        ["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=True
    ).stdout.strip()


def test_checkout_head_reads_what_git_rev_parse_says(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    assert plan.checkout_head(repo) is None  # not a checkout
    _git(repo, "init", "-q", "-b", "main")
    (repo / "a.txt").write_text("a")
    _git(repo, "add", "a.txt")
    _git(repo, "commit", "-q", "-m", "one")
    first = _git(repo, "rev-parse", "HEAD")
    assert plan.checkout_head(repo) == first  # ref: refs/heads/main, a loose ref
    _git(repo, "pack-refs", "--all")
    assert not (repo / ".git" / "refs" / "heads" / "main").exists()
    assert plan.checkout_head(repo) == first  # through packed-refs
    _git(repo, "commit", "-q", "--allow-empty", "-m", "two")
    second = _git(repo, "rev-parse", "HEAD")
    _git(repo, "checkout", "-q", "--detach", first)  # as actions/checkout leaves a sha
    assert plan.checkout_head(repo) == first
    _git(repo, "worktree", "add", "-q", "--detach", str(tmp_path / "wt"), second)
    assert (tmp_path / "wt" / ".git").is_file()
    assert plan.checkout_head(tmp_path / "wt") == second  # a .git file pointing at the gitdir
