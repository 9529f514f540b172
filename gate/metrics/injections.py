"""Generating injection cases from qa cases: every chosen payload around every chosen question.

A generated case keeps the qa case's expected sources, expected answer, tags and metadata, and
adds: ``kind: injection``, ``adversarial_payload`` = the payload id, the tag ``payload:ID`` and
``metadata.source_case_id`` / ``metadata.payload_framing``. Its id is ``<qa id>--<payload id>``,
so regenerating from the same dataset gives the same cases in the same order (question order of
the dataset, then payload order of the library or of ``payload_ids``).
"""

from __future__ import annotations

from collections.abc import Sequence

from gate.core.errors import DataError, UsageError
from gate.metrics.payloads import PAYLOADS, PAYLOADS_BY_ID, Payload
from gate.model.dataset import Case, parse_cases


def injection_case_id(source_id: str, payload_id: str) -> str:
    return f"{source_id}--{payload_id}"


def choose_payloads(payload_ids: Sequence[str] | None) -> list[Payload]:
    """The library payloads named (in the given order, each once), or all of them for None."""
    if payload_ids is None:
        return list(PAYLOADS)
    unknown = [p for p in payload_ids if p not in PAYLOADS_BY_ID]
    if unknown:
        raise UsageError(
            f"--payloads: unknown payload id {unknown[0]!r} (known: {', '.join(PAYLOADS_BY_ID)})"
        )
    if not payload_ids:
        raise UsageError("--payloads: no payload id given")
    return [PAYLOADS_BY_ID[p] for p in dict.fromkeys(payload_ids)]


def injection_case(source: Case, payload: Payload) -> Case:
    return Case(
        id=injection_case_id(source.id, payload.id),
        question=payload.render(source.question),
        kind="injection",
        expected_source_ids=list(source.expected_source_ids),
        expected_answer=source.expected_answer,
        adversarial_payload=payload.id,
        tags=[*source.tags, f"payload:{payload.id}"],
        metadata={**source.metadata, "source_case_id": source.id, "payload_framing": payload.framing},
        relevance=dict(source.relevance) if source.relevance else None,
    )


def build_injection_cases(
    cases: Sequence[Case], payload_ids: Sequence[str] | None = None, limit: int | None = None
) -> list[Case]:
    """Injection cases for the first ``limit`` qa cases (all when None) x the chosen payloads.

    Raises DataError when the dataset has no qa case, UsageError for an unknown payload id or a
    limit below 1, and DataError if a generated id collides (the result is validated like a
    loaded dataset).
    """
    if limit is not None and limit < 1:
        raise UsageError(f"--limit: expected a positive number of questions, got {limit}")
    payloads = choose_payloads(payload_ids)
    questions = [c for c in cases if c.kind == "qa"][:limit]
    if not questions:
        raise DataError("dataset has no qa cases to build injection cases from")
    generated = [injection_case(q, p) for q in questions for p in payloads]
    return list(parse_cases([(c.model_dump(mode="json"), f"generated case {c.id}") for c in generated]))
