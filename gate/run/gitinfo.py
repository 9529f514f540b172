"""The git commit and ref a run was made from.

In GitHub Actions ``GITHUB_SHA`` and ``GITHUB_REF`` name them; elsewhere ``git rev-parse`` in
the working directory does. Outside a repository (or without git) both are None.
"""

from __future__ import annotations

import subprocess

from gate.core.environment import Environment
from gate.model.artifact import GitInfo

GIT_TIMEOUT_S = 5.0


def _git(env: Environment, *args: str) -> str | None:
    try:
        proc = subprocess.run(
            ["git", *args],
            cwd=env.cwd,
            env=dict(env.variables),
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    out = proc.stdout.strip()
    return out if proc.returncode == 0 and out else None


def git_info(env: Environment) -> GitInfo:
    """Commit and ref from the Actions environment, else from ``git rev-parse``."""
    commit = env.get("GITHUB_SHA") or None
    ref = env.get("GITHUB_REF") or None
    if commit is None:
        commit = _git(env, "rev-parse", "HEAD")
    if ref is None:
        ref = _git(env, "symbolic-ref", "-q", "HEAD")  # None on a detached HEAD
    return GitInfo(commit=commit, ref=ref)
