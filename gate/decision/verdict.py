"""The overall verdict and its cause, from the decided gates, a policy change and an acceptance.

:func:`comparison_verdict` is what the two runs decide (``compare_runs`` stores it in the
comparison); :func:`final_verdict` adds what the pull request's context decides: a changed
gate policy never passes silently (review), and a maintainer's acceptance of this commit turns
a review or block into a pass. Reports and the GitHub flow render the result and never
re-derive it.
"""

from __future__ import annotations

from collections.abc import Sequence

from gate.decision.comparison import GateRef, GateResult, Verdict
from gate.decision.decide import (
    UNCONFIRMED_WORSE,
    Accepted,
    GateCause,
    Outcome,
    VerdictCause,
)
from gate.model.artifact import FAILURE_RATE_METRIC
from gate.model.slices import ALL_SLICE


def comparison_verdict(gates: Sequence[GateResult], *, nothing_compared: bool) -> Verdict:
    """The verdict of the counted gates.

    block if a counted gate blocks; review if one reviews; ``none`` when no quality gate
    (a gating metric other than ``adapter.failure_rate``) was decided; otherwise a pass whose
    cause says what it verified: ``worse_unconfirmed`` when a gating gate's own interval lies
    wholly below zero, ``verified_within_margin`` when every decided gating quality gate passed
    on evidence, else ``no_regression_detected``. ``worse`` lists the unconfirmed worse gates
    whatever the decision; ``ruled_out`` and ``cases_needed`` describe the ``all`` quality gates.
    """
    worse = sorted(
        (g for g in gates if g.gating and g.cause in UNCONFIRMED_WORSE),
        key=lambda g: (g.hi if g.hi is not None else 0.0, g.metric, g.slice),
    )
    quality = [g for g in gates if g.gating and g.metric != FAILURE_RATE_METRIC and g.decision != "skipped"]
    decision, cause = _outcome(
        [g for g in gates if g.gating and g.counts], worse, quality, nothing_compared=nothing_compared
    )
    ruled_out, cases_needed = _whole_dataset(quality)
    return Verdict(
        decision=decision,
        cause=cause,
        comparison_decision=decision,
        comparison_cause=cause,
        worse=[GateRef.of(g) for g in worse],
        ruled_out=ruled_out,
        cases_needed=cases_needed,
    )


def _outcome(
    counted: Sequence[GateResult],
    worse: Sequence[GateResult],
    quality: Sequence[GateResult],
    *,
    nothing_compared: bool,
) -> tuple[Outcome, VerdictCause]:
    """The decision and its cause, first rule that holds (see :func:`comparison_verdict`)."""
    if any(g.decision == "block" for g in counted):
        return "block", VerdictCause.BLOCK
    if any(g.decision == "review" for g in counted):
        return "review", VerdictCause.REVIEW
    if nothing_compared:
        return "none", VerdictCause.NOTHING_COMPARED
    if worse:
        return "pass", VerdictCause.WORSE_UNCONFIRMED
    if quality and all(g.decision == "pass" and g.cause != GateCause.NO_CASE_CHANGED for g in quality):
        return "pass", VerdictCause.VERIFIED_WITHIN_MARGIN
    return "pass", VerdictCause.NO_REGRESSION_DETECTED


def _whole_dataset(quality: Sequence[GateResult]) -> tuple[float | None, int | None]:
    """Over the ``all`` quality gates with an interval: the largest drop ruled out,
    ``max(0, -lo)``, and the most pairs a gate that did not pass would need (None: none)."""
    whole = [g for g in quality if g.slice == ALL_SLICE and g.lo is not None]
    ruled_out = max((max(0.0, -g.lo) for g in whole if g.lo is not None), default=None)
    needed = [g.pairs_needed for g in whole if g.decision != "pass" and g.pairs_needed is not None]
    return ruled_out, max(needed, default=None)


def final_verdict(verdict: Verdict, *, policy_changed: bool, accepted: Accepted | None) -> Verdict:
    """The comparison's verdict with the pull request's context applied.

    - ``policy_changed`` and the data passed: review (cause ``policy_changed``): a change to
      the gate's own policy needs a person, however the data came out;
    - ``accepted`` (a maintainer accepted this commit) and the result is review or block:
      pass with cause ``accepted``, naming who and which commit. An acceptance never turns
      ``none`` (nothing compared) into a pass, and a pass needs none.

    ``comparison_decision`` and ``comparison_cause`` keep what the data alone decided.
    """
    decision, cause = verdict.comparison_decision, verdict.comparison_cause
    if policy_changed and decision == "pass":
        decision, cause = "review", VerdictCause.POLICY_CHANGED
    taken = accepted is not None and decision in ("review", "block")
    if taken:
        decision, cause = "pass", VerdictCause.ACCEPTED
    return verdict.model_copy(
        update={
            "decision": decision,
            "cause": cause,
            "policy_changed": policy_changed,
            "accepted_by": accepted.actor if taken and accepted is not None else None,
            "accepted_commit": accepted.commit if taken and accepted is not None else None,
        }
    )
