"""Sizing before the first pull request: what a dataset can detect, and the cases a margin needs.

Before any run there is no churn to measure, so the figures are given for a 0/1 metric whose
answers change between two runs on 5% and 10% of the cases with no net effect (the spread a
regression must stand out from): the drop a gate flags with 80% probability,
``(z + z_0.80) · √(π / n)``, and the pairs it needs to pass its margin with 80% probability
when nothing changed (:func:`gate.stats.pairs_needed`; 189 at margin 0.02 even when no answer
changes). Printed by ``ragproof validate`` for ``all`` and the smallest gating slice.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from gate.model.artifact import Row
from gate.model.config import GateConfig
from gate.model.dataset import Case
from gate.model.slices import ALL_SLICE, slice_gates, slice_masks
from gate.stats import POWER, normal_quantile, pairs_needed

CHURNS = (0.05, 0.10)


def detectable_drop(n: int, churn: float, confidence: float = 0.95) -> float:
    """The true drop of a 0/1 metric one gate of ``n`` pairs flags with 80% probability when
    ``churn`` of the pairs change either way: ``(z_{(1+confidence)/2} + z_0.80) · √(churn / n)``."""
    z = normal_quantile((1 - confidence) / 2) + normal_quantile(1 - POWER)
    return z * math.sqrt(churn / n)


def _slice_sizes(cases: Sequence[Case], gate: GateConfig) -> dict[str, int]:
    """Cases per slice of the gate's slicing (``all`` included)."""
    rows = [
        Row(case_id=c.id, kind=c.kind, tags=list(c.tags), metadata=dict(c.metadata), status="ok")
        for c in cases
    ]
    return {key: int(mask.sum()) for key, mask in slice_masks(rows, gate.slices).items()}


def _smallest_gating(sizes: dict[str, int], gate: GateConfig) -> list[str]:
    """The smallest gating slice other than ``all`` with at least min_pairs cases (10 when
    unset), in a list; empty when there is none. Ties go to the first key in sort order."""
    floor = gate.min_pairs or 10
    slices = sorted(
        (n, key) for key, n in sizes.items() if key != ALL_SLICE and n >= floor and slice_gates(key, gate)
    )
    return [slices[0][1]] if slices else []


def sizing_lines(cases: Sequence[Case], gate: GateConfig) -> list[str]:
    """One header and a line each for ``all`` and the smallest gating slice with enough cases."""
    sizes = _slice_sizes(cases, gate)
    picked = [ALL_SLICE, *_smallest_gating(sizes, gate)]
    need = [
        int(pairs_needed(math.sqrt(c), gate.margin, ternary=True, confidence=gate.confidence)) for c in CHURNS
    ]
    floor_need = int(pairs_needed(0.0, gate.margin, ternary=True, confidence=gate.confidence))
    churns = " / ".join(f"{c:.0%}" for c in CHURNS)
    lines = [
        f"sizing (margin {gate.margin:g}, a 0/1 metric whose answers change on {churns} of the cases between runs): "
        f"passing the margin needs {' / '.join(f'{n:,}' for n in need)} cases ({floor_need:,} even if nothing changes)"
    ]
    for key in picked:
        n = sizes.get(key, 0)
        if n == 0:
            continue
        drops = " / ".join(f"{detectable_drop(n, c, gate.confidence):.2f}" for c in CHURNS)
        label = "" if key == ALL_SLICE else ", the smallest gating slice"
        lines.append(
            f"  {key} ({n:,} cases{label}): detects drops of {drops}; {'enough' if n >= need[0] else 'too few'} for the margin"
        )
    return lines
