"""The ``replay`` adapter: recorded outputs from a JSONL file keyed by case id.

Each line is ``{"id": case_id, "retrieved": [chunk...], "answer": {...}}``; either part may be
absent (that case then does not expose retrieval, or produced no answer), and a line with
``"error": "..."`` records an adapter failure for its case. A case with no line is an
adapter error ("no recorded output"), never a silent skip. ``latency_ms`` may be recorded and
is then reported as the case's latency.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import ClassVar

from pydantic import Field

from gate.adapters.base import Adapter, AdapterError, parse_answer, parse_chunk_list
from gate.core.errors import DataError, json_problem, validated
from gate.core.strict import StrictModel
from gate.model.dataset import Case
from gate.model.records import Answer, CaseOutput, Chunk

MAX_REPLAY_BYTES = 1_000_000_000


class ReplayRecord(StrictModel):
    # Other tools' names for a recorded output (an exported RAGAS/DeepEval run) and ours.
    FOREIGN_KEYS: ClassVar[dict[str, str]] = {
        **dict.fromkeys(
            ("contexts", "retrieved_contexts", "retrieval_context", "context", "documents"),
            "retrieved chunks are retrieved: [{id, text}, ...]",
        ),
        **dict.fromkeys(
            ("response", "actual_output", "output", "generated_answer", "prediction"),
            "the pipeline's answer is answer: {text, citations?}",
        ),
        **dict.fromkeys(("case_id", "question_id", "qid"), "the case id is id"),
        **dict.fromkeys(
            ("question", "query", "user_input", "input"),
            "lines are matched to cases by id; the question stays in the dataset",
        ),
    }

    id: str = Field(min_length=1)
    retrieved: list[Chunk] | None = None
    answer: Answer | None = None
    error: str | None = None


def load_replay(path: Path) -> dict[str, ReplayRecord]:
    """Records by case id. DataError naming the file and line on malformed input or a duplicate id."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise DataError(f"{path}: replay file not found") from None
    if size > MAX_REPLAY_BYTES:
        raise DataError(f"{path}: replay file of {size} bytes exceeds the {MAX_REPLAY_BYTES} byte limit")
    records: dict[str, ReplayRecord] = {}
    first_line: dict[str, int] = {}
    with path.open(encoding="utf-8") as handle:
        for lineno, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                raw = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(f"{path}:{lineno}: {json_problem(exc)}") from None
            if isinstance(raw, dict) and isinstance(raw.get("id"), int) and not isinstance(raw["id"], bool):
                raw["id"] = str(raw["id"])  # as the dataset accepts integer ids
            record = validated(ReplayRecord, raw, f"{path}:{lineno}", DataError)
            if record.id in records:
                raise DataError(
                    f"{path}:{lineno}: id: duplicate case id {record.id!r} (first at line {first_line[record.id]})"
                )
            records[record.id] = record
            first_line[record.id] = lineno
    return records


class ReplayAdapter(Adapter):
    def __init__(self, records: dict[str, ReplayRecord]) -> None:
        self._records = records
        self.supports_retrieve = any("retrieved" in r.model_fields_set for r in records.values())
        self.supports_answer = any("answer" in r.model_fields_set for r in records.values())

    async def run_case(self, case: Case, k: int) -> CaseOutput:
        record = self._records.get(case.id)
        if record is None:
            raise AdapterError(f"no recorded output for case {case.id!r}")
        if record.error is not None:
            raise AdapterError(record.error)
        has_retrieved = "retrieved" in record.model_fields_set and record.retrieved is not None
        has_answer = "answer" in record.model_fields_set and record.answer is not None
        # The same boundary checks as a live pipeline's results (a chunk needs a text).
        return CaseOutput(
            retrieved=parse_chunk_list(record.retrieved, "recorded retrieved") if has_retrieved else None,
            answer=parse_answer(record.answer) if has_answer else None,
            supports_retrieve=has_retrieved,
            supports_answer=has_answer,
        )
