"""Metric implementations, registered in :mod:`gate.metrics.base`.

Import :func:`registry` to get every metric, with all metric modules loaded.
"""

from __future__ import annotations

import importlib

from gate.metrics.base import REGISTRY, MetricSpec, ScoringContext
from gate.model.records import MetricResult

# Modules that register metrics when imported (order = report order).
METRIC_MODULES: tuple[str, ...] = (
    "gate.metrics.retrieval",
    "gate.metrics.generation",
    "gate.metrics.answer",
    "gate.metrics.robustness",
    "gate.metrics.diagnostics",
    "gate.metrics.judged",
    "gate.metrics.composite",
)


def registry() -> dict[str, MetricSpec]:
    """All registered metrics by name: in METRIC_MODULES order, then registration order.

    The order does not depend on which metric module happened to be imported first, so
    reports and artifacts list metrics the same way in every process.
    """
    for module in METRIC_MODULES:
        importlib.import_module(module)
    module_rank = {m: i for i, m in enumerate(METRIC_MODULES)}
    position = {name: i for i, name in enumerate(REGISTRY)}
    ordered = sorted(
        REGISTRY.values(),
        key=lambda spec: (module_rank.get(spec.compute.__module__, len(module_rank)), position[spec.name]),
    )
    return {spec.name: spec for spec in ordered}


__all__ = ["REGISTRY", "MetricResult", "MetricSpec", "ScoringContext", "registry"]
