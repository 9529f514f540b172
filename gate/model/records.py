"""What a pipeline returns for one case (retrieved chunks, an answer) and what a metric makes of it.

The formats of adapter results (docs/running.md, "Accepted result shapes") and of the
``metrics`` values of a run row.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from gate.core.strict import StrictModel


class Chunk(BaseModel):
    """A retrieved chunk: ``{id, text, score?, metadata?}``; ``metadata.document_id`` for document matching."""

    model_config = ConfigDict(extra="allow")

    id: str
    text: str = ""
    score: float | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class Answer(BaseModel):
    """An answer: ``{text, citations?: [chunk ids], retrieved_chunks?: [chunk]}``."""

    model_config = ConfigDict(extra="allow")

    text: str
    citations: list[str] | None = None
    retrieved_chunks: list[Chunk] | None = None


class CaseOutput(BaseModel):
    """The adapter's output for one case.

    ``retrieved`` is None when the adapter does not expose retrieval (not the same as an
    empty list, which is a retrieval that found nothing). ``answer`` is None when the adapter
    does not answer or produced no answer.
    """

    retrieved: list[Chunk] | None = None
    answer: Answer | None = None
    supports_retrieve: bool = False
    supports_answer: bool = False

    @property
    def answer_text(self) -> str:
        """The answer's text, for metrics that declare ``needs=("answer",)``.

        The registry skips such a metric ("adapter produced no answer") before computing it,
        so reaching this without an answer is a programming error.
        """
        if self.answer is None:
            raise ValueError("answer_text read without an answer: declare needs=('answer',)")
        return self.answer.text

    def context_chunks(self) -> list[Chunk] | None:
        """Context for generation metrics: the answer's own chunks, else retrieve()'s, else None."""
        if self.answer is not None and self.answer.retrieved_chunks is not None:
            return self.answer.retrieved_chunks
        return self.retrieved


MetricStatus = Literal["scored", "skipped", "not_applicable", "judge_error"]


class MetricResult(StrictModel):
    """One metric's result for one case (the ``metrics`` values of a row in rows.jsonl).

    ``label`` carries the value of categorical metrics (e.g. ``diagnostics.failure_category``),
    which are reported as a distribution and never averaged; their ``value`` is None.

    Frozen: a run's reader shares one instance among the rows with equal results.
    """

    model_config = ConfigDict(frozen=True)

    value: float | None = None
    status: MetricStatus
    reason: str | None = None
    judge: dict[str, Any] | None = None
    label: str | None = None

    @classmethod
    def scored(cls, value: float, judge: dict[str, Any] | None = None) -> MetricResult:
        return cls(value=float(value), status="scored", judge=judge)

    @classmethod
    def skipped(cls, reason: str) -> MetricResult:
        return cls(status="skipped", reason=reason)

    @classmethod
    def not_applicable(cls, reason: str, judge: dict[str, Any] | None = None) -> MetricResult:
        return cls(status="not_applicable", reason=reason, judge=judge)

    @classmethod
    def judge_error(cls, reason: str, judge: dict[str, Any] | None = None) -> MetricResult:
        return cls(status="judge_error", reason=reason, judge=judge)

    @classmethod
    def category(cls, label: str) -> MetricResult:
        return cls(status="scored", label=label)
