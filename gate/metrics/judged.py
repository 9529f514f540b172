"""Judge-backed metrics: docs/metrics.md, "Judge metrics".

Every metric here needs a configured judge; without one the registry skips it with
"no judge configured". The context is ``CaseOutput.context_chunks()``: the answer's own
retrieved chunks, else retrieve()'s result, else the metric skips. A judge that fails (a
transport error, or an invalid reply after the one repair retry) marks the metric
``judge_error`` for the case, with the raw replies kept in ``judge``.

Formulas (calls per case in brackets; identical prompts and inputs are judged once per run):

- generation.groundedness [1, task "claims"]: supported claims / claims of the answer;
  zero claims -> not_applicable.
- judge.context_precision [0 extra: the same "claims" verdicts]: the same ratio under the
  RAG-metrics name (answer claims supported by the context): an alias of groundedness, shown
  but not gating by default (the one number would otherwise block twice).
- judge.faithfulness [1, "faithfulness"]: 1.0 when every claim of the answer is entailed by
  the context (stricter than supported: no added detail), else 0.0; zero claims -> not_applicable.
- generation.citation_support [1 batched, or 0 when no cited id is in the context]:
  supported cited ids / deduplicated cited ids; a cited id absent from the context or
  without a verdict counts unsupported; no citations -> skipped.
- generation.answer_relevance [1]: relevant 1.0, partial 0.5, irrelevant 0.0.
- generation.completeness [1, needs expected_answer]: complete 1.0, partial 0.5, missing 0.0.
- judge.context_recall [1, needs expected_answer]: reference claims covered by the context /
  reference claims; zero claims -> not_applicable.
- judge.context_relevance [1 batched]: chunks relevant to the question / context chunks (a
  chunk without a verdict counts irrelevant); an empty context -> not_applicable.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gate.core.errors import JudgeError
from gate.judge.replies import (
    AnswerRelevanceReply,
    CitationSupportReply,
    ClaimsReply,
    CompletenessReply,
    ContextRecallReply,
    ContextRelevanceReply,
    FaithfulnessReply,
)
from gate.judge.templates import neutralise
from gate.metrics.base import ScoringContext, metric
from gate.metrics.generation import REASON_NO_CITATIONS, cited_ids
from gate.model.dataset import Case
from gate.model.records import CaseOutput, MetricResult

if TYPE_CHECKING:  # the session (HTTP client, templates) loads only when a judge is configured
    from gate.judge.session import Verdict

ANSWER_RELEVANCE_BANDS = {"relevant": 1.0, "partial": 0.5, "irrelevant": 0.0}
COMPLETENESS_BANDS = {"complete": 1.0, "partial": 0.5, "missing": 0.0}
REASON_NO_CLAIMS = "the answer makes no factual claim"
REASON_NO_REFERENCE_CLAIMS = "the expected answer makes no factual claim"
REASON_EMPTY_CONTEXT = "the context has no chunks"


def context_payload(output: CaseOutput) -> list[dict[str, str]]:
    """The context chunks as the prompts receive them (id and text only)."""
    return [{"id": c.id, "text": c.text} for c in output.context_chunks() or []]


def _ask(ctx: ScoringContext, task: str, inputs: dict[str, Any]) -> Verdict | MetricResult:
    try:
        return ctx.judge_session().ask(task, inputs)
    except JudgeError as exc:
        return MetricResult.judge_error(str(exc), judge=exc.judge or None)


def _record(verdict: Verdict, **extra: Any) -> dict[str, Any]:
    return {**verdict.record, "verdict": verdict.reply.model_dump(mode="json"), **extra}


def _fraction(flags: list[bool], verdict: Verdict, empty_reason: str) -> MetricResult:
    if not flags:
        return MetricResult.not_applicable(empty_reason, judge=_record(verdict))
    return MetricResult.scored(sum(flags) / len(flags), judge=_record(verdict))


def _supported_claims(case: Case, output: CaseOutput, ctx: ScoringContext) -> MetricResult:
    """Supported claims / claims of the answer, from the one "claims" verdict; none -> not_applicable."""
    inputs = {"question": case.question, "answer": output.answer_text, "context": context_payload(output)}
    verdict = _ask(ctx, "claims", inputs)
    if isinstance(verdict, MetricResult):
        return verdict
    return _fraction([c.supported for c in verdict.reply_as(ClaimsReply).claims], verdict, REASON_NO_CLAIMS)


@metric("generation.groundedness", kind="judge", needs=("answer", "context", "judge"))
def groundedness(case: Case, output: CaseOutput, ctx: ScoringContext) -> MetricResult:
    """Supported claims / total claims of the answer (one judge call); no claims -> not_applicable."""
    return _supported_claims(case, output, ctx)


def _verdict_map(pairs: list[tuple[str, bool]]) -> dict[str, bool]:
    """chunk id -> verdict; an id given conflicting verdicts counts as False (the conservative one).

    The judge sees (and returns) ids neutralised like all untrusted text, so lookups neutralise too.
    """
    out: dict[str, bool] = {}
    for chunk_id, flag in pairs:
        out[chunk_id] = out.get(chunk_id, True) and flag
    return out


@metric("generation.citation_support", kind="judge", needs=("answer", "context", "judge"))
def citation_support(case: Case, output: CaseOutput, ctx: ScoringContext) -> MetricResult:
    """Supported citations / deduplicated cited ids (one batched call); missing verdict = unsupported."""
    cited = cited_ids(output)
    if not cited:
        return MetricResult.skipped(REASON_NO_CITATIONS)
    chunks: dict[str, str] = {}
    for chunk in output.context_chunks() or []:
        chunks.setdefault(chunk.id, chunk.text)
    not_in_context = [cid for cid in cited if cid not in chunks]
    judged = [cid for cid in cited if cid in chunks]
    if not judged:
        return MetricResult.scored(0.0, judge={"not_in_context": not_in_context, "calls": 0})
    inputs = {
        "question": case.question,
        "answer": output.answer_text,
        "cited": [{"id": cid, "text": chunks[cid]} for cid in judged],
    }
    verdict = _ask(ctx, "citation_support", inputs)
    if isinstance(verdict, MetricResult):
        return verdict
    verdicts = _verdict_map(
        [(v.chunk_id, v.supported) for v in verdict.reply_as(CitationSupportReply).verdicts]
    )
    supported = sum(1 for cid in judged if verdicts.get(neutralise(cid)) is True)
    missing = [cid for cid in judged if neutralise(cid) not in verdicts]
    record = _record(verdict, not_in_context=not_in_context, missing_verdicts=missing)
    return MetricResult.scored(supported / len(cited), judge=record)


def _band(
    task: str,
    reply: type[AnswerRelevanceReply] | type[CompletenessReply],
    bands: dict[str, float],
    inputs: dict[str, Any],
    ctx: ScoringContext,
) -> MetricResult:
    verdict = _ask(ctx, task, inputs)
    if isinstance(verdict, MetricResult):
        return verdict
    return MetricResult.scored(bands[verdict.reply_as(reply).verdict], judge=_record(verdict))


@metric("generation.answer_relevance", kind="judge", needs=("answer", "judge"))
def answer_relevance(case: Case, output: CaseOutput, ctx: ScoringContext) -> MetricResult:
    """Three bands: relevant 1.0, partial 0.5, irrelevant 0.0 (one judge call)."""
    inputs = {"question": case.question, "answer": output.answer_text}
    return _band("answer_relevance", AnswerRelevanceReply, ANSWER_RELEVANCE_BANDS, inputs, ctx)


@metric("generation.completeness", kind="judge", needs=("answer", "expected_answer", "judge"))
def completeness(case: Case, output: CaseOutput, ctx: ScoringContext) -> MetricResult:
    """Three bands against the expected answer: complete 1.0, partial 0.5, missing 0.0 (one call)."""
    inputs = {
        "question": case.question,
        "expected_answer": case.expected_answer,
        "answer": output.answer_text,
    }
    return _band("completeness", CompletenessReply, COMPLETENESS_BANDS, inputs, ctx)


@metric("judge.context_recall", kind="judge", needs=("expected_answer", "context", "judge"))
def context_recall(case: Case, output: CaseOutput, ctx: ScoringContext) -> MetricResult:
    """Reference claims covered by the context / reference claims (one call); none -> not_applicable."""
    inputs = {
        "question": case.question,
        "expected_answer": case.expected_answer,
        "context": context_payload(output),
    }
    verdict = _ask(ctx, "context_recall", inputs)
    if isinstance(verdict, MetricResult):
        return verdict
    return _fraction(
        [c.covered for c in verdict.reply_as(ContextRecallReply).claims], verdict, REASON_NO_REFERENCE_CLAIMS
    )


@metric(
    "judge.context_precision",
    kind="judge",
    needs=("answer", "context", "judge"),
    same_as="generation.groundedness",
)
def context_precision(case: Case, output: CaseOutput, ctx: ScoringContext) -> MetricResult:
    """Answer claims supported by the context / answer claims (the groundedness call, judged once)."""
    return _supported_claims(case, output, ctx)


@metric("judge.context_relevance", kind="judge", needs=("context", "judge"))
def context_relevance(case: Case, output: CaseOutput, ctx: ScoringContext) -> MetricResult:
    """Context chunks relevant to the question / context chunks (one batched call)."""
    context = context_payload(output)
    if not context:
        return MetricResult.not_applicable(REASON_EMPTY_CONTEXT)
    verdict = _ask(ctx, "context_relevance", {"question": case.question, "context": context})
    if isinstance(verdict, MetricResult):
        return verdict
    verdicts = _verdict_map(
        [(v.chunk_id, v.relevant) for v in verdict.reply_as(ContextRelevanceReply).verdicts]
    )
    flags = [verdicts.get(neutralise(chunk["id"])) is True for chunk in context]
    return MetricResult.scored(sum(flags) / len(flags), judge=_record(verdict))


@metric("judge.faithfulness", kind="judge", needs=("answer", "context", "judge"), binary=True)
def faithfulness(case: Case, output: CaseOutput, ctx: ScoringContext) -> MetricResult:
    """1.0 when every claim of the answer is entailed by the context, else 0.0 (one call)."""
    inputs = {"question": case.question, "answer": output.answer_text, "context": context_payload(output)}
    verdict = _ask(ctx, "faithfulness", inputs)
    if isinstance(verdict, MetricResult):
        return verdict
    claims = verdict.reply_as(FaithfulnessReply).claims
    if not claims:
        return MetricResult.not_applicable(REASON_NO_CLAIMS, judge=_record(verdict))
    return MetricResult.scored(1.0 if all(c.entailed for c in claims) else 0.0, judge=_record(verdict))
