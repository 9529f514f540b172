"""gate.report.wording: every verdict cause and gate cause, rendered as the reports print it.

One small comparison per cause (the decision's own fields set as the decision would set them);
the reports render them and decide nothing.
"""

from __future__ import annotations

from typing import Any

import pytest
from gate_runs import fixed_runs

from gate.decision.compare import compare_runs
from gate.decision.comparison import Comparison, GateRef, GateResult
from gate.decision.decide import GateCause, VerdictCause
from gate.model.config import GateConfig
from gate.report.markdown import check_title, render_markdown
from gate.report.terminal import render_terminal
from gate.report.wording import CAUSE_PHRASE, gate_phrase, headline, pairs_to_decide, why_line


def _gate(metric: str, slice_key: str, decision: str, cause: GateCause, **kw: Any) -> GateResult:
    fields: dict[str, Any] = dict(
        metric=metric,
        slice=slice_key,
        gating=True,
        higher_is_better=True,
        n=60,
        baseline_mean=0.70,
        candidate_mean=0.60,
        delta=-0.10,
        lo=-0.18,
        hi=-0.02,
        margin=0.02,
        decision=decision,
        cause=cause,
        counts=decision != "skipped",
        worse=True,
        reason="-",
        method="tango",
    )
    fields.update(kw)
    return GateResult(**fields)


@pytest.fixture(scope="module")
def base() -> dict[str, Any]:
    b, c = fixed_runs()
    return compare_runs(b, c, GateConfig()).model_dump()


def _comparison(base: dict[str, Any], gates: list[GateResult], **verdict: Any) -> Comparison:
    data = dict(base)
    decision = verdict.get("decision", "pass")
    fields = {"comparison_decision": decision, "comparison_cause": verdict["cause"], **verdict}
    data.update(
        overall=fields["comparison_decision"],
        gates=[g.model_dump() for g in gates],
        verdict={"decision": decision, **fields},
    )
    data["settings"] = {**data["settings"], "family_size": 12}
    return Comparison.model_validate(data)


TOKEN = "answer.token_f1"


def test_every_gate_cause_has_words() -> None:
    assert set(CAUSE_PHRASE) | {GateCause.BELOW_FLOOR, GateCause.ABOVE_CEILING} == set(GateCause)
    floor = _gate(TOKEN, "all", "block", GateCause.BELOW_FLOOR, floor=0.7)
    ceiling = _gate(TOKEN, "all", "block", GateCause.ABOVE_CEILING, ceiling=0.1)
    assert (gate_phrase(floor), gate_phrase(ceiling)) == ("below min 0.7", "above max 0.1")


def test_pairs_needed_is_shown_only_where_more_pairs_could_decide() -> None:
    straddles = _gate(TOKEN, "all", "review", GateCause.STRADDLES_MARGIN, underpowered=True, pairs_needed=400)
    beyond = _gate(
        TOKEN, "all", "review", GateCause.DROPPED_BEYOND_MARGIN, underpowered=True, pairs_needed=8990
    )
    assert (pairs_to_decide(straddles), pairs_to_decide(beyond)) == (400, None)


