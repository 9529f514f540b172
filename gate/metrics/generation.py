"""Deterministic generation metrics: citation validity and the echo exact-match debugging metric."""

from __future__ import annotations

from gate.metrics.base import ScoringContext, metric
from gate.model.dataset import Case
from gate.model.records import CaseOutput, MetricResult

REASON_NO_CITATIONS = "answer has no citations"


def cited_ids(output: CaseOutput) -> list[str]:
    """The answer's cited chunk ids, deduplicated in first-citation order ([] without an answer)."""
    if output.answer is None:
        return []
    return list(dict.fromkeys(output.answer.citations or ()))


@metric("generation.citation_validity", kind="deterministic", needs=("answer", "context"))
def citation_validity(case: Case, output: CaseOutput, ctx: ScoringContext) -> MetricResult:
    """valid cited ids / cited ids, over the deduplicated citations.

    A cited id is valid when it is the id of a chunk in the context (the answer's own
    ``retrieved_chunks``, else the retrieve() result). No citations skips; an empty context
    scores 0.0, since every citation then points at nothing.
    """
    cited = cited_ids(output)
    if not cited:
        return MetricResult.skipped(REASON_NO_CITATIONS)
    retrieved = {c.id for c in output.context_chunks() or ()}
    return MetricResult.scored(sum(1 for c in cited if c in retrieved) / len(cited))


# A debugging metric (docs/metrics.md): it checks the wiring (an echo pipeline scores 1.0), not
# quality; answer.exact_match is the one that gates. So it is shown but does not gate by default.
@metric(
    "echo.exact_match",
    kind="deterministic",
    needs=("answer", "expected_answer"),
    gate_by_default=False,
    binary=True,
)
def echo_exact_match(case: Case, output: CaseOutput, ctx: ScoringContext) -> MetricResult:
    """1.0 when the answer text equals the expected answer after stripping surrounding whitespace."""
    return MetricResult.scored(
        1.0 if output.answer_text.strip() == (case.expected_answer or "").strip() else 0.0
    )
