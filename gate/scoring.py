"""Scoring one case: run the selected registered metrics in registry order."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from gate.dataset import Case
from gate.errors import UsageError
from gate.metrics import registry
from gate.metrics.base import MetricResult, ScoringContext
from gate.records import CaseOutput


def select_metrics(names: Literal["all"] | Sequence[str]) -> list[str]:
    """Validated metric names in registry order, each once.

    ``"all"`` is every registered metric (judge metrics skip themselves without a judge). An
    unknown name raises UsageError naming it and listing the known ones.
    """
    known = registry()
    if names == "all":
        return list(known)
    if isinstance(names, str):
        names = [names]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise UsageError(f"run.metrics: unknown metric {unknown[0]!r} (known: {', '.join(known)})")
    if not names:
        raise UsageError("run.metrics: no metric selected; use 'all' or a list of metric names")
    chosen = set(names)
    return [n for n in known if n in chosen]


def score_case(
    case: Case, output: CaseOutput, ctx: ScoringContext, metric_names: Sequence[str]
) -> dict[str, MetricResult]:
    """Every selected metric's result for one case, in registry order.

    Preconditions (case kind, retrieve(), answer, expected fields, context, judge) are checked by
    each metric's spec, so a metric that cannot run reports why instead of a number.
    """
    specs = registry()
    order = select_metrics(list(metric_names))
    return {name: specs[name].score(case, output, ctx) for name in order}
