"""The step's exit code per decision and fail-on level (the rest of the flow: test_cli_action.py)."""

from __future__ import annotations

import pytest

from gate.github.flow import exit_code_for


@pytest.mark.parametrize(
    ("decision", "fail_on", "code"),
    [
        ("pass", "block", 0),
        ("review", "block", 0),
        ("block", "block", 1),
        ("pass", "review", 0),
        ("review", "review", 1),
        ("block", "review", 1),
        ("block", "never", 0),
        ("review", "never", 0),
        ("none", "review", 0),
    ],
)
def test_exit_code_per_fail_on(decision: str, fail_on: str, code: int) -> None:
    assert exit_code_for(decision, fail_on) == code
