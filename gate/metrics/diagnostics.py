"""Lexical diagnostics: token-overlap stand-ins for judge metrics, and a failure category.

These are cheap, deterministic hints about where a qa case went wrong. They are named
``diagnostics.lexical_*`` so nobody mistakes them for the judge metrics, and none of them gates
by default. All token comparisons use :func:`gate.metrics.answer.token_f1` (SQuAD
normalisation). Where the lexical peer scores an empty input as 0, these skip with a reason.

* ``lexical_faithfulness``: split the answer into sentences (after ``.``, ``!`` or ``?`` and
  whitespace); for every sentence of at least 4 words take the best token F1 against any context
  chunk; the value is the mean. Skips: empty answer, empty context, no sentence of 4+ words.
* ``lexical_answer_relevance``: token F1 between answer and question. Skips: the answer or the
  question has no token after normalisation.
* ``lexical_context_precision``: fraction of context chunks whose token F1 against the expected
  answer is >= 0.10. Skips: empty context, expected answer without tokens.
* ``lexical_context_recall``: token F1 between all context chunks joined by spaces and the
  expected answer. Skips: as context precision.
* ``failure_category``: one label per qa case, the most upstream failure, checked in this order:
  ``refusal`` (empty answer or :func:`detect_refusal`), ``correct`` (token F1 against the expected
  answer >= 0.20), ``lexical_retrieval_miss`` (empty context, or no chunk with token F1 >= 0.10
  against the expected answer: judged by the words of the expected answer, not by the expected
  source ids, so it can disagree with hit@k when a chunk says the answer in other words), ``format_mismatch`` (the expected answer has numbers and every one is in
  the answer within the numeric tolerance: right value, different wording), ``hallucination``
  (grounding < 0.10, where grounding is the lexical faithfulness, or — for an answer without a
  sentence of 4+ words — the fraction of its tokens that occur in the context), else
  ``wrong_extraction``. Reported as a distribution, never averaged.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from gate.metrics.answer import REASON_EMPTY_EXPECTED, answer_tokens, numeric_score, token_f1_of_tokens
from gate.metrics.base import ComputeFn, Need, ScoringContext, metric
from gate.metrics.robustness import detect_refusal
from gate.model.dataset import Case
from gate.model.records import CaseOutput, Chunk, MetricResult

MIN_SENTENCE_WORDS = 4
CHUNK_RELEVANCE_THRESHOLD = 0.10
CORRECT_F1_THRESHOLD = 0.20
GROUNDING_THRESHOLD = 0.10

REASON_EMPTY_ANSWER = "answer text is empty"
REASON_EMPTY_CONTEXT = "context is empty"
REASON_NO_LONG_SENTENCE = f"answer has no sentence of {MIN_SENTENCE_WORDS} or more words"
REASON_ANSWER_NO_TOKENS = "answer has no words after normalisation"
REASON_QUESTION_NO_TOKENS = "question has no words after normalisation"

REFUSAL = "refusal"
# "lexical": by word overlap with the expected answer, not by expected_source_ids (hit@k can be 1)
RETRIEVAL_MISS = "lexical_retrieval_miss"
FORMAT_MISMATCH = "format_mismatch"
HALLUCINATION = "hallucination"
WRONG_EXTRACTION = "wrong_extraction"
CORRECT = "correct"
CATEGORIES = (REFUSAL, RETRIEVAL_MISS, FORMAT_MISMATCH, HALLUCINATION, WRONG_EXTRACTION, CORRECT)

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def split_sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END.split(text.strip()) if s.strip()]


def faithfulness_value(answer: str, chunks: Sequence[Chunk]) -> float | None:
    """Mean best-chunk token F1 of the answer's sentences of 4+ words; None when none qualifies."""
    chunk_tokens = [answer_tokens(c.text) for c in chunks]
    sentences = [answer_tokens(s) for s in split_sentences(answer) if len(s.split()) >= MIN_SENTENCE_WORDS]
    best = [
        max((token_f1_of_tokens(tokens, chunk) for chunk in chunk_tokens), default=0.0)
        for tokens in sentences
    ]
    return sum(best) / len(best) if best else None


def _chunk_f1s(chunks: Sequence[Chunk], expected: list[str]) -> list[float]:
    return [token_f1_of_tokens(answer_tokens(c.text), expected) for c in chunks]


def _diagnostic(
    name: str, *, needs: tuple[Need, ...], categorical: bool = False
) -> Callable[[ComputeFn], ComputeFn]:
    """Register a diagnostic: heuristic, qa cases only, shown but not gated by default."""
    return metric(
        name,
        kind="heuristic",
        applies_to=("qa",),
        gate_by_default=False,
        needs=needs,
        categorical=categorical,
    )


