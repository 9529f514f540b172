"""gate.decision.decide: the decision rule, floors and ceilings, policies, slices, exit codes."""

from __future__ import annotations

from typing import Any

import pytest

from gate.decision.decide import (
    GateCause,
    counts_toward_overall,
    exit_code_for,
    gate_decision,
    level_breach,
    metric_policy,
    review_weights,
    skip_reason,
)
from gate.metrics import registry
from gate.model.config import GateConfig


@pytest.mark.parametrize(
    "lo,hi,expected",
    [
        (-0.02, 0.05, "pass"),  # lo == -margin passes (>=)
        (-0.0199, -0.001, "pass"),  # a small sure drop within the margin still passes
        (-0.077, -0.010, "block"),  # the family-wise bound (here the interval itself) below zero
        (-0.05, 0.0, "review"),  # hi == 0 is not wholly below zero
        (-0.0201, 0.03, "review"),
        (0.01, 0.04, "pass"),
    ],
)
def test_interval_rule(lo: float, hi: float, expected: str) -> None:
    assert gate_decision(lo, hi, hi, 0.02, nonzero=20, needed_nonzero=6, method="t")[0] == expected


def test_zero_margin() -> None:
    assert gate_decision(0.0, 0.1, 0.1, 0.0, nonzero=20, needed_nonzero=6, method="t")[0] == "pass"
    assert gate_decision(-1e-9, 0.1, 0.1, 0.0, nonzero=20, needed_nonzero=6, method="t")[0] == "review"


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


def test_skips() -> None:
    assert skip_reason(3, 10) == "only 3 pairs scored in both runs (min_pairs 10)"
    assert skip_reason(1, 10) == "only 1 pair scored in both runs (min_pairs 10)"
    assert skip_reason(10, 10) is None


def test_gate_decision_passes_per_gate_blocks_family_wise_and_reviews_confirmed_drops() -> None:
    kw: dict[str, Any] = dict(nonzero=12, needed_nonzero=8, method="tango", n=200, pairs_needed=1067)
    assert gate_decision(-0.019, 0.03, 0.05, 0.02, **kw)[0] == "pass"
    assert gate_decision(-0.015, -0.001, 0.05, 0.02, **kw) == (
        "pass",
        "worse within the margin: [-0.0150, -0.0010] lies below zero and above -margin -0.0200",
    )
    # the per-gate interval lies below zero, the family-wise bound does not, the family's
    # false-discovery rule does not confirm it: worse on its own evidence
    assert gate_decision(-0.09, -0.01, 0.004, 0.02, p_value=0.01, threshold=0.004, **kw) == (
        "review",
        "worse on its own evidence: [-0.0900, -0.0100] lies wholly below zero; "
        "not confirmed over the family (p = 0.01 > 0.004)",
    )
    assert gate_decision(-0.09, -0.01, 0.004, 0.02, p_value=0.003, threshold=0.004, **kw) == (
        "review",
        "drop confirmed over the family: p = 0.003 ≤ 0.004 (weighted Benjamini-Hochberg), "
        "interval [-0.0900, -0.0100]",
    )
    # wholly below -margin: "dropped by more than the margin", never "inconclusive", no pairs_needed
    assert gate_decision(-0.695, -0.101, 0.1, 0.02, p_value=0.02, threshold=0.001, **kw) == (
        "review",
        "dropped by more than the margin: [-0.6950, -0.1010] lies wholly below -margin; "
        "not confirmed over the family (p = 0.02 > 0.001)",
    )
    assert gate_decision(-0.09, -0.03, -0.004, 0.02, **kw) == (
        "block",
        "real drop: the family-wise upper bound -0.0040 is below zero (12 non-zero differences)",
    )
    # too few non-zero differences for a block at the family's level: not a block
    few = gate_decision(-0.09, -0.03, -0.004, 0.02, **{**kw, "nonzero": 7})
    assert few[0] == "review" and few[1].startswith("dropped by more than the margin")
    # inconclusive only when the interval straddles -margin; the pairs needed when short of them
    assert gate_decision(-0.09, 0.05, 0.1, 0.02, p_value=0.4, threshold=0.001, **kw) == (
        "review",
        "inconclusive: [-0.0900, +0.0500] reaches below -margin -0.0200 and above zero; "
        "1067 pairs needed to pass at margin 0.02",
    )
    # no case changed: never read as "no change"
    decision, reason = gate_decision(
        -0.16, 0.16, 0.25, 0.02, nonzero=0, needed_nonzero=8, method="no-change", n=20, pairs_needed=189
    )
    assert (decision, reason) == (
        "review",
        "no case changed, but 20 pairs only rule out drops larger than 0.1600; 189 pairs needed to pass "
        "at margin 0.02",
    )
    assert gate_decision(-0.0019, 0.0019, 0.003, 0.02, nonzero=0, needed_nonzero=8, method="no-change") == (
        "pass",
        "no case changed; the interval [-0.0019, +0.0019] lies within the margin",
    )


def test_only_confirmed_reviews_count_unless_underpowered_review() -> None:
    for cause in (
        GateCause.STRADDLES_MARGIN,
        GateCause.WORSE_ON_OWN_EVIDENCE,
        GateCause.DROPPED_BEYOND_MARGIN,
    ):
        assert counts_toward_overall("review", cause, "inform") is False
        assert counts_toward_overall("review", cause, "review") is True
    assert counts_toward_overall("review", GateCause.DROP_CONFIRMED, "inform") is True
    assert counts_toward_overall("block", GateCause.DROPPED_FAMILY_WISE, "inform") is True
    assert counts_toward_overall("pass", GateCause.PASSED_ON_EVIDENCE, "inform") is True
    assert counts_toward_overall("skipped", GateCause.TOO_FEW_PAIRS, "review") is False
    assert counts_toward_overall("pass", GateCause.NOT_GATING, "review") is False


def test_review_weights_give_the_all_gates_half() -> None:
    w = review_weights([True, True, False, False, False, False, False, False])
    assert w.tolist() == [2.0, 2.0, 2 / 3, 2 / 3, 2 / 3, 2 / 3, 2 / 3, 2 / 3]
    assert w.mean() == pytest.approx(1.0)
    assert review_weights([True, True]).tolist() == [1.0, 1.0]
    assert review_weights([]).size == 0


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
