"""The words for what the decision decided: one home for every report (comment, HTML, terminal,
check run).

Everything here renders what :mod:`gate.decision` decided -- each gate's ``cause`` and
``counts``, the comparison's ``verdict`` (decision, cause, the gates worse on their own
evidence, what the ``all`` gates rule out, the cases the margin needs) -- and never decides
anything itself. Metric and slice names are user data: the callers escape the sentences for
their medium (Markdown, HTML, plain text).
"""

from __future__ import annotations

from collections.abc import Callable

from gate.decision.comparison import Comparison, GateRef, GateResult, Verdict
from gate.decision.decide import GateCause, VerdictCause
from gate.report.templating import fmt_interval, fmt_num, fmt_signed

DECISION_ICON = {"block": "❌", "review": "⚠️", "pass": "✅", "skipped": "⏭️", "none": "⏹️"}
INFORM_ICON = "ℹ️"  # a review that informs only (does not make the decision)

# The headline of each (decision, cause); a decision alone where the cause adds no headline.
HEADLINE = {
    "block": "❌ Blocked",
    "review": "⚠️ Needs review",
    "pass": "✅ Passed",
    "none": "⏹️ Nothing compared",
}
_PASS_HEADLINE = {
    VerdictCause.VERIFIED_WITHIN_MARGIN: "✅ Passed",
    VerdictCause.NO_REGRESSION_DETECTED: "🔍 No regression detected",
    VerdictCause.WORSE_UNCONFIRMED: "🔻 Not blocked, but worse on its own evidence",
    VerdictCause.ACCEPTED: "✅ Accepted",
}

# A gate's cause as a short phrase (tables, panels, the terminal).
CAUSE_PHRASE = {
    GateCause.NOT_GATING: "not gating",
    GateCause.TOO_FEW_PAIRS: "too few pairs",
    GateCause.PASSED_ON_EVIDENCE: "within margin",
    GateCause.WORSE_WITHIN_MARGIN: "worse, within margin",
    GateCause.NO_CASE_CHANGED: "no case changed",
    GateCause.DROPPED_FAMILY_WISE: "real drop",
    GateCause.DROP_CONFIRMED: "drop confirmed",
    GateCause.DROPPED_BEYOND_MARGIN: "dropped beyond margin",
    GateCause.WORSE_ON_OWN_EVIDENCE: "worse on own evidence",
    GateCause.STRADDLES_MARGIN: "inconclusive",
}

# Gates for which more pairs could change the outcome: "needs N pairs" is shown beside them
# (never beside a drop, which no number of pairs would pass).
_MORE_PAIRS_HELP = frozenset({GateCause.STRADDLES_MARGIN, GateCause.NO_CASE_CHANGED})


def pct(level: float) -> str:
    """A confidence level as the reports print it: 0.95 -> \"95%\", 0.975 -> \"97.5%\"."""
    text = f"{level * 100:.4f}".rstrip("0").rstrip(".")
    return f"{text}%"


def headline(verdict: Verdict) -> str:
    """The comment's headline: "✅ Passed" only when every decided quality gate passed on evidence."""
    if verdict.decision == "pass":
        return _PASS_HEADLINE.get(verdict.cause, HEADLINE["pass"])
    return HEADLINE[verdict.decision]


def gate_phrase(g: GateResult | GateRef) -> str:
    """The gate's cause in a few words ("real drop", "below min 0.7", "inconclusive", ...)."""
    if isinstance(g, GateResult) and g.cause == GateCause.BELOW_FLOOR and g.floor is not None:
        return f"below min {g.floor:g}"
    if isinstance(g, GateResult) and g.cause == GateCause.ABOVE_CEILING and g.ceiling is not None:
        return f"above max {g.ceiling:g}"
    return CAUSE_PHRASE.get(g.cause, str(g.cause).replace("_", " "))


