"""Judge metrics: exact values from scripted verdicts, skip rules, judge errors, calls per case."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from judge_helpers import make_session
from metric_helpers import chunk, judge_record, make_case, make_output, score
from servers.judge_server import JudgeServer, Step, reply, user_prompt

from gate.metrics import registry
from gate.metrics.base import REASON_NO_CONTEXT, REASON_NO_EXPECTED_ANSWER, REASON_NO_JUDGE, ScoringContext
from gate.metrics.generation import REASON_NO_CITATIONS
from gate.metrics.judged import (
    REASON_EMPTY_CONTEXT,
    REASON_NO_CLAIMS,
    REASON_NO_REFERENCE_CLAIMS,
)
from gate.model.records import CaseOutput

JUDGE_METRICS = (
    "generation.groundedness",
    "generation.citation_support",
    "generation.answer_relevance",
    "generation.completeness",
    "judge.context_recall",
    "judge.context_precision",
    "judge.context_relevance",
    "judge.faithfulness",
)
CONTEXT = [chunk("c1", "Refunds are accepted within 30 days."), chunk("c2", "Shipping takes 5 days.")]


def claims(*flags: bool, key: str = "supported") -> dict[str, Any]:
    return {"claims": [{"claim": f"claim {i}", key: f} for i, f in enumerate(flags)]}


@pytest.fixture
def ctx(judge_server: JudgeServer, tmp_path: Path) -> ScoringContext:
    return ScoringContext(judge=make_session(judge_server.openai_url, tmp_path / "store.sqlite"))


def answered(text: str = "Refunds within 30 days, shipping 5 days.", **kw: Any) -> CaseOutput:
    return make_output(CONTEXT, text, **kw)


def test_registered_as_judge_metrics_needing_a_judge() -> None:
    specs = registry()
    for name in JUDGE_METRICS:
        assert specs[name].kind == "judge"
        assert "judge" in specs[name].needs


def test_without_a_judge_every_judge_metric_skips_with_the_reason() -> None:
    case = make_case(expected_answer="30 days")
    output = answered(citations=["c1"])
    for name in JUDGE_METRICS:
        result = score(name, case, output, ScoringContext())
        assert (result.status, result.value, result.reason) == ("skipped", None, REASON_NO_JUDGE)


def test_groundedness_is_supported_over_total_claims(judge_server: JudgeServer, ctx: ScoringContext) -> None:
    judge_server.script(reply(claims(True, False, True)))
    result = score("generation.groundedness", make_case(), answered(), ctx)
    assert result.status == "scored" and result.value == pytest.approx(2 / 3, abs=0)
    assert judge_record(result)["verdict"] == claims(True, False, True)
    assert judge_record(result)["judge_raw_json"] and judge_record(result)["calls"] == 1


def test_groundedness_of_a_refusal_is_not_applicable(judge_server: JudgeServer, ctx: ScoringContext) -> None:
    judge_server.script(reply({"claims": []}))
    result = score("generation.groundedness", make_case(kind="unanswerable"), answered("I don't know."), ctx)
    assert (result.status, result.value, result.reason) == ("not_applicable", None, REASON_NO_CLAIMS)
    assert judge_record(result)["judge_raw_json"] == ['{"claims": []}']


def test_groundedness_without_context_skips_without_a_call(
    judge_server: JudgeServer, ctx: ScoringContext
) -> None:
    result = score("generation.groundedness", make_case(), make_output(None, "An answer."), ctx)
    assert (result.status, result.reason) == ("skipped", REASON_NO_CONTEXT)
    assert judge_server.count == 0


def test_invalid_twice_is_judge_error_with_raw_replies(
    judge_server: JudgeServer, ctx: ScoringContext
) -> None:
    judge_server.script(reply("nope"), reply({"claims": "all fine"}))
    result = score("generation.groundedness", make_case(), answered(), ctx)
    assert result.status == "judge_error" and result.value is None
    assert "after one repair retry" in (result.reason or "")
    assert judge_record(result)["judge_raw_json"] == ["nope", '{"claims": "all fine"}']
    assert judge_server.count == 2


def test_context_precision_shares_the_groundedness_call(
    judge_server: JudgeServer, ctx: ScoringContext
) -> None:
    judge_server.script(reply(claims(True, True, False, False)))
    case, output = make_case(), answered()
    grounded = score("generation.groundedness", case, output, ctx)
    precision = score("judge.context_precision", case, output, ctx)
    assert grounded.value == precision.value == 0.5
    assert judge_server.count == 1


def test_answer_chunks_take_precedence_over_retrieve(judge_server: JudgeServer, ctx: ScoringContext) -> None:
    judge_server.script(reply(claims(True)))
    output = make_output(
        [chunk("r1", "RETRIEVED TEXT")], "x", answer_chunks=[chunk("a1", "ANSWER CHUNK TEXT")]
    )
    score("generation.groundedness", make_case(), output, ctx)
    prompt = user_prompt(judge_server.requests[0])
    assert "ANSWER CHUNK TEXT" in prompt and "RETRIEVED TEXT" not in prompt


def test_citation_support_dedups_and_counts_missing_as_unsupported(
    judge_server: JudgeServer, ctx: ScoringContext
) -> None:
    # c1 supported, c2 without a verdict, c9 not in the context: 1 of 3 deduplicated ids
    judge_server.script(reply({"verdicts": [{"chunk_id": "c1", "supported": True}]}))
    result = score(
        "generation.citation_support", make_case(), answered(citations=["c1", "c2", "c1", "c9"]), ctx
    )
    assert result.status == "scored" and result.value == pytest.approx(1 / 3, abs=0)
    assert judge_record(result)["missing_verdicts"] == ["c2"] and judge_record(result)["not_in_context"] == [
        "c9"
    ]
    prompt = user_prompt(judge_server.requests[0])
    assert prompt.count("[chunk c1]") == 1 and "[chunk c2]" in prompt and "[chunk c9]" not in prompt
    assert judge_server.count == 1  # one batched call


def test_citation_support_conflicting_verdicts_count_unsupported(
    judge_server: JudgeServer, ctx: ScoringContext
) -> None:
    judge_server.script(
        reply(
            {
                "verdicts": [
                    {"chunk_id": "c1", "supported": True},
                    {"chunk_id": "c1", "supported": False},
                    {"chunk_id": "c2", "supported": True},
                ]
            }
        )
    )
    result = score("generation.citation_support", make_case(), answered(citations=["c1", "c2"]), ctx)
    assert result.value == 0.5


def test_citation_support_skips_and_zero_cases(judge_server: JudgeServer, ctx: ScoringContext) -> None:
    none = score("generation.citation_support", make_case(), answered(citations=[]), ctx)
    assert (none.status, none.reason) == ("skipped", REASON_NO_CITATIONS)
    absent = score("generation.citation_support", make_case(), answered(citations=["x1", "x2"]), ctx)
    assert (absent.status, absent.value) == ("scored", 0.0)
    assert judge_server.count == 0


@pytest.mark.parametrize(("band", "value"), [("relevant", 1.0), ("partial", 0.5), ("irrelevant", 0.0)])
def test_answer_relevance_bands(
    judge_server: JudgeServer, ctx: ScoringContext, band: str, value: float
) -> None:
    judge_server.script(reply({"verdict": band, "reason": "r"}))
    result = score("generation.answer_relevance", make_case(), answered(), ctx)
    assert (result.status, result.value) == ("scored", value)


@pytest.mark.parametrize(("band", "value"), [("complete", 1.0), ("partial", 0.5), ("missing", 0.0)])
def test_completeness_bands(judge_server: JudgeServer, ctx: ScoringContext, band: str, value: float) -> None:
    judge_server.script(reply({"verdict": band}))
    result = score("generation.completeness", make_case(expected_answer="30 days"), answered(), ctx)
    assert (result.status, result.value) == ("scored", value)
    assert "30 days" in user_prompt(judge_server.requests[0])


def test_completeness_needs_an_expected_answer(judge_server: JudgeServer, ctx: ScoringContext) -> None:
    result = score("generation.completeness", make_case(), answered(), ctx)
    assert (result.status, result.reason) == ("skipped", REASON_NO_EXPECTED_ANSWER)
    assert judge_server.count == 0


def test_band_outside_the_three_is_repaired_once(judge_server: JudgeServer, ctx: ScoringContext) -> None:
    judge_server.script(reply({"verdict": "mostly"}), reply({"verdict": "partial"}))
    result = score("generation.answer_relevance", make_case(), answered(), ctx)
    assert result.value == 0.5 and judge_server.count == 2


def test_context_recall_is_covered_reference_claims(judge_server: JudgeServer, ctx: ScoringContext) -> None:
    judge_server.script(reply(claims(True, True, True, False, key="covered")))
    case = make_case(expected_answer="30 days; 5 days; free; by mail")
    result = score("judge.context_recall", case, make_output(CONTEXT, None), ctx)
    assert (result.status, result.value) == ("scored", 0.75)  # needs no answer
    no_ref = score("judge.context_recall", make_case(), answered(), ctx)
    assert (no_ref.status, no_ref.reason) == ("skipped", REASON_NO_EXPECTED_ANSWER)
    judge_server.script(reply({"claims": []}))
    empty = score("judge.context_recall", make_case(id="c2", expected_answer="n/a"), answered(), ctx)
    assert (empty.status, empty.reason) == ("not_applicable", REASON_NO_REFERENCE_CLAIMS)


def test_context_relevance_is_relevant_chunks_over_chunks(
    judge_server: JudgeServer, ctx: ScoringContext
) -> None:
    three = [*CONTEXT, chunk("c3", "Our office is in Oslo.")]
    judge_server.script(
        reply({"verdicts": [{"chunk_id": "c1", "relevant": True}, {"chunk_id": "c3", "relevant": False}]})
    )
    result = score("judge.context_relevance", make_case(), make_output(three, None), ctx)
    assert result.status == "scored" and result.value == pytest.approx(1 / 3, abs=0)
    empty = score("judge.context_relevance", make_case(), make_output([], None), ctx)
    assert (empty.status, empty.reason) == ("not_applicable", REASON_EMPTY_CONTEXT)
    assert judge_server.count == 1


def test_faithfulness_requires_every_claim_entailed(judge_server: JudgeServer, ctx: ScoringContext) -> None:
    judge_server.script(
        reply(claims(True, True, key="entailed")),
        reply(claims(True, False, key="entailed")),
        reply({"claims": []}),
    )
    assert score("judge.faithfulness", make_case(id="a"), answered("one"), ctx).value == 1.0
    assert score("judge.faithfulness", make_case(id="b"), answered("two"), ctx).value == 0.0
    none = score("judge.faithfulness", make_case(id="c"), answered("three"), ctx)
    assert (none.status, none.reason) == ("not_applicable", REASON_NO_CLAIMS)
    assert judge_server.count == 3


def test_all_judge_metrics_on_one_case_make_seven_calls(
    judge_server: JudgeServer, ctx: ScoringContext
) -> None:
    def responder(body: dict[str, Any]) -> Step:
        prompt = user_prompt(body)
        if '"entailed"' in prompt:
            return reply(claims(True, key="entailed"))
        if '"covered"' in prompt:
            return reply(claims(True, key="covered"))
        if '"claims"' in prompt:
            return reply(claims(True))
        if '"relevant": true' in prompt:
            return reply(
                {"verdicts": [{"chunk_id": "c1", "relevant": True}, {"chunk_id": "c2", "relevant": True}]}
            )
        if '"chunk_id"' in prompt:
            return reply({"verdicts": [{"chunk_id": "c1", "supported": True}]})
        if '"complete"' in prompt:
            return reply({"verdict": "complete"})
        return reply({"verdict": "relevant"})

    judge_server.responder = responder
    case, output = make_case(expected_answer="30 days"), answered(citations=["c1"])
    results = {name: score(name, case, output, ctx) for name in JUDGE_METRICS}
    assert {name: r.value for name, r in results.items()} == dict.fromkeys(JUDGE_METRICS, 1.0)
    assert judge_server.count == 7  # groundedness and context precision share one call
    assert all(body["temperature"] == 0 for body in judge_server.requests)


def test_composite_reuses_judge_verdicts_and_failures(judge_server: JudgeServer, ctx: ScoringContext) -> None:
    ctx.composite_weights = {"generation.groundedness": 1.0, "generation.answer_relevance": 1.0}
    judge_server.script(reply(claims(True, False)), reply({"verdict": "partial"}))
    case, output = make_case(), answered()
    grounded = score("generation.groundedness", case, output, ctx)
    relevance = score("generation.answer_relevance", case, output, ctx)
    assert (grounded.value, relevance.value) == (0.5, 0.5)
    assert score("composite.trust", case, output, ctx).value == pytest.approx(0.5, abs=1e-12)
    assert judge_server.count == 2  # the composite's components came from the session, not new calls
    judge_server.script(reply("no"), reply("still no"))
    other = make_case(id="c2", question="Another question?")
    assert score("generation.groundedness", other, output, ctx).status == "judge_error"
    assert judge_server.count == 4
    ctx.composite_weights = {"generation.groundedness": 1.0}
    result = score("composite.trust", other, output, ctx)
    assert (result.status, result.reason) == ("skipped", "no component metric is defined for this case")
    assert judge_server.count == 4  # a failed verdict is not asked again in the same session


def test_chunk_ids_with_delimiter_characters_still_match(
    judge_server: JudgeServer, ctx: ScoringContext
) -> None:
    odd = [chunk("a<<<b", "Refunds within 30 days."), chunk("c2", "Other.")]
    judge_server.script(
        reply({"verdicts": [{"chunk_id": "a‹‹‹b", "relevant": True}, {"chunk_id": "c2", "relevant": False}]})
    )
    result = score("judge.context_relevance", make_case(), make_output(odd, None), ctx)
    assert result.value == 0.5
    assert "[chunk a‹‹‹b]" in user_prompt(judge_server.requests[0])


def test_reused_verdict_records_no_calls(judge_server: JudgeServer, ctx: ScoringContext) -> None:
    judge_server.script(reply(claims(True)))
    case, output = make_case(), answered()
    assert judge_record(score("generation.groundedness", case, output, ctx))["calls"] == 1
    shared = judge_record(score("judge.context_precision", case, output, ctx))
    assert (shared["calls"], shared["reused"]) == (0, True)


def test_judge_error_is_excluded_from_the_mean_and_counted_in_errors(
    judge_server: JudgeServer, ctx: ScoringContext
) -> None:
    from gate.metrics.aggregate import summarize
    from gate.model.artifact import Row
    from gate.run.scoring import score_case

    name = "generation.groundedness"
    judge_server.script(reply(claims(True, False)), reply("not json"), reply({"claims": "still wrong"}))
    rows = []
    for case_id in ("ok", "bad"):
        case = make_case(id=case_id, question=f"Question {case_id}?")
        rows.append(
            Row(case_id=case_id, kind="qa", status="ok", metrics=score_case(case, answered(), ctx, [name]))
        )
    assert [r.metrics[name].status for r in rows] == ["scored", "judge_error"]
    assert judge_server.count == 3  # one call, then one call and exactly one repair retry
    m = summarize(rows, [name], []).slices["all"][name]
    assert (m.mean, m.p50, m.p95, m.scored, m.errored) == (0.5, 0.5, 0.5, 1, 1)
