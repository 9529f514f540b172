"""Judge cost: prices, running totals and the budget check made before every call.

cost(call) = input_tokens * input_cost_per_mtok / 1e6 + output_tokens * output_cost_per_mtok / 1e6

A price that is not configured counts as 0 (a local model). Before a call, the budget
(``max_cost_usd``) is compared with spent + reserved + this call's projected cost, where the
projection counts the prompt at 4 characters per token plus the task's expected reply size
(:data:`EXPECTED_OUTPUT_TOKENS`). The projection is reserved while the call is in flight, so
concurrent calls cannot jointly overrun the budget, and replaced by the real cost afterwards.
"""

from __future__ import annotations

import threading

from gate.core.errors import BudgetExceeded, UsageError
from gate.model.artifact import CostInfo
from gate.model.config import JudgeConfig

# Typical reply sizes in tokens (a verdict with a one-sentence reason; a list of claims).
EXPECTED_OUTPUT_TOKENS: dict[str, int] = {
    "claims": 250,
    "faithfulness": 250,
    "context_recall": 250,
    "citation_support": 120,
    "context_relevance": 120,
    "answer_relevance": 60,
    "completeness": 60,
    "refusal": 50,
}


def call_cost(config: JudgeConfig, input_tokens: int, output_tokens: int) -> float:
    """USD for one call at the configured prices (unset prices count as 0)."""
    return (
        input_tokens * (config.input_cost_per_mtok or 0.0)
        + output_tokens * (config.output_cost_per_mtok or 0.0)
    ) / 1_000_000


def check_budget_configuration(config: JudgeConfig) -> None:
    """A budget without prices cannot be enforced: refuse it rather than ignore it."""
    if (
        config.max_cost_usd is not None
        and config.input_cost_per_mtok is None
        and config.output_cost_per_mtok is None
    ):
        raise UsageError(
            "judge.max_cost_usd (RAGPROOF_MAX_COST_USD) is set but no price is: set "
            "RAGPROOF_JUDGE_INPUT_COST_PER_MTOK and RAGPROOF_JUDGE_OUTPUT_COST_PER_MTOK"
        )


class CostMeter:
    """Thread-safe totals of judge calls, tokens and dollars, with the budget check."""

    def __init__(self, config: JudgeConfig) -> None:
        self.config = config
        self._lock = threading.Lock()
        self._reserved = 0.0
        self._totals = CostInfo()

    def reserve(self, projected_input_tokens: int, projected_output_tokens: int) -> float:
        """Reserve a call's projected cost; raises BudgetExceeded when it would overrun the budget."""
        projected = call_cost(self.config, projected_input_tokens, projected_output_tokens)
        with self._lock:
            limit = self.config.max_cost_usd
            if limit is not None and self._totals.usd + self._reserved + projected > limit:
                raise BudgetExceeded(
                    f"judge budget of ${limit:.4f} (RAGPROOF_MAX_COST_USD) reached: ${self._totals.usd:.4f} "
                    f"spent, next call projected at ${projected:.4f}"
                )
            self._reserved += projected
        return projected

    def settle(self, reserved: float, input_tokens: int, output_tokens: int, estimated: bool) -> None:
        """Replace a reservation by the call's actual usage."""
        with self._lock:
            self._reserved -= reserved
            t = self._totals
            t.usd += call_cost(self.config, input_tokens, output_tokens)
            t.input_tokens += input_tokens
            t.output_tokens += output_tokens
            t.judge_calls += 1
            t.estimated = t.estimated or estimated

    def release(self, reserved: float) -> None:
        """Drop a reservation for a call that failed before any usage was reported."""
        with self._lock:
            self._reserved -= reserved

    def count_cache_hit(self) -> None:
        with self._lock:
            self._totals.cache_hits += 1

    def snapshot(self) -> CostInfo:
        with self._lock:
            return self._totals.model_copy()