def pairs_to_decide(g: GateResult) -> int | None:
    """The pairs a gate would need to be decided at its margin, when more pairs could help."""
    if g.decision == "pass" or g.cause not in _MORE_PAIRS_HELP or not g.underpowered:
        return None
    return g.pairs_needed


def informs_only(g: GateResult) -> bool:
    """A gating gate that reviews but, as decided, does not enter the overall decision."""
    return g.gating and g.decision == "review" and not g.counts


def gate_counts(gates: list[GateResult]) -> dict[str, int]:
    """Counts of gating gates as every report states them: ``block``, ``pass``, ``skipped`` by
    decision; ``review``: reviews that count toward the overall decision; ``inform``: reviews
    that do not (shown, not deciding)."""
    gating = [g for g in gates if g.gating]
    counts = {d: sum(1 for g in gating if g.decision == d) for d in ("block", "review", "pass", "skipped")}
    counts["inform"] = sum(1 for g in gating if informs_only(g))
    counts["review"] -= counts["inform"]
    return counts


def tally(comparison: Comparison) -> dict[str, int]:
    """:func:`gate_counts` of the comparison, and ``not_gating`` (gates shown for information):
    they add up to ``len(comparison.gates)``."""
    counts = gate_counts(comparison.gates)
    counts["not_gating"] = sum(1 for g in comparison.gates if not g.gating)
    return counts


def _gate_text(g: GateResult | GateRef, level: str) -> str:
    return f"{g.metric} on {g.slice} (Δ {fmt_signed(g.delta)}, {level} interval {fmt_interval(g.lo, g.hi)})"


def worse_line(ref: GateRef, level: str) -> str:
    """One gate worse on its own evidence, with its interval."""
    return f"{_gate_text(ref, level)}: {gate_phrase(ref)}"


def _ruled_out(verdict: Verdict, margin: float) -> str:
    if verdict.ruled_out is None:
        return "no quality gate on all cases was decided"
    text = f"this set rules out drops larger than {fmt_num(verdict.ruled_out)} on all cases"
    if verdict.cases_needed is not None:
        text += f"; margin {margin:g} needs {verdict.cases_needed:,}+ cases"
    return text


def why_line(comparison: Comparison, level: str | None = None) -> str:
    """One plain-text sentence rendering the verdict's cause (names are user data: escape it).

    ``level``: the intervals' confidence as printed (default: the settings', e.g. "95%").
    """
    verdict = comparison.verdict
    if level is None:
        level = pct(comparison.settings.interval_confidence)
    return _why(comparison, verdict.cause, verdict.decision, level)


def _why(comparison: Comparison, cause: VerdictCause, decision: str, level: str) -> str:
    verdict = comparison.verdict
    if cause == VerdictCause.NOTHING_COMPARED:
        return f"{comparison.overall_reason or 'nothing could be compared'}; no gate was decided, so this is not a pass."
    if cause == VerdictCause.ACCEPTED:
        who = verdict.accepted_by or "a maintainer"
        commit = f" commit {verdict.accepted_commit[:12]}" if verdict.accepted_commit else ""
        would = {"block": "block", "review": "need review"}.get(verdict.comparison_decision, "pass")
        reason = _why(comparison, verdict.comparison_cause, verdict.comparison_decision, level)
        return f"{who} accepted{commit}; the runs alone would {would}: {reason}"
    if cause == VerdictCause.POLICY_CHANGED:
        reason = _why(comparison, verdict.comparison_cause, verdict.comparison_decision, level)
        return (
            "the pull request changes the gate's policy or dataset, so a maintainer must look; "
            f"the data alone: {reason}"
        )
    explain = _DATA_CAUSES.get(cause)
    if explain is not None:
        return explain(comparison, level)
    return f"nothing was verified at the margin: {_ruled_out(verdict, comparison.settings.margin)}."


