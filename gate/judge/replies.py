"""Judge replies: finding the JSON object in the text and validating it per task.

Judges often wrap the object in prose or code fences despite the instructions. The object
taken is the first balanced ``{...}`` that parses as a JSON object: braces inside JSON
strings (with escapes) do not count, and a balanced span that is not valid JSON (e.g.
``{like this}`` in prose) is passed over for the next ``{``.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from gate.core.errors import pydantic_message


class ReplyError(ValueError):
    """A reply with no usable JSON object; ``str()`` is the message sent in the repair turn."""


def _balanced_end(text: str, start: int) -> int | None:
    """Index just past the ``}`` closing the ``{`` at ``start``, or None when it never closes."""
    depth = 0
    in_string = False
    escaped = False
    for i in range(start, len(text)):
        ch = text[i]
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return i + 1
    return None


def extract_json_object(text: str) -> dict[str, Any]:
    """The first balanced ``{...}`` in ``text`` that parses as a JSON object.

    Raises ReplyError when there is none.
    """
    start = text.find("{")
    while start != -1:
        end = _balanced_end(text, start)
        if end is None:
            break
        try:
            value = json.loads(text[start:end])
        except json.JSONDecodeError:
            value = None
        if isinstance(value, dict):
            return value
        start = text.find("{", start + 1)
    raise ReplyError("the reply contains no JSON object")


class _Reply(BaseModel):
    # Judges add fields of their own (explanations, scores); they are ignored, not fatal.
    model_config = ConfigDict(extra="ignore")


class SupportedClaim(_Reply):
    claim: str
    supported: bool


class ClaimsReply(_Reply):
    """generation.groundedness and judge.context_precision."""

    claims: list[SupportedClaim]


class EntailedClaim(_Reply):
    claim: str
    entailed: bool


class FaithfulnessReply(_Reply):
    claims: list[EntailedClaim]


class CoveredClaim(_Reply):
    claim: str
    covered: bool


class ContextRecallReply(_Reply):
    claims: list[CoveredClaim]


class CitationVerdict(_Reply):
    chunk_id: str
    supported: bool


class CitationSupportReply(_Reply):
    verdicts: list[CitationVerdict]


class ChunkRelevance(_Reply):
    chunk_id: str
    relevant: bool


class ContextRelevanceReply(_Reply):
    verdicts: list[ChunkRelevance]


class AnswerRelevanceReply(_Reply):
    verdict: Literal["relevant", "partial", "irrelevant"]
    reason: str = ""


class CompletenessReply(_Reply):
    verdict: Literal["complete", "partial", "missing"]
    reason: str = ""


class RefusalReply(_Reply):
    declined: bool
    reason: str = ""


# judge task (= prompt template name) -> the model its reply must validate against
REPLY_MODELS: dict[str, type[_Reply]] = {
    "claims": ClaimsReply,
    "faithfulness": FaithfulnessReply,
    "context_recall": ContextRecallReply,
    "citation_support": CitationSupportReply,
    "context_relevance": ContextRelevanceReply,
    "answer_relevance": AnswerRelevanceReply,
    "completeness": CompletenessReply,
    "refusal": RefusalReply,
}


def parse_reply(task: str, text: str) -> BaseModel:
    """Extract and validate the reply of ``task``. Raises ReplyError with a repair-ready message."""
    obj = extract_json_object(text)
    try:
        return REPLY_MODELS[task].model_validate(obj)
    except ValidationError as exc:
        raise ReplyError(
            f"the JSON object does not match the expected shape: {pydantic_message(exc)}"
        ) from None
