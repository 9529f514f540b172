"""Where the run store and the judge cache live in the action: never a path a commit controls."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Protocol

from gate.boundary.files import open_directory
from gate.core.environment import Environment


class _StoreInput(Protocol):
    @property
    def store_dir(self) -> str | None: ...


class Checkout(Protocol):
    """What the store's placement reads of the action's context (gate.github.context, a
    later stage, satisfies it)."""

    @property
    def workspace(self) -> Path: ...

    @property
    def inputs(self) -> _StoreInput: ...

    def workspace_path(self, relative: str) -> Path: ...


def store_directory(ctx: Checkout, env: Environment) -> Path:
    """Where the run store and judge cache live: the ``store-dir`` input (a directory the
    workflow restored, which must hold no file of the checkout), else a fresh directory under
    ``RUNNER_TEMP``. Never a path the pull request's checkout controls."""
    import subprocess
    import tempfile

    from gate.core.errors import UsageError

    workspace = ctx.workspace
    given = ctx.inputs.store_dir
    if given:
        path = ctx.workspace_path(given)
        inside = path.resolve().is_relative_to(workspace.resolve())
        if inside:
            try:
                tracked = subprocess.run(
                    ["git", "-c", f"safe.directory={workspace}", "ls-files", "--", str(path)],
                    cwd=workspace,
                    capture_output=True,
                    text=True,
                    timeout=60,
                    check=False,
                    env={
                        "PATH": env.get("PATH") or "/usr/bin:/bin",
                        "GIT_CONFIG_NOSYSTEM": "1",
                        "HOME": "/nonexistent",
                    },
                )
            except OSError:
                raise UsageError(
                    f"input store-dir ({given}): inside the workspace, and git is not available to show "
                    "that no file of the checkout is in it; restore the store outside the workspace "
                    "(in the container: under /github/home, which is the runner's "
                    "${{ runner.temp }}/_github_home)"
                ) from None
            if tracked.returncode == 0 and tracked.stdout.strip():
                first = tracked.stdout.splitlines()[0]
                raise UsageError(
                    f"input store-dir ({given}): holds {first}, a file of the checkout; the store must be a "
                    "directory the workflow restored (e.g. with actions/cache), never one a commit can fill"
                )
        os.close(open_directory(path))  # created through descriptors: no link, nothing the pipeline may write
        return path
    root = env.get("RUNNER_TEMP")
    if root:
        Path(root).mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix="ragproof-store-", dir=root or None))
