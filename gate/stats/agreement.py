"""Agreement between two raters' labels (Cohen's kappa), for the judge's calibration."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def cohen_kappa(a: Sequence[Any], b: Sequence[Any]) -> float:
    """Cohen's kappa of two raters' labels (any hashable labels, e.g. 0/1).

    ``kappa = (p_o - p_e) / (1 - p_e)`` with ``p_o`` the observed agreement and ``p_e`` the
    agreement expected from each rater's label frequencies. NaN when ``p_e == 1`` (both raters
    used one and the same label: chance explains everything and kappa is undefined). Raises
    ValueError for unequal lengths or empty input.
    """
    if len(a) != len(b):
        raise ValueError(f"rater lists differ in length ({len(a)} vs {len(b)})")
    n = len(a)
    if n == 0:
        raise ValueError("no labels")
    observed = sum(x == y for x, y in zip(a, b, strict=True)) / n
    labels = set(a) | set(b)
    expected = sum((list(a).count(label) / n) * (list(b).count(label) / n) for label in labels)
    if expected == 1:
        return float("nan")
    return float((observed - expected) / (1 - expected))
