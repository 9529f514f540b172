"""Builders shared by the metric tests: cases, adapter outputs and one-metric scoring."""

from __future__ import annotations

from typing import Any

from gate.metrics import registry
from gate.metrics.base import ScoringContext
from gate.model.dataset import Case
from gate.model.records import Answer, CaseOutput, Chunk, MetricResult


def make_case(**fields: Any) -> Case:
    fields.setdefault("id", "c1")
    fields.setdefault("question", "What is the refund window?")
    return Case.model_validate(fields)


def chunk(cid: str, text: str = "", **metadata: Any) -> Chunk:
    return Chunk(id=cid, text=text, metadata=metadata)


def make_output(
    retrieved: list[Chunk] | list[str] | None = None,
    answer: str | None = None,
    *,
    citations: list[str] | None = None,
    answer_chunks: list[Chunk] | None = None,
) -> CaseOutput:
    chunks = None
    if retrieved is not None:
        chunks = [c if isinstance(c, Chunk) else Chunk(id=c) for c in retrieved]
    ans = None
    if answer is not None:
        ans = Answer(text=answer, citations=citations, retrieved_chunks=answer_chunks)
    return CaseOutput(
        retrieved=chunks,
        answer=ans,
        supports_retrieve=retrieved is not None,
        supports_answer=answer is not None,
    )


def score(name: str, case: Case, output: CaseOutput, ctx: ScoringContext | None = None) -> MetricResult:
    return registry()[name].score(case, output, ctx or ScoringContext())


def judge_record(result: MetricResult) -> dict[str, Any]:
    """The judge's record kept in a metric result; a result without one fails the test here."""
    assert result.judge is not None, f"no judge record in {result!r}"
    return result.judge


def defined(value: float | None) -> float:
    """A value the test expects to be defined; None fails the test here."""
    assert value is not None, "expected a value, got None (undefined)"
    return value
