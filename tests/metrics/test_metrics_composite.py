"""composite.trust: weighted arithmetic and geometric aggregates with undefined components dropped."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from metric_helpers import defined, make_case, make_output, score

from gate.metrics.base import ScoringContext
from gate.metrics.composite import REASON_NO_COMPONENT, REASON_NO_WEIGHTS, aggregate
from gate.model.records import MetricResult

GOLDEN_VALUES = {"faithfulness": 0.05, "attribution": 0.9, "relevance": 0.9, "conciseness": 0.95}
GOLDEN_WEIGHTS = {"faithfulness": 0.4, "attribution": 0.2, "relevance": 0.2, "conciseness": 0.2}


def test_golden_arithmetic_and_geometric() -> None:
    out = aggregate(GOLDEN_VALUES, GOLDEN_WEIGHTS)
    assert out is not None
    arithmetic, geometric = out
    assert round(arithmetic, 4) == 0.5700
    assert round(geometric, 4) == 0.2863


def test_undefined_component_is_dropped_and_weights_renormalised() -> None:
    values = {**GOLDEN_VALUES, "faithfulness": None}
    out = aggregate(values, GOLDEN_WEIGHTS)
    assert out is not None
    arithmetic, geometric = out
    assert arithmetic == pytest.approx((0.9 + 0.9 + 0.95) / 3, abs=1e-15)
    assert geometric == pytest.approx((0.9 * 0.9 * 0.95) ** (1 / 3), abs=1e-15)
    missing = dict(GOLDEN_VALUES)
    del missing["faithfulness"]
    assert aggregate(missing, GOLDEN_WEIGHTS) == aggregate(values, GOLDEN_WEIGHTS)


def test_zero_component_makes_the_geometric_zero_and_none_defined_is_none() -> None:
    assert aggregate({"a": 0.0, "b": 1.0}, {"a": 1.0, "b": 1.0}) == (0.5, 0.0)
    assert aggregate({"a": None}, {"a": 1.0}) is None
    assert aggregate({}, {"a": 1.0}) is None


@given(
    st.lists(
        st.tuples(st.floats(0, 1), st.floats(0.01, 10) | st.just(1.0), st.booleans()),
        min_size=1,
        max_size=6,
    )
)
def test_geometric_never_exceeds_arithmetic(parts: list[tuple[float, float, bool]]) -> None:
    values = {f"m{i}": (v if defined else None) for i, (v, _, defined) in enumerate(parts)}
    weights = {f"m{i}": w for i, (_, w, _) in enumerate(parts)}
    out = aggregate(values, weights)
    if not any(defined for *_, defined in parts):
        assert out is None
        return
    assert out is not None
    arithmetic, geometric = out
    assert 0.0 <= geometric <= arithmetic + 1e-12 <= 1.0 + 1e-12


def _ctx(results: dict[str, MetricResult] | None, weights: dict[str, float] | None) -> ScoringContext:
    return ScoringContext(composite_weights=weights or {}, results=results or {})


def test_metric_reads_earlier_results_and_flips_lower_is_better() -> None:
    results = {
        "answer.token_f1": MetricResult.scored(0.8),
        "robustness.overrefusal": MetricResult.scored(1.0),  # lower is better: contributes 0
        "generation.groundedness": MetricResult.not_applicable("no claims"),
    }
    weights = {"answer.token_f1": 3.0, "generation.groundedness": 5.0}
    ctx = _ctx(results, weights)
    case, output = make_case(), make_output(None, "x")
    assert score("composite.trust", case, output, ctx).value == pytest.approx(0.8, abs=1e-15)
    assert score("composite.trust_arithmetic", case, output, ctx).value == pytest.approx(0.8, abs=1e-15)
    flipped = _ctx(results, {"answer.token_f1": 1.0, "robustness.overrefusal": 1.0})
    assert score("composite.trust_arithmetic", case, output, flipped).value == pytest.approx(0.4, abs=1e-15)
    assert score("composite.trust", case, output, flipped).value == 0.0


def test_metric_skips_with_reasons_never_zero() -> None:
    case, output = make_case(), make_output(None, "x")
    for ctx, reason in [
        (_ctx({}, None), REASON_NO_WEIGHTS),
        (
            _ctx({"answer.token_f1": MetricResult.skipped("no expected answer")}, {"answer.token_f1": 1.0}),
            REASON_NO_COMPONENT,
        ),
    ]:
        result = score("composite.trust", case, output, ctx)
        assert (result.status, result.value, result.reason) == ("skipped", None, reason)


def test_components_not_provided_are_computed_through_the_registry() -> None:
    case = make_case(expected_answer="thirty days")
    output = make_output(None, "within thirty days")
    weights = {"answer.token_f1": 1.0, "answer.exact_match": 1.0}
    f1 = score("answer.token_f1", case, output).value  # precision 2/3, recall 1: F1 0.8
    assert f1 == pytest.approx(0.8, abs=1e-12)
    result = score("composite.trust_arithmetic", case, output, _ctx(None, weights))
    assert result.value == pytest.approx((0.8 + 0.0) / 2, abs=1e-12)
    provided = _ctx({"answer.token_f1": MetricResult.scored(0.2)}, weights)
    assert score("composite.trust_arithmetic", case, output, provided).value == pytest.approx(0.1, abs=1e-12)


def test_unknown_or_categorical_component_is_named() -> None:
    case, output = make_case(), make_output(None, "x")
    for name in ("answer.token_f2", "diagnostics.failure_category", "composite.trust"):
        result = score("composite.trust", case, output, _ctx({}, {name: 1.0, "answer.token_f1": 1.0}))
        assert (result.status, result.reason) == (
            "skipped",
            f"composite.weights: {name!r} is not a numeric component metric",
        )


def test_golden_through_the_registered_metric() -> None:
    # the golden values on four registered higher-is-better metrics
    names = dict(
        zip(
            GOLDEN_VALUES,
            (
                "judge.faithfulness",
                "generation.citation_support",
                "generation.answer_relevance",
                "answer.token_f1",
            ),
            strict=True,
        )
    )
    results = {names[k]: MetricResult.scored(v) for k, v in GOLDEN_VALUES.items()}
    ctx = _ctx(results, {names[k]: w for k, w in GOLDEN_WEIGHTS.items()})
    case, output = make_case(), make_output(None, "x")
    assert round(defined(score("composite.trust", case, output, ctx).value), 4) == 0.2863
    assert round(defined(score("composite.trust_arithmetic", case, output, ctx).value), 4) == 0.57
