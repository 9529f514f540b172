"""Lexical diagnostics and the failure category."""

from __future__ import annotations

import pytest
from metric_helpers import chunk, make_case, make_output, score

from gate.metrics import registry
from gate.metrics.answer import REASON_EMPTY_EXPECTED, token_f1
from gate.metrics.base import REASON_NO_CONTEXT
from gate.metrics.diagnostics import (
    CATEGORIES,
    REASON_ANSWER_NO_TOKENS,
    REASON_EMPTY_ANSWER,
    REASON_EMPTY_CONTEXT,
    REASON_NO_LONG_SENTENCE,
    split_sentences,
)
from gate.model.records import Chunk

DIAGNOSTICS = (
    "diagnostics.lexical_faithfulness",
    "diagnostics.lexical_answer_relevance",
    "diagnostics.lexical_context_precision",
    "diagnostics.lexical_context_recall",
    "diagnostics.failure_category",
)

CONTEXT = [chunk("c1", "Refunds are accepted within 30 days of delivery."), chunk("c2", "Shipping is free.")]


def test_diagnostics_never_gate_by_default_and_category_is_categorical() -> None:
    for name in DIAGNOSTICS:
        assert registry()[name].gate_by_default is False
    assert registry()["diagnostics.failure_category"].categorical is True


def test_split_sentences() -> None:
    assert split_sentences("One two. Three four!  Five?") == ["One two.", "Three four!", "Five?"]


# ---------------------------------------------------------------- faithfulness


def test_lexical_faithfulness_mean_of_best_sentence_f1() -> None:
    answer = "Refunds are accepted within 30 days. Ok. The moon is made of cheese."
    out = make_output(CONTEXT, answer=answer)
    expected = (
        token_f1("Refunds are accepted within 30 days.", CONTEXT[0].text)
        + max(token_f1("The moon is made of cheese.", c.text) for c in CONTEXT)
    ) / 2
    assert score("diagnostics.lexical_faithfulness", make_case(), out).value == pytest.approx(expected)


def test_lexical_faithfulness_skips_where_peer_scores_0() -> None:
    cases = [
        (make_output(CONTEXT, answer="   "), REASON_EMPTY_ANSWER),
        (make_output([], answer="Refunds are accepted within 30 days."), REASON_EMPTY_CONTEXT),
        (make_output(CONTEXT, answer="Thirty days."), REASON_NO_LONG_SENTENCE),
        (make_output(None, answer="Refunds are accepted within 30 days."), REASON_NO_CONTEXT),
    ]
    for out, reason in cases:
        result = score("diagnostics.lexical_faithfulness", make_case(), out)
        assert (result.status, result.reason) == ("skipped", reason)


# ---------------------------------------------------------------- answer relevance


def test_lexical_answer_relevance_is_token_f1_with_question() -> None:
    case = make_case(question="What is the refund window?")
    out = make_output(answer="The refund window is 30 days.")
    # question [what, is, refund, window]; answer [refund, window, is, 30, days] -> 3 common
    assert score("diagnostics.lexical_answer_relevance", case, out).value == pytest.approx(2 * 3 / (4 + 5))


def test_lexical_answer_relevance_answer_without_tokens_skips() -> None:
    result = score("diagnostics.lexical_answer_relevance", make_case(), make_output(answer="The!"))
    assert (result.status, result.reason) == ("skipped", REASON_ANSWER_NO_TOKENS)


# ---------------------------------------------------------------- context precision / recall


def test_lexical_context_precision_fraction_of_chunks_over_threshold() -> None:
    case = make_case(expected_answer="within 30 days of delivery")
    out = make_output(CONTEXT + [chunk("c3", "Gift cards never expire.")])
    assert score("diagnostics.lexical_context_precision", case, out).value == pytest.approx(1 / 3)


def test_lexical_context_recall_joined_context_f1() -> None:
    case = make_case(expected_answer="within 30 days of delivery")
    out = make_output(CONTEXT)
    joined = " ".join(c.text for c in CONTEXT)
    assert score("diagnostics.lexical_context_recall", case, out).value == pytest.approx(
        token_f1(joined, "within 30 days of delivery")
    )


def test_context_diagnostics_skip_on_empty_context_and_empty_expected() -> None:
    for name in ("diagnostics.lexical_context_precision", "diagnostics.lexical_context_recall"):
        result = score(name, make_case(expected_answer="30 days"), make_output([]))
        assert (result.status, result.reason) == ("skipped", REASON_EMPTY_CONTEXT)
        result = score(name, make_case(expected_answer="the"), make_output(CONTEXT))
        assert (result.status, result.reason) == ("skipped", REASON_EMPTY_EXPECTED)


def test_diagnostics_apply_to_qa_only() -> None:
    for name in DIAGNOSTICS:
        result = score(
            name, make_case(kind="unanswerable", expected_answer="x"), make_output(CONTEXT, answer="x")
        )
        assert (result.status, result.reason) == ("skipped", "applies to qa cases only")


# ---------------------------------------------------------------- failure category


def category(answer: str, expected: str, context: list[Chunk] = CONTEXT) -> str | None:
    result = score(
        "diagnostics.failure_category",
        make_case(expected_answer=expected),
        make_output(context, answer=answer),
    )
    assert result.status == "scored"
    assert result.value is None
    return result.label


def test_failure_category_correct() -> None:
    assert category("Refunds are accepted within 30 days.", "within 30 days") == "correct"


def test_failure_category_refusal_is_checked_first() -> None:
    assert category("I don't know the refund window within 30 days.", "within 30 days") == "refusal"
    assert category("", "within 30 days") == "refusal"


def test_failure_category_retrieval_miss() -> None:
    assert (
        category("Ninety.", "within 30 days", [chunk("c9", "Shipping is free.")]) == "lexical_retrieval_miss"
    )
    assert category("Ninety.", "within 30 days", []) == "lexical_retrieval_miss"


def test_failure_category_format_mismatch() -> None:
    ctx = [chunk("c1", "Revenue was $1,038,765 thousand in 2023.")]
    assert (
        category("It came to about 1.04 billion USD overall.", "$1,038,765 thousand", ctx)
        == "format_mismatch"
    )


def test_failure_category_hallucination() -> None:
    assert category("Purple elephants dance under moonlight tonight.", "within 30 days") == "hallucination"


def test_failure_category_wrong_extraction() -> None:
    assert category("Shipping is free.", "within 30 days of delivery") == "wrong_extraction"


def test_failure_category_labels_are_the_documented_set() -> None:
    assert CATEGORIES == (
        "refusal",
        "lexical_retrieval_miss",
        "format_mismatch",
        "hallucination",
        "wrong_extraction",
        "correct",
    )


def test_failure_category_skips_without_context_or_with_empty_expected() -> None:
    result = score(
        "diagnostics.failure_category", make_case(expected_answer="x"), make_output(None, answer="y")
    )
    assert (result.status, result.reason) == ("skipped", REASON_NO_CONTEXT)
    result = score(
        "diagnostics.failure_category", make_case(expected_answer="a"), make_output(CONTEXT, answer="y")
    )
    assert (result.status, result.reason) == ("skipped", REASON_EMPTY_EXPECTED)
