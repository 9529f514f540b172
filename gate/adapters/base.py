"""The adapter interface: how one case reaches the pipeline and what comes back.

A pipeline exposes ``retrieve(question, k)``, ``answer(question)`` or both. An adapter turns
one case into a :class:`gate.model.records.CaseOutput` with ``supports_retrieve``/``supports_answer``
set, or raises:

- :class:`AdapterError`: the pipeline failed or sent something unusable (an ``adapter_error`` row);
- :class:`AdapterTimeout`: no result in time (a ``timeout`` row).

Results are validated with the pydantic models of :mod:`gate.model.records`. Accepted shapes:
retrieve → a list of chunks or ``{"chunks": [...]}``; answer → ``{"text": ...}`` or a plain
string (its text). A chunk needs a non-empty ``text``. Framework objects (LangChain, LlamaIndex,
Haystack) are converted by :mod:`gate.adapters.objects`; anything else is an AdapterError that
names the type received and the shapes expected.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel

from gate.adapters.objects import (
    ANSWER_SHAPES,
    CHUNK_SHAPES,
    describe,
    framework_chunk,
    plain_answer,
    plain_chunk,
)
from gate.core.errors import validated
from gate.model.dataset import Case
from gate.model.records import Answer, CaseOutput, Chunk


class AdapterError(Exception):
    """The pipeline failed for this case; ``str(err)`` is recorded in the row's ``error``."""


class AdapterTimeout(AdapterError):
    """The pipeline did not answer within the time allowed."""


def _chunk(raw: Any, where: str) -> Chunk:
    item = plain_chunk(raw)
    if not isinstance(item, dict):
        raise AdapterError(f"{where}: got {describe(raw)}; expected {CHUNK_SHAPES}")
    try:
        chunk = validated(Chunk, item, where, AdapterError)
    except AdapterError as exc:
        raise AdapterError(f"{exc} (received {describe(raw)})") from None
    if not chunk.text.strip():
        # An empty text scores 0 everywhere without a word: refuse it at the boundary.
        raise AdapterError(f"{where}: text: expected a non-empty string (received {describe(raw)})")
    return chunk


def parse_chunk_list(raw: Any, where: str) -> list[Chunk]:
    """Validate a list of chunks (dicts, our models or framework objects); ``where`` names it in errors."""
    if not isinstance(raw, list | tuple):
        raise AdapterError(f"{where}: got {describe(raw)}; expected a list of chunks")
    return [_chunk(item, f"{where} chunk #{i + 1}") for i, item in enumerate(raw)]


def parse_chunks(raw: Any) -> list[Chunk]:
    """Validate a retrieve() result: a list of chunks, or an object with a ``chunks`` list.

    Each chunk is ``{id, text, score?, metadata?}`` with a non-empty ``text``, or a framework
    object converted by :mod:`gate.adapters.objects`.
    """
    if isinstance(raw, BaseModel) and framework_chunk(raw) is None:
        raw = raw.model_dump()
    if isinstance(raw, dict) and "chunks" in raw:
        raw = raw["chunks"]
    if not isinstance(raw, list | tuple):
        raise AdapterError(
            f'retrieve returned {describe(raw)}; expected a list of chunks or {{"chunks": [...]}}'
        )
    return parse_chunk_list(raw, "retrieve result")


def parse_answer(raw: Any) -> Answer:
    """Validate an answer() result: ``{text, citations?, retrieved_chunks?}``, a string or a framework answer."""
    plain = plain_answer(raw)
    if not isinstance(plain, dict):
        raise AdapterError(f"answer returned {describe(raw)}; expected {ANSWER_SHAPES}")
    plain = dict(plain)
    chunks = plain.get("retrieved_chunks")
    if chunks is not None:
        plain["retrieved_chunks"] = parse_chunk_list(chunks, "answer result retrieved_chunks")
    try:
        return validated(Answer, plain, "answer result", AdapterError)
    except AdapterError as exc:
        raise AdapterError(f"{exc} (received {describe(raw)})") from None


def _leaves(group: BaseExceptionGroup[Exception]) -> Iterator[Exception]:
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            yield from _leaves(exc)
        else:
            yield exc


class Adapter(ABC):
    """Runs cases through a pipeline. Used from one event loop; ``run_case`` is called concurrently."""

    supports_retrieve: bool = False
    supports_answer: bool = False

    async def start(self) -> None:  # noqa: B027 - optional hook
        """Acquire resources (connections, the subprocess) before the first case."""

    @abstractmethod
    async def run_case(self, case: Case, k: int) -> CaseOutput:
        """The pipeline's output for ``case``; raises AdapterError / AdapterTimeout."""

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources; called once, also after an interrupted run."""


class CallAdapter(Adapter):
    """An adapter for a live pipeline with ``retrieve`` and/or ``answer`` calls.

    Both calls of one case are made concurrently; if either fails the case fails (its
    partial output is not scored, so a half-answered case never enters a mean).
    """

    async def retrieve(self, question: str, k: int) -> list[Chunk]:
        raise NotImplementedError

    async def answer(self, question: str) -> Answer:
        raise NotImplementedError

    async def run_case(self, case: Case, k: int) -> CaseOutput:
        retrieved: list[Chunk] | None = None
        answer: Answer | None = None
        if self.supports_retrieve and self.supports_answer:
            try:
                async with asyncio.TaskGroup() as group:
                    r_task = group.create_task(self.retrieve(case.question, k))
                    a_task = group.create_task(self.answer(case.question))
            except ExceptionGroup as group:
                # The sibling call was cancelled; report the failure itself, an adapter error first.
                leaves = list(_leaves(group))
                raise next((e for e in leaves if isinstance(e, AdapterError)), leaves[0]) from None
            retrieved, answer = r_task.result(), a_task.result()
        elif self.supports_retrieve:  # one call: no tasks to create
            retrieved = await self.retrieve(case.question, k)
        elif self.supports_answer:
            answer = await self.answer(case.question)
        return CaseOutput(
            retrieved=retrieved,
            answer=answer,
            supports_retrieve=self.supports_retrieve,
            supports_answer=self.supports_answer,
        )
