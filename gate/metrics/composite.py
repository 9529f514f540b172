"""``composite.trust``: a weighted aggregate of chosen metrics per case, so trust can be gated.

With components i (metric names from ``composite.weights``) that are *defined* for the case
(status ``scored``), values v_i in [0, 1] and weights w_i renormalised to sum to 1 over them:

    arithmetic  T_a = sum_i w_i * v_i
    geometric   T_g = prod_i v_i ** w_i      (0 when any defined v_i is 0)

``composite.trust`` is the geometric aggregate: it is non-compensatory (one collapsed
dimension cannot be masked by fluent, relevant others) and by weighted AM-GM never exceeds
the arithmetic one. ``composite.trust_arithmetic`` reports T_a beside it. A component that is
skipped, not_applicable or a judge_error for the case is dropped and the remaining weights
renormalised, never scored as 0; with no defined component the case is skipped. A
lower-is-better component (e.g. robustness.overrefusal) enters as 1 - v.

Mechanism: metric functions see only (case, output, ctx). A component already computed for
this case is taken from ``ctx.results``, which
``gate.run.scoring.score_case`` fills in registry order and ``gate.run.rescore`` provides; this
module is last in ``METRIC_MODULES`` so every selected component comes before it. A component
the run did not select is computed here through the registry (the fallback). That costs no
extra judge call: the judge session answers a repeated (prompt, input) from memory, failures
included. The weights come from ``ctx.composite_weights`` (``composite.weights`` of
ragproof.yaml).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from gate.metrics.base import REGISTRY, ScoringContext, metric
from gate.model.dataset import Case
from gate.model.records import CaseOutput, MetricResult

REASON_NO_WEIGHTS = "composite.weights not configured"
REASON_NO_COMPONENT = "no component metric is defined for this case"


def aggregate(values: Mapping[str, float | None], weights: Mapping[str, float]) -> tuple[float, float] | None:
    """(arithmetic, geometric) weighted aggregates over the components with a value.

    ``values`` maps component name -> value, None when undefined for the case; components
    missing from ``values`` count as undefined. Returns None when no component is defined.

    >>> a, g = aggregate({"f": 0.05, "a": 0.9, "r": 0.9, "c": 0.95}, {"f": 0.4, "a": 0.2, "r": 0.2, "c": 0.2})
    >>> round(a, 4), round(g, 4)
    (0.57, 0.2863)
    """
    defined: dict[str, float] = {name: v for name in weights if (v := values.get(name)) is not None}
    total = sum(weights[name] for name in defined)
    if not defined or total <= 0:
        return None
    arithmetic = sum(weights[name] * v for name, v in defined.items()) / total
    if any(v <= 0 for v in defined.values()):
        return arithmetic, 0.0
    geometric = math.exp(sum(weights[name] * math.log(v) for name, v in defined.items()) / total)
    return arithmetic, geometric


def component_values(
    results: Mapping[str, MetricResult], weights: Mapping[str, float]
) -> dict[str, float | None]:
    """The value each component contributes (None when undefined), lower-is-better ones flipped."""
    out: dict[str, float | None] = {}
    for name in weights:
        result = results.get(name)
        if result is None or result.status != "scored" or result.value is None:
            out[name] = None
            continue
        spec = REGISTRY.get(name)
        out[name] = result.value if spec is None or spec.higher_is_better else 1.0 - result.value
    return out


def weights_problem(weights: Mapping[str, float]) -> str | None:
    """Why ``weights`` cannot define a composite (an unknown, categorical or composite name), or None."""
    for name in weights:
        spec = REGISTRY.get(name)
        if spec is None or spec.categorical or name.startswith("composite."):
            return f"composite.weights: {name!r} is not a numeric component metric"
    return None


def component_results(
    case: Case, output: CaseOutput, ctx: ScoringContext, weights: Mapping[str, float]
) -> dict[str, MetricResult]:
    """Each component's result for the case: from ``ctx.results``, else computed now."""
    known = ctx.results
    return {
        name: known[name] if name in known else REGISTRY[name].score(case, output, ctx) for name in weights
    }


def _composite(case: Case, output: CaseOutput, ctx: ScoringContext, pick: int) -> MetricResult:
    weights = ctx.composite_weights
    if not weights:
        return MetricResult.skipped(REASON_NO_WEIGHTS)
    problem = weights_problem(weights)
    if problem is not None:
        return MetricResult.skipped(problem)
    values = component_values(component_results(case, output, ctx, weights), weights)
    both = aggregate(values, weights)
    if both is None:
        return MetricResult.skipped(REASON_NO_COMPONENT)
    return MetricResult.scored(both[pick])


@metric("composite.trust", kind="deterministic")
def trust(case: Case, output: CaseOutput, ctx: ScoringContext) -> MetricResult:
    """Weighted geometric mean of the configured components (undefined ones dropped, weights renormalised)."""
    return _composite(case, output, ctx, 1)


# Shown beside composite.trust, not gated by default: an arithmetic mean lets strong dimensions
# mask a collapsed one, which is why the gated composite is the geometric one.
@metric("composite.trust_arithmetic", kind="deterministic", gate_by_default=False)
def trust_arithmetic(case: Case, output: CaseOutput, ctx: ScoringContext) -> MetricResult:
    """Weighted arithmetic mean of the configured components (undefined ones dropped, weights renormalised)."""
    return _composite(case, output, ctx, 0)
