"""What a pipeline returns for one case: retrieved chunks and an answer (design.md formats)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


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

    def context_chunks(self) -> list[Chunk] | None:
        """Context for generation metrics: the answer's own chunks, else retrieve()'s, else None."""
        if self.answer is not None and self.answer.retrieved_chunks is not None:
            return self.answer.retrieved_chunks
        return self.retrieved
