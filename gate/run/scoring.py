"""Scoring one case: run the selected registered metrics in registry order."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from functools import lru_cache
from typing import Literal

from gate.core.errors import UsageError
from gate.core.suggest import did_you_mean
from gate.metrics import registry
from gate.metrics.base import MetricSpec, ScoringContext
from gate.model.dataset import Case
from gate.model.records import CaseOutput, MetricResult


def select_metrics(names: Literal["all"] | Sequence[str]) -> list[str]:
    """Validated metric names in registry order, each once.

    ``"all"`` is every registered metric (judge metrics skip themselves without a judge). An
    unknown name raises UsageError naming it and the closest known one (else all of them).
    """
    known = registry()
    if names == "all":
        return list(known)
    if isinstance(names, str):
        names = [names]
    unknown = [n for n in names if n not in known]
    if unknown:
        hint = did_you_mean(unknown[0], known) or f"known: {', '.join(known)}"
        raise UsageError(f"run.metrics: unknown metric {unknown[0]!r}; {hint}")
    if not names:
        raise UsageError("run.metrics: no metric selected; use 'all' or a list of metric names")
    chosen = set(names)
    return [n for n in known if n in chosen]


@lru_cache(maxsize=64)
def _selected_specs(names: tuple[str, ...]) -> tuple[MetricSpec, ...]:
    # registry() has imported every metric module, so the selection of a tuple never changes.
    specs = registry()
    return tuple(specs[name] for name in select_metrics(list(names)))


def score_case(
    case: Case, output: CaseOutput, ctx: ScoringContext, metric_names: Sequence[str]
) -> dict[str, MetricResult]:
    """Every selected metric's result for one case, in registry order.

    Preconditions (case kind, retrieve(), answer, expected fields, context, judge) are checked by
    each metric's spec, so a metric that cannot run reports why instead of a number.

    Later metrics see the case's earlier results in ``ctx.results`` (the dict being
    filled, in registry order), so a composite reads its components instead of recomputing
    them. The caller's ``ctx`` is left untouched: the results live in a per-case copy.
    """
    results: dict[str, MetricResult] = {}
    case_ctx = dataclasses.replace(ctx, results=results)
    for spec in _selected_specs(tuple(metric_names)):
        results[spec.name] = spec.score(case, output, case_ctx)
    return results