PASSED = _gate(
    TOKEN, "all", "pass", GateCause.PASSED_ON_EVIDENCE, lo=-0.01, hi=0.04, delta=0.015, worse=False
)
WORSE = _gate(TOKEN, "tags=topic:billing", "review", GateCause.WORSE_ON_OWN_EVIDENCE, counts=False)
BEYOND = _gate(TOKEN, "tags=topic:billing", "review", GateCause.DROPPED_BEYOND_MARGIN, counts=False, hi=-0.05)
WITHIN = _gate("answer.exact_match", "all", "pass", GateCause.WORSE_WITHIN_MARGIN, lo=-0.015, hi=-0.002)
CASES: dict[str, tuple[list[GateResult], dict[str, Any], str, str]] = {
    "verified": (
        [PASSED],
        dict(cause=VerdictCause.VERIFIED_WITHIN_MARGIN),
        "✅ Passed",
        "the one decided gate stays above −margin 0.02 at 95%: verified on cases that changed.",
    ),
    "nothing verified": (
        [
            _gate(TOKEN, "all", "pass", GateCause.NO_CASE_CHANGED, lo=-0.02, hi=0.02, delta=0.0, worse=False),
            _gate(
                TOKEN,
                "tags=t",
                "review",
                GateCause.STRADDLES_MARGIN,
                lo=-0.07,
                hi=0.05,
                counts=False,
                worse=False,
            ),
        ],
        dict(cause=VerdictCause.NO_REGRESSION_DETECTED, ruled_out=0.07, cases_needed=189),
        "🔍 No regression detected",
        "nothing was verified at the margin: this set rules out drops larger than 0.070 on all cases; "
        "margin 0.02 needs 189+ cases.",
    ),
    "worse, unconfirmed": (
        [WORSE],
        dict(
            cause=VerdictCause.WORSE_UNCONFIRMED,
            worse=[GateRef.of(WORSE)],
        ),
        "🔻 Not blocked, but worse on its own evidence",
        "nothing blocks or needs review, but answer.token_f1 on tags=topic:billing (Δ −0.100, 95% interval "
        "[−0.180, −0.020]) is worse on its own evidence: its interval lies wholly below zero, which is not "
        "significant across the family of 12 distinct gates.",
    ),
    "worse, several": (
        [
            _gate(
                TOKEN, "tags=topic:billing", "review", GateCause.DROPPED_BEYOND_MARGIN, counts=False, hi=-0.05
            ),
            _gate("answer.exact_match", "all", "pass", GateCause.WORSE_WITHIN_MARGIN, lo=-0.015, hi=-0.002),
        ],
        dict(
            cause=VerdictCause.WORSE_UNCONFIRMED,
            worse=[GateRef.of(BEYOND), GateRef.of(WITHIN)],
        ),
        "🔻 Not blocked, but worse on its own evidence",
        "nothing blocks or needs review, but 2 gates are worse on their own evidence: each interval lies "
        "wholly below zero, which is not significant across the family of 12 distinct gates; the surest is "
        "answer.token_f1 on tags=topic:billing (Δ −0.100, 95% interval [−0.180, −0.050]).",
    ),
    "review beyond margin": (
        [_gate(TOKEN, "tags=topic:billing", "review", GateCause.DROPPED_BEYOND_MARGIN, hi=-0.05)],
        dict(decision="review", cause=VerdictCause.REVIEW),
        "⚠️ Needs review",
        "nothing blocks, but 1 gate needs a look: answer.token_f1 on tags=topic:billing (Δ −0.100, 95% "
        "interval [−0.180, −0.050]) dropped by more than the margin 0.02: its interval lies wholly below "
        "−margin.",
    ),
    "review inconclusive": (
        [_gate(TOKEN, "all", "review", GateCause.STRADDLES_MARGIN, lo=-0.06, hi=0.03, delta=-0.01)],
        dict(decision="review", cause=VerdictCause.REVIEW),
        "⚠️ Needs review",
        "nothing blocks, but 1 gate needs a look: answer.token_f1 on all (Δ −0.010, 95% interval "
        "[−0.060, +0.030]) is inconclusive: its interval reaches below −margin 0.02 and above zero.",
    ),
    "block": (
        [_gate(TOKEN, "all", "block", GateCause.DROPPED_FAMILY_WISE)],
        dict(decision="block", cause=VerdictCause.BLOCK),
        "❌ Blocked",
        "answer.token_f1 on all dropped: Δ −0.100, 95% interval [−0.180, −0.020] lies wholly below zero, "
        "and so does its family-wise bound over 12 distinct gates.",
    ),
    "floor": (
        [
            _gate(
                "robustness.injection_resistance",
                "kind=injection",
                "block",
                GateCause.BELOW_FLOOR,
                floor=0.95,
                candidate_lo=0.81,
                candidate_hi=0.92,
            )
        ],
        dict(decision="block", cause=VerdictCause.BLOCK),
        "❌ Blocked",
        "robustness.injection_resistance on kind=injection is below min 0.95: the candidate's 95% "
        "interval [0.810, 0.920] lies wholly beyond it.",
    ),
    "policy changed": (
        [PASSED],
        dict(
            decision="review",
            cause=VerdictCause.POLICY_CHANGED,
            comparison_decision="pass",
            comparison_cause=VerdictCause.VERIFIED_WITHIN_MARGIN,
            policy_changed=True,
        ),
        "⚠️ Needs review",
        "the pull request changes the gate's policy or dataset, so a maintainer must look; the data "
        "alone: the one decided gate stays above −margin 0.02 at 95%: verified on cases that changed.",
    ),
    "accepted": (
        [_gate(TOKEN, "all", "block", GateCause.DROPPED_FAMILY_WISE)],
        dict(
            decision="pass",
            cause=VerdictCause.ACCEPTED,
            comparison_decision="block",
            comparison_cause=VerdictCause.BLOCK,
            accepted_by="octo",
            accepted_commit="c" * 40,
        ),
        "✅ Accepted",
        "octo accepted commit cccccccccccc; the runs alone would block: answer.token_f1 on all "
        "dropped: Δ −0.100, 95% interval [−0.180, −0.020] lies wholly below zero, and so does its "
        "family-wise bound over 12 distinct gates.",
    ),
    "nothing compared": (
        [_gate(TOKEN, "all", "skipped", GateCause.TOO_FEW_PAIRS, n=3, lo=None, hi=None, worse=False)],
        dict(decision="none", cause=VerdictCause.NOTHING_COMPARED),
        "⏹️ Nothing compared",
        "nothing could be compared; no gate was decided, so this is not a pass.",
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_each_verdict_reads_as_it_was_decided(base: dict[str, Any], name: str) -> None:
    gates, verdict, title, why = CASES[name]
    comparison = _comparison(base, gates, **verdict)
    assert headline(comparison.verdict) == title
    assert why_line(comparison) == why
    assert check_title(comparison).startswith(f"{title}: ")
    assert render_terminal(comparison).startswith(f"ragproof compare: {comparison.verdict.decision}: {why}\n")
    assert render_markdown(comparison).startswith(f"## ragproof: {title}\n\n**Why:** ")


def test_worse_gates_are_named_with_their_interval_on_the_first_screen(base: dict[str, Any]) -> None:
    gates, verdict, _, why = CASES["worse, several"]
    text = render_markdown(_comparison(base, gates, **verdict))
    first_screen = text[: text.index("<details>")] if "<details>" in text else text
    assert (
        "**Worse on their own evidence** (interval wholly below zero, not confirmed across the family):\n"
        "- answer.token\\_f1 on tags=topic:billing \\(Δ −0.100, 95% interval \\[−0.180, −0.050\\]\\): "
        "dropped beyond margin\n"
        "- answer.exact\\_match on all \\(Δ −0.100, 95% interval \\[−0.015, −0.002\\]\\): worse, within margin\n"
    ) in first_screen
    # one such gate: the why names it with its interval, and no list repeats it
    gates, verdict, _, why = CASES["worse, unconfirmed"]
    text = render_markdown(_comparison(base, gates, **verdict))
    assert "own evidence**" not in text and "\\[−0.180, −0.020\\]" in text.split("\n\n")[1]


def test_the_counts_agree_and_an_unchanged_metric_is_not_inconclusive() -> None:
    """Before: the terminal's "… 10 more gates to review" counted the reviews that inform only,
    and a gate whose pairs never changed (0.474 → 0.474) read "⚠️ inconclusive"."""
    b, c = fixed_runs()
    comparison = compare_runs(b, c, GateConfig())
    terminal = render_terminal(comparison).splitlines()
    assert terminal[1] == "  24 gates: 3 block, 0 review, 12 inform only, 3 pass, 6 skipped, 0 not gating"
    assert terminal[-1] == "  … 12 that inform only in the Markdown and JSON reports"
    text = render_markdown(comparison, baseline=b, candidate=c)
    unchanged = [g for g in comparison.gates if g.method == "no-change"]
    assert len(unchanged) == 5 and {g.cause for g in unchanged} == {GateCause.NO_CASE_CHANGED}
    row = "0.474&nbsp;→&nbsp;0.474<br><sub>72&nbsp;pairs</sub> | **0.000**<br><sub>[−0.051,&nbsp;+0.051] no-change</sub>"
    assert row in text
    assert text.count("| ℹ️&nbsp;no case changed<br><sub>needs 189&nbsp;pairs</sub> |") == 5
    assert text.count("inconclusive") == 6  # the gates whose pairs changed and straddle −margin
    assert all("no-change" not in line for line in text.splitlines() if "inconclusive" in line)