@_diagnostic("diagnostics.lexical_faithfulness", needs=("answer", "context"))
def lexical_faithfulness(case: Case, output: CaseOutput, ctx: ScoringContext) -> MetricResult:
    """Mean over answer sentences (4+ words) of the best token F1 against a context chunk."""
    if not output.answer_text.strip():
        return MetricResult.skipped(REASON_EMPTY_ANSWER)
    chunks = output.context_chunks() or []
    if not chunks:
        return MetricResult.skipped(REASON_EMPTY_CONTEXT)
    value = faithfulness_value(output.answer_text, chunks)
    if value is None:
        return MetricResult.skipped(REASON_NO_LONG_SENTENCE)
    return MetricResult.scored(value)


@_diagnostic("diagnostics.lexical_answer_relevance", needs=("answer",))
def lexical_answer_relevance(case: Case, output: CaseOutput, ctx: ScoringContext) -> MetricResult:
    """Token F1 between the answer and the question."""
    answer = answer_tokens(output.answer_text)
    if not answer:
        return MetricResult.skipped(REASON_ANSWER_NO_TOKENS)
    question = answer_tokens(case.question)
    if not question:
        return MetricResult.skipped(REASON_QUESTION_NO_TOKENS)
    return MetricResult.scored(token_f1_of_tokens(answer, question))


def _context_and_expected(case: Case, output: CaseOutput) -> tuple[list[Chunk], list[str]] | MetricResult:
    chunks = output.context_chunks() or []
    if not chunks:
        return MetricResult.skipped(REASON_EMPTY_CONTEXT)
    expected = answer_tokens(case.expected_answer or "")
    if not expected:
        return MetricResult.skipped(REASON_EMPTY_EXPECTED)
    return chunks, expected


@_diagnostic("diagnostics.lexical_context_precision", needs=("context", "expected_answer"))
def lexical_context_precision(case: Case, output: CaseOutput, ctx: ScoringContext) -> MetricResult:
    """Fraction of context chunks with token F1 >= 0.10 against the expected answer."""
    inputs = _context_and_expected(case, output)
    if isinstance(inputs, MetricResult):
        return inputs
    f1s = _chunk_f1s(*inputs)
    return MetricResult.scored(sum(1 for f in f1s if f >= CHUNK_RELEVANCE_THRESHOLD) / len(f1s))


@_diagnostic("diagnostics.lexical_context_recall", needs=("context", "expected_answer"))
def lexical_context_recall(case: Case, output: CaseOutput, ctx: ScoringContext) -> MetricResult:
    """Token F1 between the joined context chunks and the expected answer."""
    inputs = _context_and_expected(case, output)
    if isinstance(inputs, MetricResult):
        return inputs
    chunks, expected = inputs
    return MetricResult.scored(token_f1_of_tokens(answer_tokens(" ".join(c.text for c in chunks)), expected))


def _grounding(answer: str, chunks: Sequence[Chunk]) -> float:
    value = faithfulness_value(answer, chunks)
    if value is not None:
        return value
    tokens = answer_tokens(answer)
    context = {t for c in chunks for t in answer_tokens(c.text)}
    return sum(1 for t in tokens if t in context) / len(tokens) if tokens else 0.0


def classify_failure(
    answer: str, expected_answer: str, chunks: Sequence[Chunk], numeric_tolerance: float
) -> str:
    """The failure category of one answer (module docstring: the order of the checks)."""
    if not answer.strip() or detect_refusal(answer):
        return REFUSAL
    expected = answer_tokens(expected_answer)
    if token_f1_of_tokens(answer_tokens(answer), expected) >= CORRECT_F1_THRESHOLD:
        return CORRECT
    if not chunks or max(_chunk_f1s(chunks, expected)) < CHUNK_RELEVANCE_THRESHOLD:
        return RETRIEVAL_MISS
    if numeric_score(answer, expected_answer, numeric_tolerance) == 1.0:
        return FORMAT_MISMATCH
    if _grounding(answer, chunks) < GROUNDING_THRESHOLD:
        return HALLUCINATION
    return WRONG_EXTRACTION


@_diagnostic("diagnostics.failure_category", needs=("answer", "expected_answer", "context"), categorical=True)
def failure_category(case: Case, output: CaseOutput, ctx: ScoringContext) -> MetricResult:
    """The most upstream failure of a qa case, as a label (refusal ... correct)."""
    expected = case.expected_answer or ""
    if not answer_tokens(expected):
        return MetricResult.skipped(REASON_EMPTY_EXPECTED)
    chunks = output.context_chunks() or []
    return MetricResult.category(
        classify_failure(output.answer_text, expected, chunks, ctx.settings.numeric_tolerance)
    )
