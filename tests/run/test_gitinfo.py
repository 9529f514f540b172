"""The commit and ref recorded in run.json."""

from __future__ import annotations

import subprocess
from pathlib import Path

from gate.core.environment import Environment
from gate.run.gitinfo import git_info


def test_actions_variables_win(tmp_path: Path) -> None:
    env = Environment(variables={"GITHUB_SHA": "f" * 40, "GITHUB_REF": "refs/heads/main"}, cwd=tmp_path)
    info = git_info(env)
    assert info.commit == "f" * 40 and info.ref == "refs/heads/main"


def test_git_rev_parse_in_a_repository(tmp_path: Path) -> None:
    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=tmp_path, check=True, capture_output=True, text=True
        ).stdout.strip()

    git("init", "-q", "-b", "trunk")
    (tmp_path / "f").write_text("x")
    git("add", "f")
    git("-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "c")
    info = git_info(Environment(variables={"PATH": "/usr/bin:/bin"}, cwd=tmp_path))
    assert info.commit == git("rev-parse", "HEAD") and info.ref == "refs/heads/trunk"


def test_outside_a_repository_both_are_none(tmp_path: Path) -> None:
    info = git_info(Environment(variables={"GIT_CEILING_DIRECTORIES": str(tmp_path.parent)}, cwd=tmp_path))
    assert info.commit is None and info.ref is None
