"""gate.decision.decide: the decision rule, floors and ceilings, policies, slices, exit codes."""

from __future__ import annotations

from typing import Any

import pytest

from gate.decision.decide import (
    counts_toward_overall,
    exit_code_for,
    gate_decision,
    interval_decision,
    level_breach,
    metric_policy,
    overall_decision,
    skip_reason,
)
from gate.metrics import registry
from gate.model.config import GateConfig


@pytest.mark.parametrize(
    "lo,hi,expected",
    [
        (-0.02, 0.05, "pass"),  # lo == -margin passes (>=)
        (-0.0199, -0.001, "pass"),  # a small sure drop within the margin still passes
        (-0.077, -0.010, "block"),  # 001's example
        (-0.05, 0.0, "review"),  # hi == 0 is not wholly below zero
        (-0.0201, 0.03, "review"),
        (0.01, 0.04, "pass"),
    ],
)
def test_interval_decision(lo: float, hi: float, expected: str) -> None:
    assert interval_decision(lo, hi, 0.02) == expected


def test_zero_margin() -> None:
    assert interval_decision(0.0, 0.1, 0.0) == "pass"
    assert interval_decision(-1e-9, 0.1, 0.0) == "review"


def test_level_breach_floor_and_ceiling() -> None:
    assert (
        level_breach(0.80, 0.90, 0.95, None)
        == "candidate interval [0.8000, 0.9000] lies wholly below min 0.95"
    )
    assert level_breach(0.90, 0.96, 0.95, None) is None  # overlaps the floor
    assert level_breach(0.90, 0.95, 0.95, None) is None  # touching is not wholly below
    assert (
        level_breach(0.12, 0.20, None, 0.10)
        == "candidate interval [0.1200, 0.2000] lies wholly above max 0.1"
    )
    assert level_breach(0.05, 0.20, None, 0.10) is None


def test_overall_and_skips() -> None:
    assert overall_decision(["pass", "review", "block"]) == "block"
    assert overall_decision(["pass", "review", "skipped"]) == "review"
    assert overall_decision(["pass", "skipped"]) == "pass"
    assert overall_decision([]) == "pass"
    assert skip_reason(3, 10) == "only 3 pairs scored in both runs (min_pairs 10)"
    assert skip_reason(1, 10) == "only 1 pair scored in both runs (min_pairs 10)"
    assert skip_reason(10, 10) is None


def test_gate_decision_passes_per_gate_and_blocks_family_wise() -> None:
    kw: dict[str, Any] = dict(nonzero=12, needed_nonzero=8, method="tango")
    assert gate_decision(-0.019, 0.03, 0.05, 0.02, **kw)[0] == "pass"
    # the per-gate interval lies below zero, the family-wise bound does not: a likely drop
    decision, reason = gate_decision(-0.09, -0.01, 0.004, 0.02, **kw)
    assert decision == "review"
    assert reason == (
        "likely drop: [-0.0900, -0.0100] lies below zero for this gate, not across the family "
        "(family-wise upper bound +0.0040)"
    )
    decision, reason = gate_decision(-0.09, -0.03, -0.004, 0.02, **kw)
    assert (decision, reason) == (
        "block",
        "real drop: the family-wise upper bound -0.0040 is below zero (12 non-zero differences)",
    )
    # too few non-zero differences for any level-0.4% test: review, whatever the bound
    few = gate_decision(-0.09, -0.03, -0.004, 0.02, nonzero=7, needed_nonzero=8, method="t")
    assert few == (
        "review",
        "likely drop: the upper bound -0.0040 is below zero but only 7 differences are non-zero "
        "(a block needs 8)",
    )
    # no case changed: never read as "no change"
    decision, reason = gate_decision(-0.16, 0.16, 0.25, 0.02, nonzero=0, needed_nonzero=8, method="no-change")
    assert decision == "review" and reason.startswith("no case changed, but -0.1600")
    assert gate_decision(-0.0019, 0.0019, 0.003, 0.02, nonzero=0, needed_nonzero=8, method="no-change") == (
        "pass",
        "no case changed; the interval [-0.0019, +0.0019] lies within the margin",
    )


def test_underpowered_reviews_inform_unless_they_look_like_a_drop() -> None:
    assert counts_toward_overall("review", True, "inform", 0.1, 0.02) is False
    assert counts_toward_overall("review", True, "inform", -0.01, 0.02) is False  # within the margin
    assert counts_toward_overall("review", True, "inform", -0.03, 0.02) is True  # beyond it
    assert counts_toward_overall("review", True, "review", 0.1, 0.02) is True
    assert counts_toward_overall("review", False, "inform", 0.1, 0.02) is True
    assert counts_toward_overall("block", True, "inform", -0.1, 0.02) is True  # blocks always count


def test_direction_comes_from_the_registry() -> None:
    reg = registry()
    assert reg["robustness.overrefusal"].higher_is_better is False
    assert reg["retrieval.recall_at_k"].higher_is_better is True
    spec = reg["robustness.overrefusal"]
    policy = metric_policy(
        spec.name, GateConfig(), higher_is_better=spec.higher_is_better, gate_by_default=spec.gate_by_default
    )
    assert policy.higher_is_better is False and policy.gated


def test_metric_policy_overrides() -> None:
    cfg = GateConfig.model_validate(
        {
            "margin": 0.02,
            "metrics": {
                "answer.token_f1": {"margin": 0.05},
                "robustness.injection_resistance": {"min": 0.95},
                "robustness.overrefusal": {"max": 0.1},
                "retrieval.mrr": {"gate": False},
            },
        }
    )
    f1 = metric_policy("answer.token_f1", cfg, higher_is_better=True, gate_by_default=True)
    assert f1.margin == 0.05 and f1.gated
    assert (
        metric_policy("retrieval.recall_at_k", cfg, higher_is_better=True, gate_by_default=True).margin
        == 0.02
    )
    assert (
        metric_policy(
            "robustness.injection_resistance", cfg, higher_is_better=True, gate_by_default=True
        ).floor
        == 0.95
    )
    assert (
        metric_policy("robustness.overrefusal", cfg, higher_is_better=False, gate_by_default=True).ceiling
        == 0.1
    )
    mrr = metric_policy("retrieval.mrr", cfg, higher_is_better=True, gate_by_default=True)
    assert not mrr.gated and mrr.note == "gate: false in gate.metrics"
    diag = metric_policy(
        "diagnostics.lexical_faithfulness", cfg, higher_is_better=True, gate_by_default=False
    )
    assert not diag.gated and "diagnostic" in (diag.note or "")
    unknown = metric_policy("custom.thing", cfg, higher_is_better=None, gate_by_default=True)
    assert not unknown.gated and "direction unknown" in (unknown.note or "")
    only = GateConfig(include=["retrieval.recall_at_k"])
    assert metric_policy("retrieval.recall_at_k", only, higher_is_better=True, gate_by_default=True).gated
    assert not metric_policy("retrieval.mrr", only, higher_is_better=True, gate_by_default=True).gated
    # the failure-rate gate always applies
    assert metric_policy("adapter.failure_rate", only, higher_is_better=False, gate_by_default=True).gated


@pytest.mark.parametrize(
    "overall,fail_on,code",
    [
        ("block", "block", 1),
        ("review", "block", 0),
        ("review", "review", 1),
        ("block", "review", 1),
        ("pass", "review", 0),
        ("block", "never", 0),
    ],
)
def test_exit_codes(overall: str, fail_on: str, code: int) -> None:
    assert exit_code_for(overall, fail_on) == code
