"""The step's exit code (the rest of the flow: test_cli_action.py).

The flow exits as ``ragproof compare`` does for a decision (gate.decision.decide.exit_code_for, tested
in test_decide.py); its own decision ``none`` (a baseline run, no baseline yet, nothing to
gate) never fails the step, whatever ``fail-on`` says.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gate.decision.decide import exit_code_for
from gate.github import flow


@pytest.mark.parametrize("fail_on", ["block", "review", "never"])
def test_no_decision_never_fails_the_step(fail_on: str) -> None:
    assert exit_code_for("none", fail_on) == 0


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
    assert flow.checkout_head(repo) is None  # not a checkout
    _git(repo, "init", "-q", "-b", "main")
    (repo / "a.txt").write_text("a")
    _git(repo, "add", "a.txt")
    _git(repo, "commit", "-q", "-m", "one")
    first = _git(repo, "rev-parse", "HEAD")
    assert flow.checkout_head(repo) == first  # ref: refs/heads/main, a loose ref
    _git(repo, "pack-refs", "--all")
    assert not (repo / ".git" / "refs" / "heads" / "main").exists()
    assert flow.checkout_head(repo) == first  # through packed-refs
    _git(repo, "commit", "-q", "--allow-empty", "-m", "two")
    second = _git(repo, "rev-parse", "HEAD")
    _git(repo, "checkout", "-q", "--detach", first)  # as actions/checkout leaves a sha
    assert flow.checkout_head(repo) == first
    _git(repo, "worktree", "add", "-q", "--detach", str(tmp_path / "wt"), second)
    assert (tmp_path / "wt" / ".git").is_file()
    assert flow.checkout_head(tmp_path / "wt") == second  # a .git file pointing at the gitdir
