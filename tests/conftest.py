"""Fixtures shared by every test module: the test servers on 127.0.0.1, the golden-file switch.

``python -m pytest --update-golden`` rewrites the golden files (and the README's screenshot of
the demo's comment) from what the code renders now; review the diff before committing it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from github_helpers import pull_request_server
from hypothesis import settings
from servers.github_server import GitHubServer
from servers.judge_server import JudgeServer

# Hypothesis's per-example deadline is a wall-clock bound: on a loaded 2-core machine a slow
# example says nothing about the code, so properties are checked without one.
settings.register_profile("ragproof", deadline=None)
settings.load_profile("ragproof")

# Files the tests create stand for files a GitHub runner creates (the workspace, the
# file-command files, an installed ragproof), which its umask 022 leaves writable by their owner
# only. A checkout or shell with umask 000 would make them writable by the sandbox user, and
# the attack tests would then measure the machine, not ragproof.
os.umask(0o022)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-golden",
        action="store_true",
        default=False,
        help="rewrite golden files and the README screenshot from the current output",
    )


@pytest.fixture
def update_golden(request: pytest.FixtureRequest) -> bool:
    """True under ``--update-golden``: a golden test writes what it rendered instead of comparing."""
    return bool(request.config.getoption("--update-golden"))


@pytest.fixture
def pr_server() -> Iterator[GitHubServer]:
    """The GitHub API test server holding one open pull request (see github_helpers)."""
    with pull_request_server() as srv:
        yield srv


@pytest.fixture
def judge_server() -> Iterator[JudgeServer]:
    """An OpenAI-compatible judge test server with its default responder."""
    with JudgeServer() as srv:
        yield srv


@pytest.fixture(autouse=True)
def github_api_contract() -> Iterator[None]:
    """Every request to the GitHub API test server, and every response it sent, matched
    GitHub's OpenAPI description (tests/servers/github_contract.py); else the test fails."""
    from servers import github_server

    yield
    violations: list[str] = []
    for server in list(github_server.STARTED):
        with server.state.lock:
            violations += server.state.contract_violations
            server.state.contract_violations.clear()
    github_server.STARTED.clear()
    if violations:
        shown = "\n".join(dict.fromkeys(violations))
        pytest.fail(f"the GitHub API contract was broken ({len(violations)}):\n{shown}", pytrace=False)
