"""Fixtures shared by every test module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


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
