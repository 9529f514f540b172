"""Aggregation of per-case metric results into ``summary.json`` (per metric and slice).

Per metric and slice: mean, p50 and p95 of the scored values (nearest rank), and the counts of
scored, skipped, not_applicable and errored cases.

* A case failure (row status other than ``ok``: adapter error, timeout) counts in every
  metric's ``errored`` and in no mean.
* ``judge_error`` counts in ``errored``.
* A scored value that is not a finite number (NaN, inf) is never averaged: it counts in
  ``errored``.
* A metric missing from an ok row (not run for that case) counts as ``skipped``.
* Categorical metrics (``MetricResult.label``) get a ``distribution`` (label -> count) and no
  mean or percentiles.

Slice keys: ``all`` always; ``kind`` gives ``kind=VALUE``; ``tags`` gives ``tags=TAG`` for every
tag; ``tags:NAME`` gives ``tags=NAME:VALUE`` for the tags of that name only; ``metadata.FIELD``
gives ``metadata.FIELD=VALUE`` when the case has the field (non-string values as JSON).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from gate.metrics import registry
from gate.model.artifact import MetricSummary, Row, Summary
from gate.model.slices import ALL_SLICE, slice_keys


def nearest_rank(sorted_values: Sequence[float], fraction: float) -> float:
    """The value at 1-based position ``max(1, ceil(fraction * n))`` of ascending ``sorted_values``."""
    if not sorted_values:
        raise ValueError("nearest rank of an empty sample")
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"fraction must be in [0, 1], got {fraction}")
    position = max(1, math.ceil(fraction * len(sorted_values)))
    return float(sorted_values[position - 1])


class _Accumulator:
    __slots__ = ("labels", "counts", "values")

    def __init__(self) -> None:
        self.values: list[float] = []
        self.labels: dict[str, int] = {}
        self.counts = {"scored": 0, "skipped": 0, "not_applicable": 0, "errored": 0}

    def add(self, row: Row, name: str) -> None:
        if row.status != "ok":
            self.counts["errored"] += 1
            return
        result = row.metrics.get(name)
        if result is None:
            self.counts["skipped"] += 1
        elif result.status == "judge_error":
            self.counts["errored"] += 1
        elif result.status != "scored":
            self.counts[result.status] += 1
        elif result.label is not None:
            self.counts["scored"] += 1
            self.labels[result.label] = self.labels.get(result.label, 0) + 1
        elif result.value is None or not math.isfinite(result.value):
            self.counts["errored"] += 1
        else:
            self.counts["scored"] += 1
            self.values.append(result.value)

    def summary(self, higher_is_better: bool, categorical: bool) -> MetricSummary:
        out = MetricSummary(
            higher_is_better=higher_is_better,
            scored=self.counts["scored"],
            skipped=self.counts["skipped"],
            not_applicable=self.counts["not_applicable"],
            errored=self.counts["errored"],
        )
        if categorical or self.labels:
            out.distribution = dict(sorted(self.labels.items()))
        if self.values and not categorical:
            ordered = sorted(self.values)
            out.mean = math.fsum(ordered) / len(ordered)
            out.p50 = nearest_rank(ordered, 0.50)
            out.p95 = nearest_rank(ordered, 0.95)
        return out


def summarize(rows: Sequence[Row], metric_names: Sequence[str], slices: Sequence[str]) -> Summary:
    """The run's summary: per slice key (``all`` first, then sorted) and metric, in the given order."""
    specs = registry()
    accumulators: dict[str, dict[str, _Accumulator]] = {ALL_SLICE: {n: _Accumulator() for n in metric_names}}
    for row in rows:
        for key in slice_keys(row, slices):
            per_metric = accumulators.setdefault(key, {n: _Accumulator() for n in metric_names})
            for name in metric_names:
                per_metric[name].add(row, name)
    failures = sum(1 for r in rows if r.status != "ok")
    order = sorted(accumulators, key=lambda k: (k != ALL_SLICE, k))
    out: dict[str, dict[str, MetricSummary]] = {}
    for key in order:
        out[key] = {}
        for name in metric_names:
            spec = specs.get(name)
            out[key][name] = accumulators[key][name].summary(
                higher_is_better=spec.higher_is_better if spec else True,
                categorical=spec.categorical if spec else False,
            )
    return Summary(
        cases=len(rows),
        failures=failures,
        adapter_failure_rate=failures / len(rows) if rows else None,
        slices=out,
    )
