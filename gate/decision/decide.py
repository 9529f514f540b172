"""Non-inferiority gates: from calibrated intervals to pass / review / block (docs/gate.md).

For one metric and slice, ``d = candidate - baseline`` per paired case, sign-flipped for
metrics where lower is better, so a positive ``d`` is always an improvement. Each gate's
interval is the one its data call for (:func:`gate.stats.column_facts`: Tango's score interval
for 0/1 metrics, t or the bootstrap for others, clusters when the cases have them). With the
per-gate interval ``[lo, hi]``, the family-wise upper bound ``block_hi`` and the margin ``m``,
checked in this order:

- ``lo >= -m`` -> pass. Each gate passes on its own one-sided bound (an intersection-union
  test: no multiplicity correction is owed).
- ``block_hi < 0`` with at least ``min_nonzero`` non-zero differences -> block. ``block_hi`` is
  simultaneous over the family of distinct gates (max-statistic over the shared resamples,
  capped by Bonferroni): the chance of any false block stays at the one-sided level.
- the gate's one-sided p-value of ``H0: Δ >= 0`` passes the weighted Benjamini-Hochberg rule
  over the family at ``gate.review_fdr`` (0.10; the ``all`` gates hold half the weight) ->
  review, a drop confirmed over the family.
- otherwise review by the rule's letter, which informs only (``gate.underpowered: inform``,
  the default) and is typed by its interval: dropped by more than the margin, worse on its
  own evidence, no case changed, inconclusive.

Floors and ceilings act on the candidate's own level: ``min`` blocks when the candidate's
family-wise upper bound lies below it, ``max`` when its lower bound lies above it.

A gate with fewer pairs than the floor (``min_pairs``, derived from the calibration when
unset) is skipped with the reason. Overall (:mod:`gate.decision.verdict`): block if a gating
gate blocks, else review if a counted gate reviews, else pass, with a cause saying whether the
pass verified the margin, detected nothing, or leaves gates worse on their own evidence.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

import numpy as np

from gate.core.errors import EXIT_FAILED, EXIT_OK
from gate.model.artifact import FAILURE_RATE_METRIC
from gate.model.config import GateConfig

Decision = Literal["pass", "review", "block", "skipped"]
Overall = Literal["pass", "review", "block"]
# The comparison's overall result: "none" when nothing could be compared (see nothing_compared)
Outcome = Literal["pass", "review", "block", "none"]

_SEVERITY: dict[str, int] = {"skipped": 0, "pass": 1, "review": 2, "block": 3}


class GateCause(StrEnum):
    """Why one gate decided what it did: the one home of that reason (reports render it).

    Checked in this order: not gating, too few pairs, floor/ceiling breach, pass (lo >= -m:
    passed on evidence, worse within the margin when hi < 0 too, no case changed), block (the
    family-wise bound below zero), a drop confirmed over the family (review), then the
    interval's shape for a gate that neither passed nor was confirmed: wholly below -margin,
    wholly below zero, no case changed, or straddling -margin (inconclusive).
    """

    NOT_GATING = "not_gating"  # shown only (diagnostic, gate: false, direction unknown, ...)
    TOO_FEW_PAIRS = "too_few_pairs"  # below the pairs floor: skipped
    BELOW_FLOOR = "below_floor"  # the candidate's level lies wholly below gate.metrics min
    ABOVE_CEILING = "above_ceiling"  # ... wholly above gate.metrics max
    PASSED_ON_EVIDENCE = "passed_on_evidence"  # lo >= -margin with pairs that changed
    WORSE_WITHIN_MARGIN = "worse_within_margin"  # lo >= -margin and hi < 0: a sure, small drop
    NO_CASE_CHANGED = "no_case_changed"  # no pair changed (passes from 189 pairs at m = 0.02)
    DROPPED_FAMILY_WISE = "dropped_family_wise"  # the family-wise upper bound lies below zero: block
    DROP_CONFIRMED = "drop_confirmed"  # a drop significant over the family (FDR): review
    DROPPED_BEYOND_MARGIN = "dropped_beyond_margin"  # hi < -margin, not confirmed by the family
    WORSE_ON_OWN_EVIDENCE = "worse_on_own_evidence"  # hi < 0, not confirmed by the family
    STRADDLES_MARGIN = "straddles_margin"  # lo < -margin <= hi and hi >= 0: inconclusive


# Causes of gates worse on their own evidence (interval wholly below zero) that the family did
# not turn into a review or block: the headline names them.
UNCONFIRMED_WORSE = frozenset(
    {GateCause.WORSE_WITHIN_MARGIN, GateCause.DROPPED_BEYOND_MARGIN, GateCause.WORSE_ON_OWN_EVIDENCE}
)


class VerdictCause(StrEnum):
    """Why the overall result is what it is (``Verdict.cause``)."""

    VERIFIED_WITHIN_MARGIN = "verified_within_margin"  # every decided quality gate passed on evidence
    NO_REGRESSION_DETECTED = "no_regression_detected"  # nothing worse, but not every gate verified
    WORSE_UNCONFIRMED = "worse_unconfirmed"  # gates worse on their own evidence, not confirmed
    REVIEW = "review"  # a counted gate reviews
    BLOCK = "block"  # a gating gate blocks
    NOTHING_COMPARED = "nothing_compared"  # no quality gate could be decided
    POLICY_CHANGED = "policy_changed"  # the data passed, but the gate policy changed: a person looks
    ACCEPTED = "accepted"  # a maintainer accepted this commit's review or block


@dataclass(frozen=True)
class Accepted:
    """Who accepted a review or block, and on which commit."""

    actor: str
    commit: str | None = None


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


def nothing_compared(gating: Iterable[tuple[str, str]]) -> bool:
    """Whether no gating gate of a metric other than :data:`FAILURE_RATE_METRIC` was decided.

    Given the gating gates' (metric, decision) pairs. An overall pass then rests on nothing
    and is ``none`` instead: a baseline whose every case failed "improves" on any candidate's
    failure rate, while every metric gate is skipped. A block or review stands.
    """
    return not any(d != "skipped" and m != FAILURE_RATE_METRIC for m, d in gating)


def gate_decision(
    lo: float,
    hi: float,
    block_hi: float,
    margin: float,
    *,
    nonzero: int,
    needed_nonzero: int,
    method: str,
    p_value: float = 1.0,
    threshold: float | None = None,
    n: int = 0,
    pairs_needed: int | None = None,
) -> tuple[Overall, str]:
    """The decision rule (docs/gate.md), and its reason.

    - ``lo >= -m`` -> pass: the per-gate one-sided bound (each gate must pass on its own, an
      intersection-union test, so no multiplicity correction is owed);
    - ``block_hi < 0`` with at least ``needed_nonzero`` non-zero differences -> block: the
      family-wise upper bound (simultaneous over the distinct gates) lies below zero;
    - ``p_value <= threshold`` -> review, a drop confirmed over the family: the one-sided
      p-value of ``H0: Δ >= 0`` passes the weighted Benjamini-Hochberg rule (``threshold`` is
      this gate's ``w · cutoff``; None when the gate is not in the family);
    - otherwise review by the rule's letter, which the overall decision leaves out unless
      ``gate.underpowered: review`` (:func:`counts_toward_overall`); the reason says what the
      interval shows: dropped by more than the margin (``hi < -m``), worse on its own evidence
      (``hi < 0``), no case changed, or inconclusive (straddles ``-m``, with the pairs the
      margin needs when ``n`` is short of ``pairs_needed``).
    """
    interval = f"[{lo:+.4f}, {hi:+.4f}]"
    if lo >= -margin:
        if method == "no-change":
            return "pass", f"no case changed; the interval {interval} lies within the margin"
        if hi < 0:
            return (
                "pass",
                f"worse within the margin: {interval} lies below zero and above -margin {-margin:+.4f}",
            )
        return "pass", f"lower end {lo:+.4f} ≥ -margin {-margin:+.4f}"
    if block_hi < 0 and nonzero >= needed_nonzero:
        return "block", (
            f"real drop: the family-wise upper bound {block_hi:+.4f} is below zero "
            f"({nonzero} non-zero differences)"
        )
    if threshold is not None and p_value <= threshold:
        return "review", (
            f"drop confirmed over the family: p = {p_value:.2g} ≤ {threshold:.2g} "
            f"(weighted Benjamini-Hochberg), interval {interval}"
        )
    unconfirmed = (
        f"not confirmed over the family (p = {p_value:.2g} > {threshold:.2g})"
        if threshold is not None
        else "not in the review family"
    )
    if hi < -margin:
        return (
            "review",
            f"dropped by more than the margin: {interval} lies wholly below -margin; {unconfirmed}",
        )
    if hi < 0:
        return "review", f"worse on its own evidence: {interval} lies wholly below zero; {unconfirmed}"
    short = (
        f"; {pairs_needed} pairs needed to pass at margin {margin:g}"
        if pairs_needed is not None and n < pairs_needed
        else ""
    )
    if method == "no-change":
        return "review", f"no case changed, but {n} pairs only rule out drops larger than {-lo:.4f}{short}"
    return "review", f"inconclusive: {interval} reaches below -margin {-margin:+.4f} and above zero{short}"


def gate_cause(
    decision: str,
    *,
    gating: bool,
    lo: float | None,
    hi: float | None,
    margin: float,
    method: str | None,
    breach: Literal["floor", "ceiling"] | None = None,
    family_block: bool = False,
    confirmed: bool = False,
) -> GateCause:
    """The typed reason behind one gate's ``decision`` (see :class:`GateCause` for the order).

    ``family_block``: the family-wise bound blocked it; ``confirmed``: the family's
    false-discovery control found its drop significant.
    """
    if not gating:
        return GateCause.NOT_GATING
    if decision == "skipped" or lo is None or hi is None:
        return GateCause.TOO_FEW_PAIRS
    if breach == "floor":
        return GateCause.BELOW_FLOOR
    if breach == "ceiling":
        return GateCause.ABOVE_CEILING
    if decision == "pass":
        if method == "no-change":
            return GateCause.NO_CASE_CHANGED
        return GateCause.WORSE_WITHIN_MARGIN if hi < 0 else GateCause.PASSED_ON_EVIDENCE
    if family_block:
        return GateCause.DROPPED_FAMILY_WISE
    if confirmed:
        return GateCause.DROP_CONFIRMED
    if hi < -margin:
        return GateCause.DROPPED_BEYOND_MARGIN
    if hi < 0:
        return GateCause.WORSE_ON_OWN_EVIDENCE
    if method == "no-change":
        return GateCause.NO_CASE_CHANGED
    return GateCause.STRADDLES_MARGIN


def counts_toward_overall(decision: str, cause: GateCause, mode: str) -> bool:
    """Whether a gating gate's decision enters the overall one.

    Passes and blocks count; a review counts when it is a drop confirmed over the family, or
    under ``gate.underpowered: review`` (every gate that did not pass then asks for a person).
    Otherwise a review that is only the rule's letter (inconclusive, worse on its own evidence
    but not confirmed, no case changed) informs: reviewing every gate that cannot pass would
    review most unchanged pull requests once gates multiply. Skipped and shown-only gates never
    count.
    """
    if decision == "skipped" or cause in (GateCause.NOT_GATING, GateCause.TOO_FEW_PAIRS):
        return False
    if decision != "review":
        return True
    return cause == GateCause.DROP_CONFIRMED or mode == "review"


# The share of the review family's weight the `all` gates hold (the rest is split among the
# slices' gates): the overall gates are read first and decide most pull requests.
ALL_SHARE = 0.5


def review_weights(whole: Sequence[bool]) -> np.ndarray:
    """Weights of the weighted Benjamini-Hochberg rule: the ``all`` gates (``whole``) share
    :data:`ALL_SHARE` of the total, the slices' gates the rest; equal weights when either group
    is empty. They average 1."""
    flags = np.asarray(whole, dtype=bool)
    g = flags.size
    n_all = int(flags.sum())
    if g == 0 or n_all in (0, g):
        return np.ones(g)
    return np.where(flags, ALL_SHARE * g / n_all, (1 - ALL_SHARE) * g / (g - n_all))


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
