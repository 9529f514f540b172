"""Non-inferiority gates: from a paired interval to pass / review / block (design.md).

For one metric and slice, ``d = candidate - baseline`` per paired case, sign-flipped for
metrics where lower is better, so a positive ``d`` is always an improvement. With the
bootstrap interval ``[lo, hi]`` of the mean of ``d`` and the margin ``m`` (the largest drop
we accept without discussion), checked in this order:

- ``lo >= -m``  -> pass   (any drop is within the margin)
- ``hi < 0``    -> block  (a real drop: the whole interval lies below zero)
- otherwise     -> review (inconclusive: a person decides)

Floors and ceilings act on the candidate's own level, not on the change: a metric with
``min`` also blocks when the *candidate's interval* -- the bootstrap interval of the
candidate's mean over the same paired cases and resamples -- lies wholly below ``min``
(``candidate_hi < min``); ``max`` blocks when it lies wholly above (``candidate_lo > max``).

A gate with fewer than ``min_pairs`` pairs is skipped with the reason. Overall: block if any
gating gate blocks, else review if any reviews, else pass (skipped gates do not count).

Family-wise mode (``gate.family_wise``) widens every interval to the Bonferroni level
``1 - (1 - confidence) / G`` over the G gating gates that have enough pairs, so the chance of
any false block across the family stays at most ``(1 - confidence) / 2``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from gate.core.errors import EXIT_FAILED, EXIT_OK
from gate.model.config import GateConfig

Decision = Literal["pass", "review", "block", "skipped"]
Overall = Literal["pass", "review", "block"]

# The gate over row failures (adapter errors and timeouts); values are 1 per failed case.
FAILURE_RATE_METRIC = "adapter.failure_rate"

_SEVERITY: dict[str, int] = {"skipped": 0, "pass": 1, "review": 2, "block": 3}


@dataclass(frozen=True)
class MetricPolicy:
    """How one metric gates: its direction, margin, floor/ceiling, and whether it gates at all."""

    name: str
    higher_is_better: bool
    margin: float
    floor: float | None = None
    ceiling: float | None = None
    gated: bool = True
    # why it does not gate (shown in the report) when ``gated`` is False
    note: str | None = None


def interval_decision(lo: float, hi: float, margin: float) -> Overall:
    """The design.md rule for an interval of the oriented difference."""
    if lo >= -margin:
        return "pass"
    if hi < 0:
        return "block"
    return "review"


def interval_reason(decision: str, lo: float, hi: float, margin: float) -> str:
    if decision == "pass":
        return f"lower end {lo:+.4f} ≥ -margin {-margin:+.4f}"
    if decision == "block":
        return f"real drop: the whole interval [{lo:+.4f}, {hi:+.4f}] is below zero"
    return f"inconclusive: [{lo:+.4f}, {hi:+.4f}] reaches below -margin {-margin:+.4f} and above zero"


def level_breach(
    candidate_lo: float | None, candidate_hi: float | None, floor: float | None, ceiling: float | None
) -> str | None:
    """A block reason when the candidate's interval lies wholly beyond its floor or ceiling."""
    if floor is not None and candidate_hi is not None and candidate_hi < floor:
        return f"candidate interval [{candidate_lo:.4f}, {candidate_hi:.4f}] lies wholly below min {floor:g}"
    if ceiling is not None and candidate_lo is not None and candidate_lo > ceiling:
        return (
            f"candidate interval [{candidate_lo:.4f}, {candidate_hi:.4f}] lies wholly above max {ceiling:g}"
        )
    return None


def skip_reason(pairs: int, min_pairs: int) -> str | None:
    if pairs < min_pairs:
        noun = "pair" if pairs == 1 else "pairs"
        return f"only {pairs} {noun} scored in both runs (min_pairs {min_pairs})"
    return None


def overall_decision(decisions: Iterable[str]) -> Overall:
    """block if any blocks, else review if any reviews, else pass (skipped gates are ignored)."""
    worst = max((_SEVERITY[d] for d in decisions), default=1)
    return "block" if worst == 3 else "review" if worst == 2 else "pass"


def family_confidence(confidence: float, family_size: int) -> float:
    """Bonferroni-adjusted interval level for ``family_size`` simultaneous gates."""
    return 1 - (1 - confidence) / max(family_size, 1)


def metric_policy(
    name: str,
    gate_config: GateConfig,
    *,
    higher_is_better: bool | None,
    gate_by_default: bool,
    categorical: bool = False,
) -> MetricPolicy:
    """Resolve one metric's gating from the registry facts and ``gate.include`` / ``gate.metrics``.

    ``higher_is_better`` None means the direction is unknown (not registered, not recorded in
    either summary): such a metric is shown but cannot gate.
    """
    override = gate_config.metrics.get(name)
    margin = override.margin if override and override.margin is not None else gate_config.margin
    floor = override.min if override else None
    ceiling = override.max if override else None
    direction = True if higher_is_better is None else higher_is_better
    note: str | None = None
    if categorical:
        note = "categorical: reported as a distribution"
    elif higher_is_better is None:
        note = "direction unknown (metric not registered)"
    elif override is not None and not override.gate:
        note = "gate: false in gate.metrics"
    elif isinstance(gate_config.include, list):
        if name not in gate_config.include and name != FAILURE_RATE_METRIC:
            note = "not listed in gate.include"
    elif not gate_by_default:
        note = "diagnostic: shown, does not gate by default"
    return MetricPolicy(
        name=name,
        higher_is_better=direction,
        margin=margin,
        floor=floor,
        ceiling=ceiling,
        gated=note is None,
        note=note,
    )


def exit_code_for(overall: str, fail_on: str) -> int:
    """Process exit code for ``--fail-on``: 1 when the overall decision reaches that level."""
    if fail_on == "never":
        return EXIT_OK
    if fail_on == "review":
        return EXIT_FAILED if overall in {"review", "block"} else EXIT_OK
    return EXIT_FAILED if overall == "block" else EXIT_OK
