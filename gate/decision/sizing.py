"""Sizing before the first pull request: per gating metric, what a dataset can detect and the
cases its margin needs.

Before any run there is no churn to measure, so the figures assume that ``c`` = 5% or 10% of a
metric's cases change between two runs with no net effect (the spread a regression must stand
out from):

- the drop one gate of ``n`` pairs flags with 80% probability, ``(z + z_0.80) · √(c / n)``
  (:func:`detectable_drop`);
- the pairs a gate needs to pass its margin with 80% probability when nothing changed
  (:func:`gate.stats.pairs_needed` for 0/1 pairs at churn ``c``; 189 at margin 0.02 even when
  no answer changes).

Both are exact (to the normal approximation) for 0/1 metrics. For any other metric with values
in [0, 1] a paired difference lies in [-1, 1], so when it is nonzero on a share ``c`` of the
cases its variance is at most ``c``: the 0/1 figures at the same churn are upper bounds, and
they are printed as such ("at most").

The gating metrics are those a run would score and compare would gate
(:func:`gate.decision.compare.direction_policy`): judge metrics only with a judge, composites
only with ``composite.weights``, never ``adapter.failure_rate``. A metric is counted on the
cases that have what it needs (:meth:`gate.metrics.base.MetricSpec.scorable_on`: its case
kinds, expected ids, expected answer), on ``all`` and on its own smallest gating slice with at
least ``min_pairs`` such cases. Metrics with the same figures share a line. Printed by
``ragproof validate``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from gate.decision.compare import direction_policy, pairs_floor, skipped_by_design
from gate.decision.pairing import spec_direction
from gate.metrics import registry
from gate.metrics.base import MetricSpec
from gate.model.artifact import Row
from gate.model.config import Config, GateConfig
from gate.model.dataset import Case
from gate.model.slices import ALL_SLICE, slice_gates, slice_masks
from gate.stats import POWER, normal_quantile, pairs_needed

CHURNS = (0.05, 0.10)


def detectable_drop(n: int, churn: float, confidence: float = 0.95) -> float:
    """The true drop of a 0/1 metric one gate of ``n`` pairs flags with 80% probability when
    ``churn`` of the pairs change either way: ``(z_{(1+confidence)/2} + z_0.80) · √(churn / n)``."""
    z = normal_quantile((1 - confidence) / 2) + normal_quantile(1 - POWER)
    return z * math.sqrt(churn / n)


@dataclass(frozen=True)
class MetricSizing:
    """One gating metric's figures: its margin, whether they are exact (0/1) or bounds, and its
    case counts on ``all`` and on its smallest gating slice (``slice_key`` None: none has
    ``min_pairs`` cases)."""

    name: str
    margin: float
    binary: bool
    n_all: int
    slice_key: str | None
    n_slice: int


def gating_specs(config: Config, metric_names: Sequence[str]) -> list[tuple[MetricSpec, float]]:
    """The registered metrics among ``metric_names`` that a run scores and compare gates, each
    with its margin, in registry order; metrics skipped by design (no judge, no composite
    weights) are left out."""
    specs = registry()
    judged = config.judge.model is not None
    weighted = bool(config.composite_weights())
    chosen = set(metric_names)
    out = []
    for name, spec in specs.items():
        if name not in chosen:
            continue
        if skipped_by_design(name, spec, judged=judged, weighted=weighted):
            continue
        policy = direction_policy(name, spec_direction(spec), config.gate)
        if policy.gated:
            out.append((spec, policy.margin))
    return out


def metric_sizings(cases: Sequence[Case], config: Config, metric_names: Sequence[str]) -> list[MetricSizing]:
    """Per gating metric: the cases it can be scored on in ``all`` and in its smallest gating
    slice with at least min_pairs of them (ties go to the first key in sort order)."""
    gate = config.gate
    floor = pairs_floor(gate)
    rows = [
        Row(case_id=c.id, kind=c.kind, tags=list(c.tags), metadata=dict(c.metadata), status="ok")
        for c in cases
    ]
    masks = slice_masks(rows, gate.slices)
    gating = {key: mask for key, mask in masks.items() if key != ALL_SLICE and slice_gates(key, gate)}
    out = []
    for spec, margin in gating_specs(config, metric_names):
        scorable = np.fromiter((spec.scorable_on(c) for c in cases), dtype=bool, count=len(cases))
        sizes = sorted((int((mask & scorable).sum()), key) for key, mask in gating.items())
        smallest = next(((n, key) for n, key in sizes if n >= floor), (0, None))
        out.append(
            MetricSizing(spec.name, margin, spec.binary, int(scorable.sum()), smallest[1], smallest[0])
        )
    return out


def _needs(margin: float, gate: GateConfig) -> tuple[list[int], int]:
    """Pairs the margin needs at each churn of :data:`CHURNS`, and with no churn at all."""
    need = [int(pairs_needed(math.sqrt(c), margin, ternary=True, confidence=gate.confidence)) for c in CHURNS]
    return need, int(pairs_needed(0.0, margin, ternary=True, confidence=gate.confidence))


def _needs_text(margin: float, gate: GateConfig) -> str:
    need, floor_need = _needs(margin, gate)
    return (
        f"margin {margin:g} needs {' / '.join(f'{n:,}' for n in need)} cases ({floor_need:,} if none change)"
    )


def _cases(n: int) -> str:
    return f"{n:,} case" + ("" if n == 1 else "s")


def _figures(s: MetricSizing, gate: GateConfig, floor: int) -> str:
    """The part of a metric's line after its name: drops on all and its smallest gating slice."""
    bound = "" if s.binary else "at most "

    def drops(n: int) -> str:
        return bound + " / ".join(f"{detectable_drop(n, c, gate.confidence):.2f}" for c in CHURNS)

    if s.n_all < floor:
        text = f"all ({_cases(s.n_all)}): fewer than min_pairs {floor}: its gates are skipped"
    else:
        text = f"all ({_cases(s.n_all)}) {drops(s.n_all)}"
        if s.slice_key is None:
            text += f"; no gating slice has {floor}+ of these cases"
        elif s.n_slice == s.n_all:
            text += f"; its smallest gating slice, {s.slice_key}, has the same cases"
        else:
            text += f"; smallest gating slice {s.slice_key} ({_cases(s.n_slice)}) {drops(s.n_slice)}"
    if s.margin != gate.margin:
        text += f"; {bound}{_needs_text(s.margin, gate)}"
    return text


def sizing_lines(cases: Sequence[Case], config: Config, metric_names: Sequence[str]) -> list[str]:
    """A header stating the churn assumption and the cases the margin needs, then one line per
    group of gating metrics with the same figures (in registry order of their first metric)."""
    gate = config.gate
    floor = pairs_floor(gate)
    churns = " / ".join(f"{c:.0%}" for c in CHURNS)
    lines = [
        f"sizing, if {churns} of the cases change between runs with no net effect: "
        f"{_needs_text(gate.margin, gate)}; the drop each gating metric detects 80% of the time "
        "(exact for 0/1 metrics; for the others, with values in [0, 1], 'at most': they need at most "
        "as many cases)"
    ]
    groups: dict[str, list[str]] = {}
    for s in metric_sizings(cases, config, metric_names):
        groups.setdefault(_figures(s, gate, floor), []).append(s.name)
    if not groups:
        return [*lines, "  no metric gates (see gate.include, gate.metrics and run.metrics)"]
    return lines + [f"  {', '.join(names)}: {figures}" for figures, names in groups.items()]
