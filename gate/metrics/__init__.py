"""Metric implementations, registered in :mod:`gate.metrics.base`.

Import :func:`registry` to get every metric, with all metric modules loaded.
"""

from __future__ import annotations

import importlib

from gate.metrics.base import REGISTRY, MetricResult, MetricSpec, ScoringContext

# Modules that register metrics when imported (order = report order).
METRIC_MODULES: tuple[str, ...] = (
    "gate.metrics.retrieval",
    "gate.metrics.generation",
    "gate.metrics.answer",
    "gate.metrics.robustness",
    "gate.metrics.diagnostics",
    "gate.judge.metrics",
    "gate.metrics.composite",
)


def registry() -> dict[str, MetricSpec]:
    """All registered metrics by name, in registration order."""
    for module in METRIC_MODULES:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise
    return REGISTRY


__all__ = ["REGISTRY", "MetricResult", "MetricSpec", "ScoringContext", "registry"]