def _why_block(comparison: Comparison, level: str) -> str:
    """The largest drop among the blocking gates (a floor or ceiling crossed says so)."""
    blocks = [g for g in comparison.gating() if g.decision == "block"]
    g = min(blocks, key=lambda x: (x.delta if x.delta is not None else 0.0, x.metric, x.slice))
    if g.cause in (GateCause.BELOW_FLOOR, GateCause.ABOVE_CEILING):
        return (
            f"{g.metric} on {g.slice} is {gate_phrase(g)}: the candidate's {level} interval "
            f"[{fmt_num(g.candidate_lo)}, {fmt_num(g.candidate_hi)}] lies wholly beyond it."
        )
    more = f"; {len(blocks)} gates block" if len(blocks) > 1 else ""
    bound = (
        f"and so does its family-wise bound over {_family(comparison.settings.family_size)}"
        if comparison.settings.family_wise
        else "gate by gate (gate.family_wise is false)"
    )
    return (
        f"{g.metric} on {g.slice} dropped: Δ {fmt_signed(g.delta)}, {level} interval "
        f"{fmt_interval(g.lo, g.hi)} lies wholly below zero, {bound}{more}."
    )


def _why_review(comparison: Comparison, level: str) -> str:
    """How many counted gates review, and the one whose interval reaches lowest."""
    reviews = [g for g in comparison.gating() if g.decision == "review" and g.counts]
    g = min(reviews, key=lambda x: (x.hi if x.hi is not None else 0.0, x.metric, x.slice))
    count = len(reviews)
    head = f"nothing blocks, but {count} gate{'s need' if count != 1 else ' needs'} a look"
    return f"{head}: {_gate_text(g, level)} {_review_phrase(g)}."


def _why_worse(comparison: Comparison, level: str) -> str:
    """Gates worse on their own evidence, not across the family (the surest first)."""
    worse, family = comparison.verdict.worse, _family(comparison.settings.family_size)
    if len(worse) == 1:
        return (
            f"nothing blocks or needs review, but {_gate_text(worse[0], level)} is worse on its "
            f"own evidence: its interval lies wholly below zero, which is not significant across the "
            f"family of {family}."
        )
    return (
        f"nothing blocks or needs review, but {len(worse)} gates are worse on their own evidence: each "
        f"interval lies wholly below zero, which is not significant across the family of "
        f"{family}; the surest is {_gate_text(worse[0], level)}."
    )


def _why_verified(comparison: Comparison, level: str) -> str:
    decided = sum(1 for g in comparison.gating() if g.decision == "pass")
    subject = "the one decided gate stays" if decided == 1 else f"all {decided} decided gates stay"
    return (
        f"{subject} above −margin {comparison.settings.margin:g} at {level}: verified on cases that changed."
    )


# What the data alone decided, one sentence per cause (the rest: nothing verified at the margin).
_DATA_CAUSES: dict[VerdictCause, Callable[[Comparison, str], str]] = {
    VerdictCause.BLOCK: _why_block,
    VerdictCause.REVIEW: _why_review,
    VerdictCause.WORSE_UNCONFIRMED: _why_worse,
    VerdictCause.VERIFIED_WITHIN_MARGIN: _why_verified,
}


def _family(size: int) -> str:
    return f"{size} distinct gate{'s' if size != 1 else ''}"


def _review_phrase(g: GateResult) -> str:
    if g.cause == GateCause.DROP_CONFIRMED:
        return "dropped: significant across the family, short of a block"
    if g.cause == GateCause.DROPPED_BEYOND_MARGIN:
        return f"dropped by more than the margin {g.margin:g}: its interval lies wholly below −margin"
    if g.cause == GateCause.WORSE_ON_OWN_EVIDENCE:
        return "is worse on its own evidence: its interval lies wholly below zero"
    if g.cause == GateCause.NO_CASE_CHANGED:
        return f"had no case change, but {g.n} pairs cannot rule out a drop of the margin {g.margin:g}"
    return f"is inconclusive: its interval reaches below −margin {g.margin:g} and above zero"
