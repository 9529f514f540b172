"""The step's exit code (the rest of the flow: test_cli_action.py).

The flow exits as ``ragproof compare`` does for a decision (gate.decision.decide.exit_code_for, tested
in test_decide.py); its own decision ``none`` (a baseline run, no baseline yet, nothing to
gate) never fails the step, whatever ``fail-on`` says.
"""

from __future__ import annotations

import pytest

from gate.github import flow


@pytest.mark.parametrize("fail_on", ["block", "review", "never"])
def test_no_decision_never_fails_the_step(fail_on: str) -> None:
    assert flow.exit_code_for("none", fail_on) == 0
