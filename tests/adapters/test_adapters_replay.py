"""The replay adapter: recorded outputs keyed by case id, error lines, strict file validation."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from gate.adapters.base import AdapterError
from gate.adapters.replay import ReplayAdapter, load_replay
from gate.core.errors import DataError
from gate.model.dataset import Case
from gate.model.records import CaseOutput


def _write(path: Path, lines: list[object]) -> Path:
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))
    return path


def _run(adapter: ReplayAdapter, case_id: str) -> CaseOutput:
    return asyncio.run(adapter.run_case(Case(id=case_id, question="q"), 5))


def test_recorded_parts_and_errors(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "recorded.jsonl",
        [
            {
                "id": "both",
                "retrieved": [{"id": "c1", "text": "t"}],
                "answer": {"text": "a", "citations": ["c1"]},
            },
            {"id": "answer-only", "answer": {"text": "b"}},
            {"id": "retrieval-only", "retrieved": []},
            {"id": "failed", "error": "upstream 502"},
            "",
            {"id": 7, "answer": {"text": "integer id"}},
        ],
    )
    adapter = ReplayAdapter(load_replay(path))
    both = _run(adapter, "both")
    assert both.supports_retrieve and both.supports_answer and both.retrieved and both.retrieved[0].id == "c1"
    answer_only = _run(adapter, "answer-only")
    assert not answer_only.supports_retrieve and answer_only.retrieved is None
    retrieval_only = _run(adapter, "retrieval-only")
    assert (
        retrieval_only.supports_retrieve and retrieval_only.retrieved == [] and retrieval_only.answer is None
    )
    with pytest.raises(AdapterError, match="^upstream 502$"):
        _run(adapter, "failed")
    with pytest.raises(AdapterError, match="no recorded output for case 'absent'"):
        _run(adapter, "absent")
    assert _run(adapter, "7").answer is not None


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (['{"id": "a", "answer": '], r"recorded.jsonl:1: malformed JSON"),
        ([{"id": "a"}, {"id": "a"}], r"recorded.jsonl:2: id: duplicate case id 'a' \(first at line 1\)"),
        ([{"id": "a", "answr": {}}], r"recorded.jsonl:1: answr: unknown key; did you mean answer\?$"),
        (
            [{"id": "a", "contexts": ["text"]}],
            r"recorded.jsonl:1: contexts: unknown key; retrieved chunks are retrieved: \[\{id, text\}, \.\.\.\]$",
        ),
        (
            [{"id": "a", "response": "x"}],
            r"recorded.jsonl:1: response: unknown key; the pipeline's answer is answer: \{text, citations\?\}$",
        ),
        ([{"id": "a", "answer": {"citations": []}}], r"recorded.jsonl:1: answer.text: Field required"),
    ],
)
def test_bad_lines_name_file_and_line(tmp_path: Path, lines: list[object], message: str) -> None:
    path = _write(tmp_path / "recorded.jsonl", lines)
    with pytest.raises(DataError, match=message):
        load_replay(path)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="replay file not found"):
        load_replay(tmp_path / "nope.jsonl")
