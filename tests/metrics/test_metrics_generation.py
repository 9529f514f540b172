"""generation.citation_validity and echo.exact_match (metrics.md "Generation metrics")."""

from __future__ import annotations

from metric_helpers import chunk, make_case, make_output, score

from gate.metrics.base import REASON_NO_ANSWER, REASON_NO_CONTEXT, REASON_NO_EXPECTED_ANSWER
from gate.metrics.generation import REASON_NO_CITATIONS


def test_citation_validity_is_valid_over_total_cited() -> None:
    out = make_output(["a", "b", "c"], answer="x", citations=["a", "z"])
    assert score("generation.citation_validity", make_case(), out).value == 0.5


def test_citation_validity_citation_to_chunk_not_retrieved_is_invalid() -> None:
    out = make_output(["a"], answer="x", citations=["b"])
    assert score("generation.citation_validity", make_case(), out).value == 0.0


def test_citation_validity_dedups_cited_ids() -> None:
    out = make_output(["a"], answer="x", citations=["a", "a", "a", "z"])
    assert score("generation.citation_validity", make_case(), out).value == 0.5


def test_citation_validity_empty_retrieved_set_scores_0() -> None:
    out = make_output([], answer="x", citations=["a"])
    result = score("generation.citation_validity", make_case(), out)
    assert (result.status, result.value) == ("scored", 0.0)


def test_citation_validity_no_citations_skips() -> None:
    no_citations: tuple[list[str] | None, ...] = (None, [])
    for citations in no_citations:
        out = make_output(["a"], answer="x", citations=citations)
        result = score("generation.citation_validity", make_case(), out)
        assert (result.status, result.reason) == ("skipped", REASON_NO_CITATIONS)


def test_citation_validity_no_answer_skips() -> None:
    result = score("generation.citation_validity", make_case(), make_output(["a"]))
    assert (result.status, result.reason) == ("skipped", REASON_NO_ANSWER)


def test_citation_validity_prefers_answer_retrieved_chunks_over_retrieve() -> None:
    out = make_output(["a"], answer="x", citations=["b"], answer_chunks=[chunk("b")])
    assert score("generation.citation_validity", make_case(), out).value == 1.0


def test_citation_validity_falls_back_to_retrieve_result() -> None:
    out = make_output(["b"], answer="x", citations=["b"])
    assert score("generation.citation_validity", make_case(), out).value == 1.0


def test_citation_validity_without_any_context_skips() -> None:
    out = make_output(None, answer="x", citations=["b"])
    result = score("generation.citation_validity", make_case(), out)
    assert (result.status, result.reason) == ("skipped", REASON_NO_CONTEXT)


def test_echo_exact_match_strips_only_surrounding_whitespace() -> None:
    case = make_case(expected_answer="  30 days\n")
    assert score("echo.exact_match", case, make_output(answer="30 days  ")).value == 1.0
    assert score("echo.exact_match", case, make_output(answer="30 Days")).value == 0.0
    assert score("echo.exact_match", case, make_output(answer="30 days.")).value == 0.0


def test_echo_exact_match_skips_without_expected_answer_or_answer() -> None:
    result = score("echo.exact_match", make_case(), make_output(answer="x"))
    assert (result.status, result.reason) == ("skipped", REASON_NO_EXPECTED_ANSWER)
    result = score("echo.exact_match", make_case(expected_answer="x"), make_output(["a"]))
    assert (result.status, result.reason) == ("skipped", REASON_NO_ANSWER)
